//! Lambda function: `shared::http::delete_slot`.

use lambda_http::Error;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    shared::http::serve("DELETE /slots/{id}", |request| {
        shared::http::delete_slot(&app, request)
    })
    .await
}
