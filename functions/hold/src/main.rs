//! Lambda function: `shared::http::hold`.

use lambda_http::Error;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    shared::http::serve("POST /slots/{id}/hold", |request| {
        shared::http::hold(&app, request)
    })
    .await
}
