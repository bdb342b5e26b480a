//! The Lambda runtime loop every HTTP function runs, compiled once here.
//!
//! `lambda_http::run` is generic over the handler: called from each
//! `functions/*` binary with its own closure, it made every binary an
//! optimised build of the runtime, hyper and tower of its own (about 30 s
//! each in release, one after another under `sam build`). Behind a boxed
//! handler it is one instantiation, in this crate, and a binary is a link.

use super::HandlerResult;
use crate::App;
use lambda_http::{Request, service_fn};
use std::future::Future;
use std::pin::Pin;

/// A route's handler, its future boxed (one allocation per request).
pub type Handler =
    for<'a> fn(&'a App, Request) -> Pin<Box<dyn Future<Output = HandlerResult> + Send + 'a>>;

/// Builds the [`App`] (or exits: a function that cannot start must not take
/// requests), then answers every invocation with `handler`.
pub async fn serve(handler: Handler) -> Result<(), lambda_http::Error> {
    let app = App::from_env_or_exit().await;
    lambda_http::run(service_fn(|request| handler(&app, request))).await
}

/// [`serve`] for a handler that needs no [`App`] (the `$default` route).
pub async fn serve_without_app(
    handler: fn(Request) -> Pin<Box<dyn Future<Output = HandlerResult> + Send>>,
) -> Result<(), lambda_http::Error> {
    crate::telemetry::init();
    lambda_http::run(service_fn(handler)).await
}
