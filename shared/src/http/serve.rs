//! The Lambda loop of an API function: every request one observed
//! invocation (its log lines, its summary, its metrics: `telemetry`), and
//! every answer, whatever built it, leaves with the headers of
//! [`super::finish`].
//!
//! The handler is a plain `fn` whose future is boxed, so that this loop —
//! `lambda_http::run`, generic over its service, and with it the runtime,
//! hyper and tower — is compiled once, in this crate. Called generically
//! from each `functions/*` binary it made every binary an optimised build of
//! all of them of its own (about 30 s each in release, one after another
//! under `sam build`); now a binary is little more than a link. The cost is
//! one allocation per request.

use super::HandlerResult;
use crate::{App, telemetry};
use lambda_http::{Request, RequestExt, service_fn};
use std::future::Future;
use std::pin::Pin;

/// A route's handler.
pub type Handler =
    for<'a> fn(&'a App, Request) -> Pin<Box<dyn Future<Output = HandlerResult> + Send + 'a>>;

/// A handler that needs no [`App`] (the `$default` route).
pub type PlainHandler = fn(Request) -> Pin<Box<dyn Future<Output = HandlerResult> + Send>>;

/// Builds the [`App`] (or exits: a function that cannot start must take no
/// request), then serves `handler` for `route` (its template as API
/// Gateway names it, `POST /slots/{id}/hold`) until the runtime stops. Each
/// function serves one route and names it, so its lines read the same
/// under `make dev`'s emulator and API Gateway.
pub async fn serve(route: &'static str, handler: Handler) -> Result<(), lambda_http::Error> {
    let app = App::from_env_or_exit().await;
    let app = &app;
    run(route, |request| {
        Box::pin(async move {
            let result = handler(app, request).await;
            // After a committed change: the publisher, spawned, never
            // awaited (`events::PublishTrigger`).
            if let (Some(trigger), Ok(response)) = (&app.publish_trigger, &result) {
                trigger.after(route, response.status().as_u16());
            }
            result
        })
    })
    .await
}

/// [`serve`] without an [`App`]: no database or cache.
pub async fn serve_without_app(
    route: &'static str,
    handler: PlainHandler,
) -> Result<(), lambda_http::Error> {
    telemetry::init();
    run(route, handler).await
}

async fn run<'a, F>(route: &'static str, handler: F) -> Result<(), lambda_http::Error>
where
    F: Fn(Request) -> Pin<Box<dyn Future<Output = HandlerResult> + Send + 'a>>,
{
    telemetry::exit_quietly_on_sigterm();
    let served = lambda_http::run(service_fn(|request: Request| {
        let request_id = request
            .lambda_context_ref()
            .map(|context| context.request_id.clone())
            .unwrap_or_default();
        let answer = handler(request);
        let answer = async move { answer.await.map(|response| super::finish(route, response)) };
        telemetry::invoke(request_id, route, answer, status_of)
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
