//! Lambda function: `shared::http::create_slots`.

use lambda_http::Error;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    shared::http::serve("POST /slots", |request| {
        shared::http::create_slots(&app, request)
    })
    .await
}
