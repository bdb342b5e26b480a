//! Lambda function: `shared::http::extend_hold`.

use lambda_http::Error;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    shared::http::serve("POST /holds/{id}/extend", |request| {
        shared::http::extend_hold(&app, request)
    })
    .await
}
