//! Lambda function: `shared::http::create_client`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve(|app, request| Box::pin(shared::http::create_client(app, request))).await
}
