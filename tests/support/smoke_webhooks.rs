//! The smoke's webhooks steps (SPEC §20): a subscription made, listed,
//! read, changed, its secret rotated, pinged, its deliveries read, and
//! deleted. Its URL is `SMOKE_WEBHOOK_URL`, by default one on this
//! machine that `make dev` allows (http, loopback; nothing listens on the
//! discard port, so the ping answers `connection_failed`). Against a
//! deployed stack set it to a public `https://` URL: the template refuses
//! http and private addresses.

use crate::smoke::{Answer, Api, Call, Check, Step, ensure};
use reqwest::Method;
use serde_json::json;

const DEFAULT_URL: &str = "http://127.0.0.1:9/smoke-webhook";

fn check<'c>(f: impl FnOnce(&Answer) -> Result<(), String> + 'c) -> Check<'c> {
    Box::new(f)
}

/// The steps, in order; `made` holds the subscription while it exists, for
/// the smoke's clean-up. Returns how many ran.
pub async fn steps(api: &Api, made: &mut Option<u64>) -> Step<usize> {
    let url = std::env::var("SMOKE_WEBHOOK_URL").unwrap_or_else(|_| DEFAULT_URL.to_string());
    let created = api
        .send(
            Call::new(Method::POST, "/webhooks", "/webhooks").json(json!({
                "url": url, "event_types": ["hold.*", "slot.*"], "description": "smoke"
            })),
            201,
            check(|a| {
                let secret = a.body["secret"].as_str().unwrap_or_default();
                ensure(
                    a.id() > 0 && secret.starts_with("whsec_") && a.body["status"] == "enabled",
                    "an enabled subscription with its secret",
                )
            }),
        )
        .await?;
    let id = created.id();
    *made = Some(id);
    let path = format!("/webhooks/{id}");
    api.send(
        Call::new(Method::GET, "/webhooks", "/webhooks"),
        200,
        check(|a| {
            let page = a.body.as_array().into_iter().flatten();
            ensure(
                page.clone().all(|s| s.get("secret").is_none()),
                "a page of subscriptions, without secrets",
            )
        }),
    )
    .await?;
    api.send(
        Call::new(Method::GET, "/webhooks/{id}", path.clone()),
        200,
        check(move |a| {
            ensure(
                a.id() == id && a.body.get("secret").is_none(),
                "it, no secret",
            )
        }),
    )
    .await?;
    api.send(
        Call::new(Method::PATCH, "/webhooks/{id}", path.clone())
            .json(json!({"description": "smoke, changed"})),
        200,
        check(|a| {
            ensure(
                a.body["description"] == "smoke, changed",
                "its description changed",
            )
        }),
    )
    .await?;
    api.send(
        Call::new(
            Method::POST,
            "/webhooks/{id}/secret",
            format!("{path}/secret"),
        ),
        200,
        check(|a| {
            let secret = a.body["secret"].as_str().unwrap_or_default();
            ensure(secret.starts_with("whsec_"), "a new secret")
        }),
    )
    .await?;
    api.send(
        Call::new(Method::POST, "/webhooks/{id}/ping", format!("{path}/ping")),
        200,
        check(|a| {
            ensure(
                a.body["latency_ms"].is_number(),
                "the receiver's answer or why not",
            )
        }),
    )
    .await?;
    api.send(
        Call::new(
            Method::GET,
            "/webhooks/{id}/deliveries",
            format!("{path}/deliveries"),
        ),
        200,
        check(|a| ensure(a.body.is_array(), "a page of deliveries")),
    )
    .await?;
    api.send(
        Call::new(Method::DELETE, "/webhooks/{id}", path),
        200,
        check(move |a| ensure(a.id() == id, "the subscription, deleted")),
    )
    .await?;
    *made = None;
    Ok(8)
}
