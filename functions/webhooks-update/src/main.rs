//! Lambda function: `shared::http::patch_webhook`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("PATCH /webhooks/{id}", |app, request| {
        Box::pin(shared::http::patch_webhook(app, request))
    })
    .await
}
