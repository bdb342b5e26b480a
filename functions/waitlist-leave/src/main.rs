//! Lambda function: `shared::http::leave_waitlist`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("DELETE /waitlist/{id}", |app, request| {
        Box::pin(shared::http::leave_waitlist(app, request))
    })
    .await
}
