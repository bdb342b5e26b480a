//! The Lambda loop of an API function: every request one observed
//! invocation (its log lines, its summary, its metrics: `telemetry`).

use super::HandlerResult;
use crate::telemetry;
use lambda_http::{Request, RequestExt, service_fn};
use std::future::Future;

/// Serves `handler` for `route` (its template as API Gateway names it,
/// `POST /slots/{id}/hold`; `$default` for the catch-all) until the
/// runtime stops. Each function serves one route and names it, so its
/// lines read the same under `make dev`'s emulator and API Gateway.
pub async fn serve<F, Fut>(route: &'static str, handler: F) -> Result<(), lambda_http::Error>
where
    F: Fn(Request) -> Fut,
    Fut: Future<Output = HandlerResult> + Send,
{
    let served = lambda_http::run(service_fn(|request: Request| {
        let request_id = request
            .lambda_context_ref()
            .map(|context| context.request_id.clone())
            .unwrap_or_default();
        telemetry::invoke(request_id, route, handler(request), status_of)
    }))
    .await;
    telemetry::exit_on_error(served)
}

fn status_of(result: &HandlerResult) -> Option<u16> {
    Some(match result {
        Ok(response) => response.status().as_u16(),
        // A failed invocation: API Gateway answers a bare 500.
        Err(_) => 500,
    })
}
