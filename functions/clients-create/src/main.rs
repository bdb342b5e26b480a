//! Lambda function: `shared::http::create_client`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("POST /clients", |app, request| {
        Box::pin(shared::http::create_client(app, request))
    })
    .await
}
