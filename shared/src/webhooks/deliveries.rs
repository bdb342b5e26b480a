//! `GET /webhooks/{id}/deliveries` (SPEC §20, §23.3): a subscription's
//! deliveries, newest first, a page at a time as `GET /webhooks` (keyset
//! on the feed position `seq`, unique per subscription, by the index
//! `(subscription_id, seq)`; an opaque cursor under its own label). They
//! are kept as long as the feed keeps their events (`prune.rs`).

use super::Webhooks;
use super::page::{decode_position, encode_position};
use super::store::{FIND, find};
use super::subscription::WebhookId;
use crate::clients::Caller;
use crate::db;
use crate::domain::utc_micros_opt;
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::time::Instant;

const LABEL: &[u8] = b"slot-booking webhook deliveries cursor";

/// Newest first, before the cursor's position (`u64::MAX` for the first
/// page).
const PAGE: &str = "SELECT seq, event_id, event_type, status, attempts, last_status_code, \
     last_error, last_attempt_at, next_attempt_at, delivered_at \
     FROM webhook_deliveries WHERE subscription_id = ? AND seq < ? \
     ORDER BY seq DESC LIMIT ?";

/// Where a page starts: before this feed position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryCursor(u64);

impl DeliveryCursor {
    pub fn encode(&self) -> String {
        encode_position(LABEL, self.0)
    }

    /// `None` for anything this server did not issue.
    pub fn decode(raw: &str) -> Option<Self> {
        decode_position(LABEL, raw).map(Self)
    }
}

/// One delivery as the route shows it (SPEC §20). `event_id` is the
/// feed's `id` and the request's `webhook-id`: a string, as there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivery {
    pub event_id: String,
    pub event_type: String,
    /// `pending`, `delivered` or `failed` (the column's ENUM).
    pub status: String,
    pub attempts: u32,
    pub last_status_code: Option<u16>,
    pub last_error: Option<String>,
    #[serde(serialize_with = "utc_micros_opt")]
    pub last_attempt_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "utc_micros_opt")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "utc_micros_opt")]
    pub delivered_at: Option<DateTime<Utc>>,
}

type Row = (
    u64,
    u64,
    String,
    String,
    u32,
    Option<u16>,
    Option<String>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
);

/// One page, and the cursor to the next when more follow.
#[derive(Debug)]
pub struct DeliveryPage {
    pub deliveries: Vec<Delivery>,
    pub next: Option<DeliveryCursor>,
}

impl Webhooks {
    /// Up to `limit` deliveries of subscription `id` before `before`,
    /// newest first. Another client's subscription (the caller no admin),
    /// or a deleted one, is a 404 as `GET /webhooks/{id}` answers.
    pub async fn deliveries(
        &self,
        caller: &Caller,
        id: WebhookId,
        before: Option<DeliveryCursor>,
        limit: u32,
        deadline: Instant,
    ) -> Result<DeliveryPage, Error> {
        let before = before.map_or(u64::MAX, |cursor| cursor.0);
        let rows: Vec<Row> = db::transact!(&self.pool, "webhook deliveries", deadline, |conn| {
            find(&mut conn, caller, id, FIND).await?;
            Ok(sqlx::query_as(PAGE)
                .bind(id.0)
                .bind(before)
                .bind(limit + 1)
                .fetch_all(&mut *conn)
                .await?)
        })?;
        let more = rows.len() > limit as usize;
        let rows = &rows[..rows.len().min(limit as usize)];
        let next = more.then(|| DeliveryCursor(rows[rows.len() - 1].0));
        let deliveries = rows
            .iter()
            .cloned()
            .map(|row| Delivery {
                event_id: row.1.to_string(),
                event_type: row.2,
                status: row.3,
                attempts: row.4,
                last_status_code: row.5,
                last_error: row.6,
                last_attempt_at: row.7,
                next_attempt_at: row.8,
                delivered_at: row.9,
            })
            .collect();
        Ok(DeliveryPage { deliveries, next })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhooks::{WebhookCursor, WebhookId};

    #[test]
    fn a_cursor_decodes_to_what_was_encoded_and_a_subscriptions_cursor_does_not() {
        for seq in [0, 1, 42, u64::MAX] {
            let cursor = DeliveryCursor(seq);
            assert_eq!(DeliveryCursor::decode(&cursor.encode()), Some(cursor));
        }
        let other = WebhookCursor(WebhookId(7)).encode();
        assert_eq!(DeliveryCursor::decode(&other), None);
    }
}
