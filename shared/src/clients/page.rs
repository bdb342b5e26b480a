//! `GET /clients` a page at a time (SPEC §16): oldest first, keyset by id,
//! with an opaque cursor to the next page.
//!
//! The cursor is the last id of the page, versioned and tagged (URL-safe
//! base64 of `version (1) | last id (8) | tag (4)`; the tag is the first 4
//! bytes of SHA-256 over a label and the 9 bytes before it). As for the
//! availability cursor, the tag is a checksum, not a MAC: it refuses (422
//! `cursor`) what the server never issued; a forged one that passes it
//! only names an id to continue after, which any admin may list anyway.

use super::admin::{ClientRow, PAGE_CLIENTS, client};
use super::{Client, ClientAdmin, ClientId};
use crate::db;
use crate::error::Error;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// Clients per page: `limit` 1 to this, [`DEFAULT_CLIENTS`] when absent.
pub const MAX_CLIENTS: u32 = 1000;
pub const DEFAULT_CLIENTS: u32 = 100;

const VERSION: u8 = 1;
const LABEL: &[u8] = b"slot-booking clients cursor";

/// Where a page starts: after this client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientCursor(pub ClientId);

impl ClientCursor {
    pub fn encode(&self) -> String {
        let mut bytes = vec![VERSION];
        bytes.extend_from_slice(&self.0.0.to_be_bytes());
        let tag = tag(&bytes);
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// `None` for anything this server did not issue.
    pub fn decode(raw: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(raw).ok()?;
        let (payload, got) = bytes.split_at_checked(9)?;
        if payload[0] != VERSION || got != tag(payload) {
            return None;
        }
        let id = u64::from_be_bytes(payload[1..9].try_into().ok()?);
        Some(Self(ClientId(id)))
    }
}

fn tag(payload: &[u8]) -> [u8; 4] {
    let digest = Sha256::new()
        .chain_update(LABEL)
        .chain_update(payload)
        .finalize();
    let mut tag = [0; 4];
    tag.copy_from_slice(&digest[..4]);
    tag
}

/// One page, and the cursor to the next when more clients follow.
#[derive(Debug)]
pub struct ClientPage {
    pub clients: Vec<Client>,
    pub next: Option<ClientCursor>,
}

impl ClientAdmin {
    /// Up to `limit` clients after `after`, oldest first, without keys or
    /// hashes. One more row is read to know whether a next page exists.
    pub async fn page(
        &self,
        after: Option<ClientCursor>,
        limit: u32,
        deadline: tokio::time::Instant,
    ) -> Result<ClientPage, Error> {
        let after = after.map_or(0, |cursor| cursor.0.0);
        let rows: Vec<ClientRow> = db::transact!(&self.pool, "client list", deadline, |conn| {
            Ok(sqlx::query_as(PAGE_CLIENTS)
                .bind(after)
                .bind(limit + 1)
                .fetch_all(&mut *conn)
                .await?)
        })?;
        let mut clients = rows
            .into_iter()
            .map(client)
            .collect::<Result<Vec<_>, _>>()?;
        let next = (clients.len() > limit as usize).then(|| {
            clients.truncate(limit as usize);
            ClientCursor(clients[clients.len() - 1].id)
        });
        Ok(ClientPage { clients, next })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_decodes_to_what_was_encoded_and_nothing_else_decodes() {
        for id in [0, 1, 42, u64::MAX] {
            let cursor = ClientCursor(ClientId(id));
            assert_eq!(ClientCursor::decode(&cursor.encode()), Some(cursor));
        }
        let real = ClientCursor(ClientId(7)).encode();
        let mut flipped = URL_SAFE_NO_PAD.decode(&real).unwrap();
        flipped[4] ^= 1;
        let truncated = &real[..real.len() - 2];
        for bad in [
            URL_SAFE_NO_PAD.encode(flipped),
            truncated.to_string(),
            String::new(),
            "7".into(),
            "!!!".into(),
            URL_SAFE_NO_PAD.encode([0u8; 64]),
        ] {
            assert_eq!(ClientCursor::decode(&bad), None, "{bad:?}");
        }
    }
}
