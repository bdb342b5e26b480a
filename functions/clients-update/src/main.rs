//! Lambda function: `shared::http::patch_client`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("PATCH /clients/{id}", |app, request| {
        Box::pin(shared::http::patch_client(app, request))
    })
    .await
}
