//! `POST /webhooks/{id}/ping` (SPEC §20, §23.11): a `webhook.ping` event
//! delivered now, in the request, signed as every delivery (`prepare.rs`)
//! and sent by the same sender (`send.rs`), to the URL's address checked
//! now as at every attempt (`WEBHOOK_ALLOW_PRIVATE`). The answer is the
//! receiver's: a ping is not a delivery (no row, no attempt counted), is
//! not in the feed, and never disables its subscription, whatever the
//! receiver answers (a 410 too). A disabled subscription may be pinged:
//! it is how its client checks the endpoint before enabling it again.
//!
//! Its `webhook-id` is `ping_<uuid v4>`: fresh on every ping, and never a
//! feed event's id (those are digits), so a receiver that deduplicates by
//! id never drops a real event for a ping's sake.
//!
//! On AWS the API functions run in the VPC without a route to the
//! internet: a ping from there reaches only what the VPC reaches until it
//! is sent through the `webhooks-send` function (docs/DEPLOY.md, open
//! point).

use super::Webhooks;
use super::prepare::{NotSent, Request, sign};
use super::send::{Answer, send};
use super::subscription::WebhookId;
use crate::clients::Caller;
use crate::db;
use crate::error::Error;
use chrono::{SecondsFormat, Utc};
use serde_json::json;
use tokio::time::Instant;

/// The subscription's owner, URL and secrets: the previous secret only
/// while it still signs (as `claim.rs` reads them). A deleted one is not
/// found.
const FIND_SIGNING: &str = "SELECT client_id, url, secret_sealed, \
     IF(previous_until > UTC_TIMESTAMP(6), previous_sealed, NULL) \
     FROM webhook_subscriptions WHERE id = ? AND deleted_at IS NULL";

type Row = (u64, String, Vec<u8>, Option<Vec<u8>>);

impl Webhooks {
    /// Pings subscription `id`: the receiver's status (or why there was
    /// none) and the time it took. Another client's subscription (the
    /// caller no admin) is a 404 as a missing one.
    pub async fn ping(
        &self,
        caller: &Caller,
        id: WebhookId,
        deadline: Instant,
    ) -> Result<Answer, Error> {
        let key = self.key()?;
        let row: Option<Row> = db::transact!(&self.pool, "webhook ping", deadline, |conn| {
            Ok(sqlx::query_as(FIND_SIGNING)
                .bind(id.0)
                .fetch_optional(&mut *conn)
                .await?)
        })?;
        let (_, url, secret_sealed, previous_sealed) = row
            .filter(|row| caller.may_touch(crate::domain::ClientId(row.0)))
            .ok_or(Error::NotFound("webhook"))?;
        let now = Utc::now();
        let ping_id = format!("ping_{}", uuid::Uuid::new_v4().simple());
        // The feed's event shape (SPEC §12): `id`, `type`, `occurred_at`,
        // `data`.
        let body = json!({
            "id": ping_id,
            "type": super::event_types::PING,
            "occurred_at": now.to_rfc3339_opts(SecondsFormat::Micros, true),
            "data": {"subscription_id": id.0},
        })
        .to_string();
        let request = Request {
            url: &url,
            secret_sealed: &secret_sealed,
            previous_sealed: previous_sealed.as_deref(),
            id: ping_id,
            body,
        };
        let timeout_ms = self.ping_timeout.as_millis() as u64;
        match sign(request, key, &self.rules, timeout_ms, now.timestamp()).await {
            Ok(outgoing) => Ok(send(&outgoing).await),
            Err(NotSent::Refused(error)) => Ok(Answer::refused(error)),
            Err(NotSent::Internal(message)) => Err(Error::Internal(sqlx::Error::Protocol(message))),
        }
    }
}
