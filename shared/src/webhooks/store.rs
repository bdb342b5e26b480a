//! The transactions of `/webhooks`: make, read, change a
//! subscription and rotate its secret. A subscription that is not the
//! caller's (and the caller no admin) does not exist for it: 404, as a
//! missing one (SPEC §8's ownership).
//!
//! Every change is one transaction that is never run again once its COMMIT
//! was sent (`sent`): a create or a rotation run twice would make a secret
//! its client never sees. A lost COMMIT is a 503 that says to read first.

use super::address::{AddressError, resolve_checked};
use super::input::{NewSubscription, SubscriptionPatch};
use super::secret::WebhookSecret;
use super::subscription::{
    Row, Status, Subscription, WebhookId, subscription, subscription_columns,
};
use super::{Webhooks, event_types::EventTypes};
use crate::clients::Caller;
use crate::db;
use crate::domain::ClientId;
use crate::error::{Error, Unauthenticated};
use sqlx::{Connection, MySqlConnection};
use tokio::time::Instant;
use url::Url;

/// A deleted subscription (`remove.rs`) exists for no route but a
/// retried DELETE.
pub(super) const FIND: &str = concat!(
    subscription_columns!(),
    " WHERE id = ? AND deleted_at IS NULL"
);
const LOCK: &str = concat!(
    subscription_columns!(),
    " WHERE id = ? AND deleted_at IS NULL FOR UPDATE"
);

/// The limit's lock: the owner's `api_clients` row, exclusively. Two
/// creates for one client queue here, so the second counts the first's row
/// (its count is a plain read whose snapshot starts after this lock is
/// granted). It is the row every hold's and entry's INSERT locks shared by
/// its foreign key, as `PATCH /clients/{id}` locks it exclusively: like
/// that PATCH, this transaction takes no slot's or hold's lock, so a
/// booking waiting here waits only for our commit (docs/DESIGN.md, "The
/// implicit locks", and "Webhooks"). Its `revoked_at` is read under the
/// lock: a key still trusted by an environment's cache after a revocation
/// makes nothing.
const LOCK_OWNER: &str = "SELECT revoked_at IS NULL FROM api_clients WHERE id = ? FOR UPDATE";
const COUNT: &str =
    "SELECT COUNT(*) FROM webhook_subscriptions WHERE client_id = ? AND deleted_at IS NULL";
/// Where the new subscription's scan of the feed starts: it receives the
/// events sequenced after its creation.
const FEED_HEAD: &str = "SELECT sequenced_through FROM event_feed WHERE id = 1";
const INSERT: &str = "INSERT INTO webhook_subscriptions (client_id, url, event_types, \
     description, secret_sealed, scanned_through, created_at, updated_at) \
     VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))";
/// Each field set only when the patch names it (`IF(?, ?, column)`). A
/// disabling by the client is `by_client`, unless the subscription was
/// already disabled (its reason stays); enabling clears the reason.
const APPLY: &str = "UPDATE webhook_subscriptions SET \
     url = IF(?, ?, url), \
     event_types = IF(?, ?, event_types), \
     description = IF(?, ?, description), \
     disabled_reason = CASE \
         WHEN ? = 'enabled' THEN NULL \
         WHEN ? = 'disabled' AND status = 'enabled' THEN 'by_client' \
         ELSE disabled_reason END, \
     status = COALESCE(?, status), \
     updated_at = UTC_TIMESTAMP(6) \
     WHERE id = ?";
/// The current secret becomes the previous one, which keeps signing for
/// 24 h (SPEC §20); a previous one still live is dropped.
const ROTATE: &str = "UPDATE webhook_subscriptions SET previous_sealed = secret_sealed, \
     previous_until = UTC_TIMESTAMP(6) + INTERVAL 24 HOUR, secret_sealed = ?, \
     updated_at = UTC_TIMESTAMP(6) WHERE id = ?";

impl Webhooks {
    /// `POST /webhooks`: a subscription of the caller's, with its new
    /// secret (shown in this answer only).
    pub async fn create(
        &self,
        caller: &Caller,
        new: &NewSubscription,
        deadline: Instant,
    ) -> Result<Subscription, Error> {
        self.reachable(&new.url, deadline).await?;
        let secret = WebhookSecret::generate()?;
        let sealed = self.key()?.seal(&secret)?;
        let limit = self.rules.max_per_client;
        let mut sent = false;
        let mut created = db::transact!(&self.pool, "webhook create", deadline, |conn| {
            create_once(&mut conn, caller.id, new, &sealed, limit, &mut sent).await
        })
        .map_err(|err| db::unknown_if(sent, err))?;
        created.secret = Some(secret);
        Ok(created)
    }

    /// `GET /webhooks/{id}`.
    pub async fn get(
        &self,
        caller: &Caller,
        id: WebhookId,
        deadline: Instant,
    ) -> Result<Subscription, Error> {
        db::transact!(&self.pool, "webhook read", deadline, |conn| {
            find(&mut conn, caller, id, FIND).await
        })
    }

