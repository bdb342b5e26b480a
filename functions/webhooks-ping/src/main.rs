//! Lambda function: `shared::http::ping_webhook`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("POST /webhooks/{id}/ping", |app, request| {
        Box::pin(shared::http::ping_webhook(app, request))
    })
    .await
}
