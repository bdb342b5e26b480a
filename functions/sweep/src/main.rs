//! Lambda function: the scheduled sweeper, `Booking::reclaim_expired`.
//!
//! Correctness never waits for it (expiry is exact without it); it keeps
//! the "expired but still counted" holds few, so reads stay cheap.

use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use serde_json::{Value, json};

/// Slots reclaimed per invocation: one short transaction each.
const SLOTS_PER_RUN: u32 = 500;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    run(service_fn(|_: LambdaEvent<Value>| async {
        // Boxed: the sweep's future is deep enough to overflow the
        // compiler's layout depth limit when inlined into the runtime's.
        let reclaimed = Box::pin(app.booking.reclaim_expired(SLOTS_PER_RUN)).await?;
        tracing::info!(reclaimed, "expired holds reclaimed");
        Ok::<_, Error>(json!({ "reclaimed": reclaimed }))
    }))
    .await
}
