//! Lambda function: `shared::http::availability`.

use lambda_http::{Error, run, service_fn};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    run(service_fn(|request| {
        shared::http::availability(&app, request)
    }))
    .await
}
