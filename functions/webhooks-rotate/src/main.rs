//! Lambda function: `shared::http::rotate_webhook_secret`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("POST /webhooks/{id}/secret", |app, request| {
        Box::pin(shared::http::rotate_webhook_secret(app, request))
    })
    .await
}
