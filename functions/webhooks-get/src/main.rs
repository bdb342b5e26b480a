//! Lambda function: `shared::http::get_webhook`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("GET /webhooks/{id}", |app, request| {
        Box::pin(shared::http::get_webhook(app, request))
    })
    .await
}
