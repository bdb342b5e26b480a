//! Client administration (SPEC §8): create, list, revoke; and installing a
//! known key (the deploy's bootstrap admin, `make dev`'s clients).

use super::key::ApiKey;
use super::{Client, ClientId, Role};
use crate::cache::AvailabilityCache;
use crate::config::{MAX_HELD_SEATS, MAX_RATE_LIMIT_PER_SECOND};
use crate::db;
use crate::error::{Error, FieldErrors, sent_name};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{MySqlConnection, MySqlPool};
use std::time::Duration;

/// A `POST /clients` body, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewClient {
    pub name: String,
    pub role: Role,
    pub rate_limit_per_second: Option<u32>,
    pub max_held_seats: Option<u32>,
}

impl NewClient {
    /// `{"name": "…", "role": "booker"|"admin", "rate_limit_per_second":
    /// n|null, "max_held_seats": n|null}`: `name` required (1–100
    /// characters, no control characters), `role` booker when absent,
    /// each limit NULL (the configured default) when absent or null, else
    /// 0 (unlimited) to its bound. Every problem is reported, each under
    /// its field.
    pub fn from_json(body: &Value) -> Result<Self, Error> {
        let Some(fields) = body.as_object() else {
            return Err(Error::invalid("body", "The body must be a JSON object."));
        };
        let mut errors = FieldErrors::new();
        for unknown in fields.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
            let name = sent_name(unknown);
            let message = format!("The {name:?} field is not allowed.");
            errors.entry(name.into()).or_default().push(message);
        }
        let mut fail = |field: &'static str, message: String| {
            errors.entry(field.into()).or_default().push(message);
        };
        let name = match fields.get("name") {
            None | Some(Value::Null) => {
                fail("name", "The name field is required.".into());
                None
            }
            Some(Value::String(name))
                if (1..=100).contains(&name.chars().count())
                    && !name.chars().any(char::is_control)
                    && name.trim() == name =>
            {
                Some(name.clone())
            }
            Some(_) => {
                fail(
                    "name",
                    "The name must be a string of 1 to 100 characters, without control \
                     characters or surrounding spaces."
                        .into(),
                );
                None
            }
        };
        let role = match fields.get("role") {
            None => Some(Role::Booker),
            Some(Value::String(role)) => Role::parse(role),
            Some(_) => None,
        };
        if role.is_none() {
            fail("role", "The role must be \"booker\" or \"admin\".".into());
        }
        let rate = limit(fields.get(RATE.0), RATE.1);
        if rate.is_none() {
            fail(RATE.0, limit_message("rate limit", RATE.1));
        }
        let cap = limit(fields.get(CAP.0), CAP.1);
        if cap.is_none() {
            fail(CAP.0, limit_message("cap on held seats", CAP.1));
        }
        match (name, role, rate, cap) {
            (Some(name), Some(role), Some(rate_limit_per_second), Some(max_held_seats))
                if errors.is_empty() =>
            {
                Ok(Self {
                    name,
                    role,
                    rate_limit_per_second,
                    max_held_seats,
                })
            }
            _ => Err(Error::Validation(errors)),
        }
    }
}

const FIELDS: [&str; 4] = ["name", "role", RATE.0, CAP.0];
/// The client's limits, each a field and its bound (0: unlimited).
pub(crate) const RATE: (&str, u32) = ("rate_limit_per_second", MAX_RATE_LIMIT_PER_SECOND);
pub(crate) const CAP: (&str, u32) = ("max_held_seats", MAX_HELD_SEATS);

