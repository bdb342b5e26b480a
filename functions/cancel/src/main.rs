//! Lambda function: `shared::http::cancel`.

use lambda_http::Error;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    shared::http::serve("DELETE /holds/{id}", |request| {
        shared::http::cancel(&app, request)
    })
    .await
}
