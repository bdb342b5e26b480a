//! `PATCH /clients/{id}` (SPEC §16): an admin changes a client's limits,
//! `rate_limit_per_second` and `max_held_seats`. Functions read them with
//! the key's look-up, cached up to 30 s: a change applies within that, as
//! a revocation does. A lowered cap never touches existing holds; it
//! refuses new ones until the client is under it.

use super::admin::{CAP, LOCK_CLIENT, RATE, find, limit, limit_message};
use super::gate::Gate;
use super::{ANONYMOUS, Client, ClientAdmin, ClientId};
use crate::db;
use crate::error::{Error, FieldErrors, sent_name};
use serde_json::Value;
use sqlx::{Connection, MySqlConnection};
use std::time::Duration;

/// The limits a patch sets: `None` leaves one as it is; `Some(None)` gives
/// it back to the configured default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientPatch {
    pub rate_limit_per_second: Option<Option<u32>>,
    pub max_held_seats: Option<Option<u32>>,
}

impl ClientPatch {
    /// `{"rate_limit_per_second": n|null, "max_held_seats": n|null}`, each
    /// optional. `name` and `role` are refused under their own names, as is
    /// any unknown field; every problem at once.
    pub fn from_json(body: &Value) -> Result<Self, Error> {
        let Some(fields) = body.as_object() else {
            return Err(Error::invalid("body", "The body must be a JSON object."));
        };
        let mut errors = FieldErrors::new();
        let mut patch = Self::default();
        for (field, value) in fields {
            let mut fail = |message: String| {
                let name = sent_name(field);
                errors.entry(name.into()).or_default().push(message);
            };
            match field.as_str() {
                "rate_limit_per_second" => match limit(Some(value), RATE.1) {
                    Some(rate) => patch.rate_limit_per_second = Some(rate),
                    None => fail(limit_message("rate limit", RATE.1)),
                },
                "max_held_seats" => match limit(Some(value), CAP.1) {
                    Some(cap) => patch.max_held_seats = Some(cap),
                    None => fail(limit_message("cap on held seats", CAP.1)),
                },
                "name" | "role" => fail(format!(
                    "The {field} of a client cannot be changed; create another client instead."
                )),
                other => fail(format!(
                    "The {:?} field is not allowed; a patch takes rate_limit_per_second and \
                     max_held_seats.",
                    sent_name(other)
                )),
            }
        }
        if errors.is_empty() {
            Ok(patch)
        } else {
            Err(Error::Validation(errors))
        }
    }
}

impl ClientAdmin {
    /// Applies `patch` to client `id` → the client as it is now. 404 for no
    /// such client, 403 for the built-in `anonymous`, 409 `client_revoked`.
    /// Idempotent: a retry after a lost COMMIT sets the same values again.
    pub async fn patch(
        &self,
        id: ClientId,
        patch: &ClientPatch,
        deadline: tokio::time::Instant,
    ) -> Result<Client, Error> {
        db::transact!(&self.pool, "client patch", deadline, |conn| {
            patch_once(&mut conn, id, patch).await
        })
    }
}

/// Each limit is set only when the patch names it (`IF(?, ?, column)`).
const APPLY: &str = "UPDATE api_clients SET \
     rate_limit_per_second = IF(?, ?, rate_limit_per_second), \
     max_held_seats = IF(?, ?, max_held_seats) WHERE id = ?";

/// A changed cap: the client's allowance is counted again by its first
/// capped hold after the window in which an environment may still hold
/// under the old one (a key's look-up lives [`Gate::LOOKUP_LIFETIME`], a
/// request 10 s at most, with room). Its row first: the order of a capped
/// hold (docs/DESIGN.md, "One client's cap"). Binds: client, seconds.
const RECOUNT: &str = "INSERT INTO client_allowances (client_id, held, counted_at, recount_after) \
     VALUES (?, 0, '1000-01-01', UTC_TIMESTAMP(6) + INTERVAL ? SECOND) \
     ON DUPLICATE KEY UPDATE recount_after = GREATEST(recount_after, VALUES(recount_after))";

/// [`RECOUNT`]'s window.
const RECOUNT_WINDOW: Duration = Duration::from_secs(Gate::LOOKUP_LIFETIME.as_secs() + 30);

async fn patch_once(
    conn: &mut MySqlConnection,
    id: ClientId,
    patch: &ClientPatch,
) -> Result<Client, Error> {
    let mut tx = conn.begin().await?;
    if patch.max_held_seats.is_some() {
        sqlx::query(RECOUNT)
            .bind(id.0)
            .bind(RECOUNT_WINDOW.as_secs())
            .execute(&mut *tx)
            .await?;
    }
    // The row's lock first: a revocation in flight either committed before
    // (409 here) or waits for this change.
    let target = find(&mut tx, id, LOCK_CLIENT).await?;
    if id == ANONYMOUS {
        return Err(Error::BuiltInClient(id));
    }
    if target.revoked_at.is_some() {
        return Err(Error::ClientRevoked(id));
    }
    sqlx::query(APPLY)
        .bind(patch.rate_limit_per_second.is_some())
        .bind(patch.rate_limit_per_second.flatten())
        .bind(patch.max_held_seats.is_some())
        .bind(patch.max_held_seats.flatten())
        .bind(id.0)
        .execute(&mut *tx)
        .await?;
    let client = find(&mut tx, id, LOCK_CLIENT).await?;
    tx.commit().await?;
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_patch_names_what_it_sets_and_refuses_everything_else_under_its_name() {
        let patch = ClientPatch::from_json(&json!({"max_held_seats": 10})).unwrap();
        assert_eq!(
            patch,
            ClientPatch {
                rate_limit_per_second: None,
                max_held_seats: Some(Some(10)),
            }
        );
        let reset = json!({"rate_limit_per_second": null, "max_held_seats": 0});
        let reset = ClientPatch::from_json(&reset).unwrap();
        assert_eq!(reset.rate_limit_per_second, Some(None), "null: the default");
        assert_eq!(reset.max_held_seats, Some(Some(0)), "0: unlimited");
        assert_eq!(
            ClientPatch::from_json(&json!({})).unwrap(),
            ClientPatch::default()
        );

        let bad = json!({"name": "x", "role": "admin", "seats": 1, "max_held_seats": -1});
        let Err(Error::Validation(errors)) = ClientPatch::from_json(&bad) else {
            panic!("refused")
        };
        let fields: Vec<&str> = errors.keys().map(|k| k.as_ref()).collect();
        assert_eq!(fields, ["max_held_seats", "name", "role", "seats"]);
        assert!(matches!(
            ClientPatch::from_json(&json!([1])),
            Err(Error::Validation(_))
        ));
    }
}
