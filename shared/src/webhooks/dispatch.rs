//! The dispatcher (SPEC §20): turns the feed into deliveries.
//!
//! For one subscription, in one transaction: its row locked, its client's
//! feed read past `scanned_through` (the feed's own rule of who sees what,
//! `events::page_in`, in one snapshot: a prefix of the numbered events, so
//! nothing after the cursor can still appear below it), one delivery row
//! per event of a wanted type, and the cursor moved to where the page
//! ended. All or nothing: an event is either at or below the cursor with
//! its delivery written, or above it and read again by the next run
//! (docs/DESIGN.md, "Webhooks: the delivery protocol"). A disabled
//! subscription is dispatched too: its deliveries wait for it.
//!
//! **Heads.** Only a subject's oldest pending delivery (its head) has a
//! `next_attempt_at`; the ones behind it have NULL until it ends
//! (`record::promote`). So "due" is one index range of heads and no
//! queued event of a failing subject stands in another subject's way.
//! Deliveries of a subject end in `seq` order (only a head is attempted),
//! so the subject has a pending delivery iff its latest one is pending:
//! one index look-up ([`SUBJECT_LATEST`]).

use super::event_types::EventTypes;
use super::subject::subject;
use crate::clients::{Caller, Role};
use crate::domain::ClientId;
use crate::error::Error;
use crate::events::{EventCursor, page_in, sequence};
use chrono::{DateTime, Utc};
use sqlx::{Connection, MySqlConnection, MySqlPool, QueryBuilder};
use std::collections::HashSet;

/// Subscriptions the feed has moved past, a batch at a time from `after`
/// (by id: every subscription is visited in turn however many there are).
pub const DISPATCH_PICK: &str = "SELECT s.id FROM webhook_subscriptions s \
     WHERE s.id > ? AND s.scanned_through < (SELECT sequenced_through FROM event_feed WHERE id = 1) \
     ORDER BY s.id LIMIT ?";
/// The subscription's row, first: dispatchers of one subscription, its
/// claims and its recorded attempts go one at a time (the lock order:
/// this row, then its deliveries). A subscription being deleted
/// (`remove.rs` marks it under this lock, its cursor past the feed) is
/// none: a pass that picked it before the mark finds nothing to do.
pub const DISPATCH_LOCK: &str = "SELECT client_id, event_types, scanned_through \
     FROM webhook_subscriptions WHERE id = ? AND deleted_at IS NULL FOR UPDATE";
/// Whose feed it reads. A plain read, after the lock.
pub const CLIENT_ROLE: &str = "SELECT role FROM api_clients WHERE id = ?";
/// Whether the subject has a pending delivery: its latest one's status.
/// Every writer of the subscription's deliveries holds the row lock taken
/// above, so this read (in the snapshot taken after it) is current.
pub const SUBJECT_LATEST: &str = "SELECT status FROM webhook_deliveries \
     FORCE INDEX (webhook_deliveries_subscription_id_subject_seq_index) \
     WHERE subscription_id = ? AND subject = ? ORDER BY seq DESC LIMIT 1";
/// The insert, by VALUES (never `INSERT … SELECT`: no AUTO-INC table
/// lock). A duplicate is a no-op: the UNIQUE (subscription, event) key.
pub const DELIVERY_INSERT: &str = "INSERT INTO webhook_deliveries \
     (subscription_id, event_id, seq, event_type, subject, next_attempt_at, created_at) ";
pub const DELIVERY_INSERT_TAIL: &str = " ON DUPLICATE KEY UPDATE id = id";
pub const DISPATCH_ADVANCE: &str =
    "UPDATE webhook_subscriptions SET scanned_through = ? WHERE id = ?";
/// Now, read after the lock.
pub const NOW: &str = "SELECT UTC_TIMESTAMP(6)";

/// Events read per subscription per transaction.
pub const DISPATCH_PAGE: u32 = 200;

/// What one dispatch pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DispatchReport {
    pub subscriptions: u64,
    pub deliveries: u64,
    /// Subscriptions whose cursor retention had passed (see
    /// [`dispatch_one`]); logged at ERROR each.
    pub behind_retention: u64,
}

