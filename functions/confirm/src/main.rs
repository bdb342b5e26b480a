//! Lambda function: `shared::http::confirm`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("POST /holds/{id}/confirm", |app, request| {
        Box::pin(shared::http::confirm(app, request))
    })
    .await
}
