//! Lambda function: `shared::http::create_webhook`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("POST /webhooks", |app, request| {
        Box::pin(shared::http::create_webhook(app, request))
    })
    .await
}
