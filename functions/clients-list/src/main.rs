//! Lambda function: `shared::http::list_clients`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("GET /clients", |app, request| {
        Box::pin(shared::http::list_clients(app, request))
    })
    .await
}
