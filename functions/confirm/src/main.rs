//! Lambda function: `shared::http::confirm`.

use lambda_http::Error;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    shared::http::serve("POST /holds/{id}/confirm", |request| {
        shared::http::confirm(&app, request)
    })
    .await
}
