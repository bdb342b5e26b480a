//! Lambda function: the `Custom::Migrations` resource, `shared::migrate`.

use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use serde_json::Value;
use shared::migrate;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let http = migrate::http_client();
    run(service_fn(|event: LambdaEvent<Value>| {
        let budget = migrate::retry_budget(event.context.deadline());
        let http = &http;
        async move {
            migrate::handle(&event.payload, migrate::target_from_env(), budget, http).await?;
            Ok::<_, Error>(())
        }
    }))
    .await
}
