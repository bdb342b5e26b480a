//! Lambda function: `shared::http::join_waitlist`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("POST /slots/{id}/waitlist", |app, request| {
        Box::pin(shared::http::join_waitlist(app, request))
    })
    .await
}
