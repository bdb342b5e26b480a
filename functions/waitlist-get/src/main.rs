//! Lambda function: `shared::http::get_entry`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("GET /waitlist/{id}", |app, request| {
        Box::pin(shared::http::get_entry(app, request))
    })
    .await
}
