//! Lambda function: `shared::http::list_webhooks`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("GET /webhooks", |app, request| {
        Box::pin(shared::http::list_webhooks(app, request))
    })
    .await
}
