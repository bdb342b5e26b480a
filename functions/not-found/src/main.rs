//! Lambda function: the `$default` route, `shared::http::not_found`. No
//! database or cache: it only answers.

use lambda_http::Error;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    shared::http::serve("$default", shared::http::not_found).await
}
