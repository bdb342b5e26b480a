//! Lambda function: `shared::http::delete_webhook`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("DELETE /webhooks/{id}", |app, request| {
        Box::pin(shared::http::delete_webhook(app, request))
    })
    .await
}
