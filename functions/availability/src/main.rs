//! Lambda function: `shared::http::availability`.

use lambda_http::Error;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    shared::http::serve("GET /slots/availability", |request| {
        shared::http::availability(&app, request)
    })
    .await
}
