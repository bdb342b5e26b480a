//! Lambda function: `shared::http::list_clients`.

use lambda_http::Error;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    shared::http::serve("GET /clients", |request| {
        shared::http::list_clients(&app, request)
    })
    .await
}