    /// `PATCH /webhooks/{id}` → the subscription as it is now.
    pub async fn patch(
        &self,
        caller: &Caller,
        id: WebhookId,
        patch: &SubscriptionPatch,
        deadline: Instant,
    ) -> Result<Subscription, Error> {
        if let Some(url) = &patch.url {
            self.reachable(url, deadline).await?;
        }
        let mut sent = false;
        db::transact!(&self.pool, "webhook patch", deadline, |conn| {
            patch_once(&mut conn, caller, id, patch, &mut sent).await
        })
        .map_err(|err| db::unknown_if(sent, err))
    }

    /// `POST /webhooks/{id}/secret` → the subscription with its new secret;
    /// the one it replaces keeps signing for 24 h.
    pub async fn rotate(
        &self,
        caller: &Caller,
        id: WebhookId,
        deadline: Instant,
    ) -> Result<Subscription, Error> {
        let secret = WebhookSecret::generate()?;
        let sealed = self.key()?.seal(&secret)?;
        let mut sent = false;
        let mut rotated = db::transact!(&self.pool, "webhook rotate", deadline, |conn| {
            let mut tx = conn.begin().await?;
            find(&mut tx, caller, id, LOCK).await?;
            sqlx::query(ROTATE)
                .bind(&sealed)
                .bind(id.0)
                .execute(&mut *tx)
                .await?;
            let rotated = find(&mut tx, caller, id, FIND).await?;
            sent = true;
            tx.commit().await.map_err(db::unknown_if_lost)?;
            Ok(rotated)
        })
        .map_err(|err| db::unknown_if(sent, err))?;
        rotated.secret = Some(secret);
        Ok(rotated)
    }

    /// The URL's host resolves to addresses webhooks may reach, or 422
    /// `url` (SPEC §20: refused at registration too). A look-up still
    /// running at the request's deadline is one that did not resolve.
    async fn reachable(&self, url: &Url, deadline: Instant) -> Result<(), Error> {
        tokio::time::timeout_at(deadline, resolve_checked(url, &self.rules))
            .await
            .unwrap_or_else(|_| Err(AddressError::Unresolved("timed out".into())))
            .map(drop)
            .map_err(|err| {
                let message = match err {
                    AddressError::NotAllowed { class, .. } => format!(
                        "The url's host is a {class} address, which webhooks may not reach."
                    ),
                    AddressError::Unresolved(_) => "The url's host does not resolve.".into(),
                };
                Error::invalid("url", message)
            })
    }
}

async fn create_once(
    conn: &mut MySqlConnection,
    owner: ClientId,
    new: &NewSubscription,
    sealed: &[u8],
    limit: u32,
    sent: &mut bool,
) -> Result<Subscription, Error> {
    let mut tx = conn.begin().await?;
    let active: Option<bool> = sqlx::query_scalar(LOCK_OWNER)
        .bind(owner.0)
        .fetch_optional(&mut *tx)
        .await?;
    if active != Some(true) {
        return Err(Error::Unauthenticated(Unauthenticated::Rejected));
    }
    let count: i64 = sqlx::query_scalar(COUNT)
        .bind(owner.0)
        .fetch_one(&mut *tx)
        .await?;
    if count >= i64::from(limit) {
        return Err(Error::WebhookLimitReached { limit });
    }
    let head: u64 = sqlx::query_scalar(FEED_HEAD).fetch_one(&mut *tx).await?;
    let done = sqlx::query(INSERT)
        .bind(owner.0)
        .bind(new.url.as_str())
        .bind(new.event_types.as_ref().map(EventTypes::to_column))
        .bind(&new.description)
        .bind(sealed)
        .bind(head)
        .execute(&mut *tx)
        .await?;
    let row: Row = sqlx::query_as(FIND)
        .bind(done.last_insert_id())
        .fetch_one(&mut *tx)
        .await?;
    *sent = true;
    tx.commit().await.map_err(db::unknown_if_lost)?;
    subscription(row)
}

async fn patch_once(
    conn: &mut MySqlConnection,
    caller: &Caller,
    id: WebhookId,
    patch: &SubscriptionPatch,
    sent: &mut bool,
) -> Result<Subscription, Error> {
    let mut tx = conn.begin().await?;
    find(&mut tx, caller, id, LOCK).await?;
    let status = patch.status.map(Status::as_str);
    sqlx::query(APPLY)
        .bind(patch.url.is_some())
        .bind(patch.url.as_ref().map(Url::as_str))
        .bind(patch.event_types.is_some())
        .bind(patch.event_types.clone().flatten().map(|t| t.to_column()))
        .bind(patch.description.is_some())
        .bind(patch.description.as_deref())
        .bind(status)
        .bind(status)
        .bind(status)
        .bind(id.0)
        .execute(&mut *tx)
        .await?;
    let changed = find(&mut tx, caller, id, FIND).await?;
    *sent = true;
    tx.commit().await.map_err(db::unknown_if_lost)?;
    Ok(changed)
}

/// One subscription by `sql` ([`FIND`] or [`LOCK`]), if the caller may
/// see it; else, as for a missing one, 404.
pub(super) async fn find(
    conn: &mut MySqlConnection,
    caller: &Caller,
    id: WebhookId,
    sql: &'static str,
) -> Result<Subscription, Error> {
    let row: Option<Row> = sqlx::query_as(sql).bind(id.0).fetch_optional(conn).await?;
    let found = row.map(subscription).transpose()?;
    found
        .filter(|found| caller.may_touch(found.client_id))
        .ok_or(Error::NotFound("webhook"))
}
