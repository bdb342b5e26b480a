//! Lambda function: the webhooks' sender on AWS (SPEC §20, "On AWS").
//!
//! The worker (`webhooks-deliver`) runs in the VPC, which has no route to
//! the internet (no NAT gateway); it claims, signs and records, and
//! invokes this function, outside the VPC, with each signed request
//! (`webhooks::invoke`). This one only sends (`webhooks::send`): to the
//! address the worker resolved and checked, never resolved again, the
//! URL's host for TLS and `Host`, no redirect, the timeout, 64 KiB of the
//! answer read. No database, no secret, no AWS call: its role has its log
//! group only. Not an API route.
//!
//! The event is one `send::Outgoing` (answered by one `send::Answer`) or
//! an array of them (answered in order, sent at once).

use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use serde::{Deserialize, Serialize};
use shared::telemetry;
use shared::webhooks::send::{Answer, Outgoing, send};

#[derive(Deserialize)]
#[serde(untagged)]
enum Requests {
    One(Outgoing),
    Batch(Vec<Outgoing>),
}

#[derive(Serialize)]
#[serde(untagged)]
enum Answers {
    One(Answer),
    Batch(Vec<Answer>),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    telemetry::init();
    telemetry::exit_quietly_on_sigterm();
    let served = run(service_fn(|event: LambdaEvent<Requests>| async move {
        let request_id = event.context.request_id.clone();
        let sent = answer(event.payload);
        Ok::<_, Error>(telemetry::invoke(request_id, "invoke", sent, |_| None).await)
    }))
    .await;
    telemetry::exit_on_error(served)
}

async fn answer(requests: Requests) -> Answers {
    match requests {
        Requests::One(outgoing) => Answers::One(send(&outgoing).await),
        Requests::Batch(batch) => {
            Answers::Batch(futures_util::future::join_all(batch.iter().map(send)).await)
        }
    }
}