/// One pass: up to `batch` subscriptions after `after` that the feed has
/// moved past, one page each. Returns the report and the last id visited
/// (0 when the pass reached the end: the next starts again at the first).
pub async fn dispatch(
    pool: &MySqlPool,
    after: u64,
    batch: u32,
) -> Result<(DispatchReport, u64), Error> {
    let mut conn = pool.acquire().await?;
    // What has committed gets its place in the feed first (unless another
    // sequencer is at it), so that this pass sees it.
    sequence(&mut conn).await?;
    let ids: Vec<u64> = sqlx::query_scalar(DISPATCH_PICK)
        .bind(after)
        .bind(batch)
        .fetch_all(&mut *conn)
        .await?;
    let mut report = DispatchReport::default();
    for &id in &ids {
        let one = dispatch_one(&mut conn, id).await?;
        report.subscriptions += 1;
        report.deliveries += one.deliveries;
        report.behind_retention += one.behind_retention;
    }
    let last = if ids.len() < batch as usize {
        0
    } else {
        ids.last().copied().unwrap_or(0)
    };
    Ok((report, last))
}

/// One subscription, one page of its client's feed, one transaction.
pub async fn dispatch_one(
    conn: &mut MySqlConnection,
    subscription: u64,
) -> Result<DispatchReport, Error> {
    let mut report = DispatchReport::default();
    let mut tx = conn.begin().await?;
    // 1. The row, locked: no other dispatcher, claim or record of this
    //    subscription until the commit.
    let Some((client_id, event_types, scanned)): Option<(u64, Option<String>, u64)> =
        sqlx::query_as(DISPATCH_LOCK)
            .bind(subscription)
            .fetch_optional(&mut *tx)
            .await?
    else {
        return Ok(report);
    };
    let role: Option<String> = sqlx::query_scalar(CLIENT_ROLE)
        .bind(client_id)
        .fetch_optional(&mut *tx)
        .await?;
    let caller = Caller {
        id: ClientId(client_id),
        role: if role.as_deref() == Some("admin") {
            Role::Admin
        } else {
            Role::Booker
        },
        rate: None,
        held_cap: None,
    };
    // 2. The client's feed after the cursor, as `GET /events` would page
    //    it (a prefix of the numbered events, one snapshot).
    let page = match page_in(
        &mut tx,
        &caller,
        Some(EventCursor { after: scanned }),
        DISPATCH_PAGE,
    )
    .await
    {
        Ok(page) => page,
        Err(Error::CursorExpired) => {
            // Retention waits for every subscription's cursor
            // (events/retention.rs), so this means a row was written by
            // hand below the feed's start: say so, and go on from there.
            tracing::error!(
                subscription,
                scanned,
                "webhook cursor behind the feed's retention"
            );
            report.behind_retention = 1;
            page_in(&mut tx, &caller, None, DISPATCH_PAGE).await?
        }
        Err(err) => return Err(err),
    };
    // NULL: every type; a list the API did not write matches nothing (a
    // delivery nobody asked for is worse than one missed from a row
    // written by hand).
    let filter: Option<Option<EventTypes>> = event_types.as_deref().map(EventTypes::from_column);
    let wanted = |kind: &str| match &filter {
        None => true,
        Some(types) => types.as_ref().is_some_and(|types| types.matches(kind)),
    };
    let now: DateTime<Utc> = sqlx::query_scalar(NOW).fetch_one(&mut *tx).await?;
    // 3. A delivery per wanted event; a subject's first pending one is its
    //    head (due now), the ones behind it wait (NULL).
    let mut pending_subjects: HashSet<String> = HashSet::new();
    let mut rows = Vec::new();
    for event in page.events.iter().filter(|event| wanted(&event.kind)) {
        let subject = subject(event);
        let behind = if pending_subjects.contains(&subject) {
            true
        } else {
            let latest: Option<String> = sqlx::query_scalar(SUBJECT_LATEST)
                .bind(subscription)
                .bind(&subject)
                .fetch_optional(&mut *tx)
                .await?;
            latest.as_deref() == Some("pending")
        };
        rows.push((event, (!behind).then_some(now), subject.clone()));
        pending_subjects.insert(subject);
    }
    if !rows.is_empty() {
        let mut insert = QueryBuilder::new(DELIVERY_INSERT);
        insert.push_values(&rows, |mut values, (event, next, subject)| {
            values
                .push_bind(subscription)
                .push_bind(event.id)
                .push_bind(event.seq)
                .push_bind(event.kind.as_str())
                .push_bind(subject.as_str())
                .push_bind(next.map(|at| at.naive_utc()))
                .push_bind(now.naive_utc());
        });
        insert.push(DELIVERY_INSERT_TAIL);
        insert.build().execute(&mut *tx).await?;
        report.deliveries = rows.len() as u64;
    }
    // 4. The cursor, in the same transaction as the rows.
    sqlx::query(DISPATCH_ADVANCE)
        .bind(page.next.after.max(scanned))
        .bind(subscription)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(report)
}
