//! Lambda function: the `Custom::Migrations` resource, `shared::migrate`.

use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use serde_json::Value;
use shared::migrate;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let http = migrate::http_client();
    let served = run(service_fn(|event: LambdaEvent<Value>| {
        let budget = migrate::retry_budget(event.context.deadline());
        let request_id = event.context.request_id.clone();
        let http = &http;
        let work = async move {
            migrate::handle(&event.payload, migrate::target_from_env(), budget, http).await?;
            Ok::<_, Error>(())
        };
        // Its lines carry the invocation's id, like every function's.
        shared::telemetry::invoke(request_id, "custom-resource", work, |_| None)
    }))
    .await;
    shared::telemetry::exit_on_error(served)
}
