//! Lambda function: `shared::http::revoke_client`.

use lambda_http::Error;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    shared::http::serve("DELETE /clients/{id}", |request| {
        shared::http::revoke_client(&app, request)
    })
    .await
}
