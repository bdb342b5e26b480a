//! Clients installed out of band, not by `POST /clients`: the deploy's
//! first admin key (the migrate function), the dev keys, the tests'. And
//! the allowance row every new client gets, however it is made.

use super::key::ApiKey;
use super::{ClientId, Role};
use crate::error::Error;
use crate::secret::Secret;
use sqlx::MySqlPool;

/// Makes `key` the key of the client `name`, with `role`: creates it, or
/// re-keys it (then a revocation is lifted: a new key is a deliberate
/// act). Installing the same key again changes nothing, so a revoked
/// client stays revoked across deploys.
pub async fn install_key(
    pool: &MySqlPool,
    name: &str,
    role: Role,
    key: &ApiKey,
) -> Result<ClientId, Error> {
    let hash = key.hash();
    // Assignments run left to right: revoked_at still sees the old hash.
    sqlx::query(
        "INSERT INTO api_clients (name, role, key_hash, created_at) VALUES (?, ?, ?, UTC_TIMESTAMP(6)) \
         ON DUPLICATE KEY UPDATE revoked_at = IF(key_hash <=> VALUES(key_hash), revoked_at, NULL), \
         role = VALUES(role), key_hash = VALUES(key_hash)",
    )
    .bind(name)
    .bind(role.as_str())
    .bind(hash.as_str())
    .execute(pool)
    .await?;
    let id: u64 = sqlx::query_scalar("SELECT id FROM api_clients WHERE name = ?")
        .bind(name)
        .fetch_one(pool)
        .await?;
    make_allowance(pool, ClientId(id)).await;
    Ok(ClientId(id))
}

/// A new client's allowance row (docs/DESIGN.md, "One client's cap"): no
/// holds yet, so a bound of 0 and no count due. With the row there, every
/// lock on it is a record's, never a gap's. Idempotent; if it fails, the
/// client's first capped hold makes it (and counts its holds a while).
const MAKE_ALLOWANCE: &str = "INSERT IGNORE INTO client_allowances (client_id, held, counted_at) \
     VALUES (?, 0, '1000-01-01')";

pub(super) async fn make_allowance(pool: &MySqlPool, id: ClientId) {
    if let Err(err) = sqlx::query(MAKE_ALLOWANCE).bind(id.0).execute(pool).await {
        tracing::info!(client = id.0, error = %err, "allowance row left to the first capped hold");
    }
}

/// The name of the admin whose key Secrets Manager generates on AWS.
pub const BOOTSTRAP_ADMIN: &str = "bootstrap-admin";

/// Installs the deploy's first admin key (read by the migrate function
/// from its secret): see [`install_key`].
pub async fn install_bootstrap_admin(pool: &MySqlPool, key: &Secret) -> Result<(), Error> {
    let key = ApiKey::parse(key.expose()).ok_or_else(|| {
        Error::invalid(
            "admin_key",
            "The bootstrap admin key must be 24 to 128 characters of [A-Za-z0-9_-].",
        )
    })?;
    install_key(pool, BOOTSTRAP_ADMIN, Role::Admin, &key).await?;
    Ok(())
}
