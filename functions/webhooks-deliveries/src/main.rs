//! Lambda function: `shared::http::list_webhook_deliveries`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("GET /webhooks/{id}/deliveries", |app, request| {
        Box::pin(shared::http::list_webhook_deliveries(app, request))
    })
    .await
}