/// A limit's field: `Some(None)` when absent or null (the configured
/// default), `Some(Some(n))` for 0 to `max`, `None` for anything else.
pub(crate) fn limit(value: Option<&Value>, max: u32) -> Option<Option<u32>> {
    match value {
        None | Some(Value::Null) => Some(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .filter(|n| *n <= u64::from(max))
            .map(|n| Some(n as u32)),
        Some(_) => None,
    }
}

pub(crate) fn limit_message(what: &str, max: u32) -> String {
    format!("The {what} must be null or an integer from 0 (unlimited) to {max}.")
}

/// The client administration service: admin routes only.
#[derive(Clone)]
pub struct ClientAdmin {
    pub(super) pool: MySqlPool,
    /// Invalidated after a revocation gave seats back (`revoke.rs`).
    pub(super) cache: Option<AvailabilityCache>,
    /// `HOLD_TTL_SECONDS`: the holds a revocation's freed seats offer to a
    /// slot's line live this long.
    pub(super) hold_ttl: Duration,
}

macro_rules! client_columns {
    () => {
        "SELECT id, name, role, rate_limit_per_second, max_held_seats, created_at, revoked_at \
         FROM api_clients"
    };
}
pub(super) const FIND_CLIENT: &str = concat!(client_columns!(), " WHERE id = ?");
pub(super) const LOCK_CLIENT: &str = concat!(client_columns!(), " WHERE id = ? FOR UPDATE");
/// A page of clients after an id, oldest first (`clients/page.rs`).
pub(super) const PAGE_CLIENTS: &str =
    concat!(client_columns!(), " WHERE id > ? ORDER BY id LIMIT ?");

pub(super) type ClientRow = (
    u64,
    String,
    String,
    Option<u32>,
    Option<u32>,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
);

impl ClientAdmin {
    pub fn new(pool: MySqlPool) -> Self {
        Self {
            pool,
            cache: None,
            hold_ttl: Duration::from_secs(300),
        }
    }

    /// The cache a revocation invalidates and the lifetime of the holds
    /// its freed seats offer (SPEC §23.9): the booking service's own.
    pub fn with_booking(self, cache: Option<AvailabilityCache>, hold_ttl: Duration) -> Self {
        Self {
            cache,
            hold_ttl,
            ..self
        }
    }

    /// Creates a client with a new key, shown in this answer only.
    pub async fn create(
        &self,
        new: &NewClient,
        deadline: tokio::time::Instant,
    ) -> Result<Client, Error> {
        let key = ApiKey::generate().map_err(|err| {
            Error::Internal(sqlx::Error::Protocol(format!("no randomness: {err}")))
        })?;
        let hash = key.hash();
        let mut sent = false;
        let id = db::transact!(&self.pool, "client create", deadline, |conn| {
            // Autocommitted: from here a cut may leave it committed unseen.
            sent = true;
            let inserted = sqlx::query(
                "INSERT INTO api_clients (name, role, key_hash, rate_limit_per_second, \
                 max_held_seats, created_at) VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6))",
            )
            .bind(&new.name)
            .bind(new.role.as_str())
            .bind(hash.as_str())
            .bind(new.rate_limit_per_second)
            .bind(new.max_held_seats)
            .execute(&mut *conn)
            .await;
            match inserted {
                Ok(done) => Ok(ClientId(done.last_insert_id())),
                Err(err) if db::is_unique_violation(&err) && names_index(&err) => {
                    Err(Error::NameTaken(new.name.clone()))
                }
                // Autocommitted: run again, it would find its own name taken.
                Err(err) => Err(db::unknown_if_lost(err)),
            }
        })
        .map_err(|err| db::unknown_if(sent, err))?;
        super::install::make_allowance(&self.pool, id).await;
        let mut client = self.find(id, deadline).await?;
        client.key = Some(key.expose().to_string());
        Ok(client)
    }

    pub(super) async fn find(
        &self,
        id: ClientId,
        deadline: tokio::time::Instant,
    ) -> Result<Client, Error> {
        db::transact!(&self.pool, "client read", deadline, |conn| {
            find(&mut conn, id, FIND_CLIENT).await
        })
    }
}

/// One client by `sql`: [`FIND_CLIENT`] or [`LOCK_CLIENT`].
pub(super) async fn find(
    conn: &mut MySqlConnection,
    id: ClientId,
    sql: &'static str,
) -> Result<Client, Error> {
    let row: Option<ClientRow> = sqlx::query_as(sql).bind(id.0).fetch_optional(conn).await?;
    client(row.ok_or(Error::ClientNotFound(id))?)
}

pub(super) fn client(
    (id, name, role, rate_limit_per_second, max_held_seats, created_at, revoked_at): ClientRow,
) -> Result<Client, Error> {
    Ok(Client {
        id: ClientId(id),
        name,
        role: Role::parse(&role).ok_or_else(|| {
            Error::Internal(sqlx::Error::Decode(format!("unknown role {role:?}").into()))
        })?,
        rate_limit_per_second,
        max_held_seats,
        created_at,
        revoked_at,
        key: None,
    })
}

/// Whether a duplicate-key error is the name's (the key hash's would be
/// a 2^-256 accident).
fn names_index(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .is_some_and(|e| e.message().contains("api_clients_name_unique"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_new_client_needs_a_name_and_takes_booker_and_the_default_rate_when_absent() {
        assert_eq!(
            NewClient::from_json(&json!({"name": "shop"})).unwrap(),
            NewClient {
                name: "shop".into(),
                role: Role::Booker,
                rate_limit_per_second: None,
                max_held_seats: None,
            }
        );
        let capped = json!({"name": "shop", "max_held_seats": 10});
        assert_eq!(
            NewClient::from_json(&capped).unwrap().max_held_seats,
            Some(10)
        );
        for bad in [json!(-1), json!(1.5), json!("10"), json!(1_000_000_001u64)] {
            let err = NewClient::from_json(&json!({"name": "shop", "max_held_seats": bad}));
            let Err(Error::Validation(errors)) = err else {
                panic!("{bad} is refused")
            };
            assert!(errors.contains_key("max_held_seats"), "{errors:?}");
        }
        let admin = json!({"name": "ops", "role": "admin", "rate_limit_per_second": 0});
        let admin = NewClient::from_json(&admin).unwrap();
        assert_eq!(
            (admin.role, admin.rate_limit_per_second),
            (Role::Admin, Some(0))
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        let fields = |body: Value| match NewClient::from_json(&body) {
            Err(Error::Validation(errors)) => {
                errors.keys().map(|k| k.to_string()).collect::<Vec<_>>()
            }
            other => panic!("{body}: {other:?}"),
        };
        assert_eq!(fields(json!([])), ["body"]);
        assert_eq!(fields(json!(null)), ["body"]);
        assert_eq!(fields(json!({})), ["name"]);
        assert_eq!(fields(json!({"name": "x", "admin": true})), ["admin"]);
        assert_eq!(fields(json!({"name": ""})), ["name"]);
        assert_eq!(fields(json!({"name": " x"})), ["name"]);
        assert_eq!(fields(json!({"name": "a\nb"})), ["name"]);
        assert_eq!(fields(json!({"name": "é".repeat(101)})), ["name"]);
        assert!(NewClient::from_json(&json!({"name": "é".repeat(100)})).is_ok());
        assert_eq!(fields(json!({"name": 5, "role": "root"})), ["name", "role"]);
        for bad in [json!(-1), json!(1.5), json!("5"), json!(1_000_001)] {
            assert_eq!(
                fields(json!({"name": "x", "rate_limit_per_second": bad})),
                ["rate_limit_per_second"]
            );
        }
    }
}
