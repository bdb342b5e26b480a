//! `GET /webhooks` a page at a time, as `GET /clients` (SPEC §16, §20):
//! oldest first, keyset by id, with an opaque cursor to the next page. A
//! booker's are its own; an admin's are everyone's, or one client's.
//!
//! The cursor is `clients/page.rs`'s, under its own label: the last id of
//! the page, versioned and tagged (a checksum that refuses what the server
//! never issued, not a MAC: a forged one only names an id to list after,
//! within what the caller may list anyway).

use super::Webhooks;
use super::subscription::{Row, Subscription, WebhookId, subscription, subscription_columns};
use crate::clients::{Caller, ClientId, Role};
use crate::db;
use crate::error::Error;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

/// Subscriptions per page: `limit` 1 to this, [`DEFAULT_WEBHOOKS`] when
/// absent (`GET /clients`'s).
pub const MAX_WEBHOOKS: u32 = 1000;
pub const DEFAULT_WEBHOOKS: u32 = 100;

const VERSION: u8 = 1;
const LABEL: &[u8] = b"slot-booking webhooks cursor";

const PAGE_ALL: &str = concat!(
    subscription_columns!(),
    " WHERE id > ? AND deleted_at IS NULL ORDER BY id LIMIT ?"
);
/// One client's, on `(client_id, id)`.
const PAGE_CLIENT: &str = concat!(
    subscription_columns!(),
    " WHERE client_id = ? AND id > ? AND deleted_at IS NULL ORDER BY id LIMIT ?"
);

/// Where a page starts: after this subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookCursor(pub WebhookId);

impl WebhookCursor {
    pub fn encode(&self) -> String {
        encode_position(LABEL, self.0.0)
    }

    /// `None` for anything this server did not issue.
    pub fn decode(raw: &str) -> Option<Self> {
        decode_position(LABEL, raw).map(|id| Self(WebhookId(id)))
    }
}

/// A position in a keyset page, versioned and tagged under `label` (each
/// listing its own: one's cursor is refused by another).
pub(super) fn encode_position(label: &[u8], position: u64) -> String {
    let mut bytes = vec![VERSION];
    bytes.extend_from_slice(&position.to_be_bytes());
    let tag = tag(label, &bytes);
    bytes.extend_from_slice(&tag);
    URL_SAFE_NO_PAD.encode(bytes)
}

pub(super) fn decode_position(label: &[u8], raw: &str) -> Option<u64> {
    let bytes = URL_SAFE_NO_PAD.decode(raw).ok()?;
    let (payload, got) = bytes.split_at_checked(9)?;
    if payload[0] != VERSION || got != tag(label, payload) {
        return None;
    }
    Some(u64::from_be_bytes(payload[1..9].try_into().ok()?))
}

fn tag(label: &[u8], payload: &[u8]) -> [u8; 4] {
    let digest = Sha256::new()
        .chain_update(label)
        .chain_update(payload)
        .finalize();
    let mut tag = [0; 4];
    tag.copy_from_slice(&digest[..4]);
    tag
}

/// One page, and the cursor to the next when more follow.
#[derive(Debug)]
pub struct WebhookPage {
    pub subscriptions: Vec<Subscription>,
    pub next: Option<WebhookCursor>,
}

impl Webhooks {
    /// Up to `limit` subscriptions after `after`, oldest first: the
    /// caller's own, or for an admin every client's (`client` one's). A
    /// booker naming another client lists nothing: no answer tells it
    /// whether that client has any.
    pub async fn page(
        &self,
        caller: &Caller,
        client: Option<ClientId>,
        after: Option<WebhookCursor>,
        limit: u32,
        deadline: Instant,
    ) -> Result<WebhookPage, Error> {
        let owner = match (caller.role, client) {
            (Role::Admin, client) => client,
            (Role::Booker, Some(other)) if other != caller.id => {
                return Ok(WebhookPage {
                    subscriptions: Vec::new(),
                    next: None,
                });
            }
            (Role::Booker, _) => Some(caller.id),
        };
        let after = after.map_or(0, |cursor| cursor.0.0);
        let rows: Vec<Row> = db::transact!(&self.pool, "webhook list", deadline, |conn| {
            let query = match owner {
                Some(owner) => sqlx::query_as(PAGE_CLIENT).bind(owner.0),
                None => sqlx::query_as(PAGE_ALL),
            };
            Ok(query
                .bind(after)
                .bind(limit + 1)
                .fetch_all(&mut *conn)
                .await?)
        })?;
        let mut subscriptions = rows
            .into_iter()
            .map(subscription)
            .collect::<Result<Vec<_>, _>>()?;
        let next = (subscriptions.len() > limit as usize).then(|| {
            subscriptions.truncate(limit as usize);
            WebhookCursor(subscriptions[subscriptions.len() - 1].id)
        });
        Ok(WebhookPage {
            subscriptions,
            next,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_decodes_to_what_was_encoded_and_no_clients_cursor_does() {
        for id in [0, 1, 42, u64::MAX] {
            let cursor = WebhookCursor(WebhookId(id));
            assert_eq!(WebhookCursor::decode(&cursor.encode()), Some(cursor));
        }
        let clients = crate::clients::ClientCursor(ClientId(7)).encode();
        assert_eq!(WebhookCursor::decode(&clients), None);
        for bad in ["", "7", "!!!"] {
            assert_eq!(WebhookCursor::decode(bad), None, "{bad:?}");
        }
    }
}
