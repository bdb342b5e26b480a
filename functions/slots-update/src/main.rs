//! Lambda function: `shared::http::update_slot`.

use lambda_http::Error;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    shared::http::serve("PATCH /slots/{id}", |request| {
        shared::http::update_slot(&app, request)
    })
    .await
}
