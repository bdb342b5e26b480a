//! The sweeper: reclaims expired seats, re-checks every maintained counter
//! against the holds table and deletes ended holds past their retention,
//! one short transaction per slot.
//!
//! Correctness never waits for it (expiry is exact without it); it keeps
//! the "expired but still counted" holds few, which keeps the projection
//! and the hold pre-check cheap, and it heals a counter that drifted (an
//! operator's hand edit, a bug): SPEC §9 "Self-check".

use super::Booking;
use crate::db;
use crate::domain::SlotId;
use crate::error::Error;
use crate::events;
use chrono::{DateTime, Utc};
use sqlx::{Connection, MySqlConnection};
use std::time::Duration;
use tokio::time::Instant;

/// How much one run may do.
#[derive(Debug, Clone, Copy)]
pub struct SweepLimits {
    /// Slots with expired, still-counted holds, oldest due first.
    pub max_due: u32,
    /// Besides those, the least recently checked slots, so that every slot
    /// is re-checked in turn.
    pub sample: u32,
    /// The run stops taking slots after this long (below the function's
    /// timeout): a slot in progress finishes, the rest wait for the next run.
    pub budget: Duration,
}

/// What one run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SweepReport {
    pub visited: u64,
    pub reclaimed: u64,
    /// Counters found drifted and repaired (each also logged as an error).
    pub repaired: u64,
    /// Ended, never-confirmed holds deleted after their retention.
    pub deleted: u64,
    /// Slots skipped by an error or a lock wait; the run went on.
    pub failed: u64,
    /// Clients whose allowance was re-checked (SPEC §8).
    pub clients_checked: u64,
    /// Events numbered into the feed, and deleted after their retention.
    pub events_sequenced: u64,
    pub events_deleted: u64,
    /// Events past their retention kept, the publisher not having sent
    /// them (each run logs a warning while it lasts).
    pub events_waiting_for_publisher: bool,
    /// The budget ran out before every slot was visited.
    pub out_of_time: bool,
}

/// The slots due, oldest expired-but-counted hold first.
const SWEEP_DUE: &str = concat!(
    "SELECT slot_id FROM (",
    expired_but_counted_per_slot!(),
    ") e ORDER BY due, slot_id LIMIT ?"
);
/// Slots that started with a line still waiting: their entries end
/// (SPEC §18, within two minutes: a run a minute).
const SWEEP_STARTED_LINES: &str = "SELECT id FROM slots FORCE INDEX (slots_waiting_starts_at_index) \
     WHERE waiting > 0 AND starts_at <= UTC_TIMESTAMP(6) ORDER BY starts_at LIMIT ?";
/// The rotation of the self-check.
const SWEEP_SAMPLE: &str = "SELECT id FROM slots ORDER BY checked_at, id LIMIT ?";
/// The lock first, reading no clock (see `RECLAIM_LOCK`).
pub const CHECK_LOCK: &str = "SELECT capacity, remaining, held, reclaimed_until, waiting, waiting_min, \
     starts_at FROM slots WHERE id = ? FOR UPDATE";
/// After the lock, in one statement with one `now`, in seats: the holds
/// the counter must count once the watermark is at now, the ones that
/// expired since the watermark (what an ordinary reclaim subtracts), the
/// confirmed, and the line (SPEC §18): its waiting seats and its smallest
/// entry. Each sum is one range of an index that starts with the slot and
/// the status, so it reads the rows it counts and no other: the active
/// holds, those expired since the watermark, the bookings (at most
/// `capacity` rows), the waiting entries. The slot's history (cancelled
/// holds, holds expired before the watermark, ended entries) is never
/// read, however long it is (issue 45). Last, the earliest expiry the
/// counter will count, one dive into the same index: the projection's
/// floor, exact (docs/DESIGN.md, "The projection's floor").
pub const CHECK_COUNT: &str = concat!(
    "SELECT UTC_TIMESTAMP(6), ",
    "CAST(COALESCE((SELECT SUM(quantity) FROM holds FORCE INDEX (holds_slot_id_status_expires_at_index) ",
    "WHERE slot_id = ? AND status = 'held' AND expires_at > GREATEST(?, UTC_TIMESTAMP(6))), 0) AS SIGNED), ",
    "CAST(COALESCE((SELECT SUM(quantity) FROM holds FORCE INDEX (holds_slot_id_status_expires_at_index) ",
    "WHERE slot_id = ? AND status = 'held' AND expires_at > ? AND expires_at <= UTC_TIMESTAMP(6)), 0) AS SIGNED), ",
    "CAST(COALESCE((SELECT SUM(quantity) FROM holds FORCE INDEX (holds_slot_id_status_expires_at_index) ",
    "WHERE slot_id = ? AND status = 'confirmed'), 0) AS SIGNED), ",
    "CAST(COALESCE((SELECT SUM(quantity) FROM waitlist_entries ",
    "FORCE INDEX (waitlist_entries_slot_id_status_quantity_id_index) ",
    "WHERE slot_id = ? AND status = 'waiting'), 0) AS SIGNED), ",
    "(SELECT MIN(quantity) FROM waitlist_entries ",
    "FORCE INDEX (waitlist_entries_slot_id_status_quantity_id_index) ",
    "WHERE slot_id = ? AND status = 'waiting'), ",
    "(SELECT MIN(expires_at) FROM holds FORCE INDEX (holds_slot_id_status_expires_at_index) ",
    "WHERE slot_id = ? AND status = 'held' AND expires_at > GREATEST(?, UTC_TIMESTAMP(6)))"
);
/// Writes the true figures; the watermark never moves back. The floor is
/// left as it was when the counter counts no hold.
pub const CHECK_APPLY: &str = "UPDATE slots SET held_expires_min = COALESCE(?, held_expires_min), \
     held = ?, remaining = ?, waiting = ?, waiting_min = ?, \
     reclaimed_until = GREATEST(reclaimed_until, ?), checked_at = ? WHERE id = ?";
/// Retention (SPEC §9): the slot's holds that ended (cancelled, or expired)
/// at or before the cutoff and were never a booking, read by a range of
/// `(slot_id, ended_at)` (`ended_at` is NULL for a booking, `confirmed_at`
/// set even if cancelled since: never touched), oldest end first: it reads
/// the rows it deletes, not the slot's history within the retention. Sent
/// after `CHECK_APPLY` moved the watermark to now, with a cutoff before
/// that now: a `held` hold among them expired before the watermark, so no
/// counter counts it and deleting it changes no figure. The rows are
/// picked by a derived table on the forced index: a single-table DELETE
/// takes no index hint, and the optimiser chose `(slot_id, status, …)`
/// and a sort over every hold of the slot instead (1.3 s at 300,000).
pub const RETENTION_DELETE: &str = "DELETE h FROM holds h JOIN (SELECT id FROM holds \
     FORCE INDEX (holds_slot_id_ended_at_index) WHERE slot_id = ? AND ended_at <= ? \
     ORDER BY ended_at LIMIT ?) ended ON h.id = ended.id";
/// Deleted per slot and run: keeps the slot's lock short; the rest goes on
/// the slot's next visit.
const RETENTION_BATCH: u32 = 1000;

/// One slot's check.
/// [`CHECK_LOCK`]'s row: capacity, remaining, held, watermark, waiting,
/// waiting_min, starts_at.
type CheckLocked = (
    u32,
    u32,
    u32,
    DateTime<Utc>,
    u32,
    Option<u32>,
    DateTime<Utc>,
);
/// [`CHECK_COUNT`]'s row: now, counted, expired, confirmed, waiting,
/// smallest waiting entry, earliest counted expiry.
type CheckCounted = (
    DateTime<Utc>,
    i64,
    i64,
    i64,
    i64,
    Option<u32>,
    Option<DateTime<Utc>>,
);

struct Checked {
    reclaimed: u64,
    repaired: u64,
    deleted: u64,
    /// Seats offered to the slot's waiting line.
    offered: bool,
}

impl Booking {
    /// One sweep: the due slots (oldest due first), then a rotating sample
    /// of the others, each reclaimed and re-checked under its own lock in
    /// its own short transaction. One slot's error or lock wait is logged
    /// and skipped; the run goes on until `limits.budget`.
    pub async fn sweep(&self, limits: SweepLimits) -> Result<SweepReport, Error> {
        let deadline = Instant::now() + limits.budget;
        let (mut slots, sample) = db::transact!(&self.pool, "sweep", deadline, |conn| {
            let due: Vec<u64> = sqlx::query_scalar(SWEEP_DUE)
                .bind(limits.max_due)
                .fetch_all(&mut *conn)
                .await?;
            let mut sample: Vec<u64> = sqlx::query_scalar(SWEEP_STARTED_LINES)
                .bind(limits.max_due)
                .fetch_all(&mut *conn)
                .await?;
            sample.extend(
                sqlx::query_scalar::<_, u64>(SWEEP_SAMPLE)
                    .bind(limits.sample)
                    .fetch_all(&mut *conn)
                    .await?,
            );
            Ok((due, sample))
        })?;
        for slot in sample {
            if !slots.contains(&slot) {
                slots.push(slot);
            }
        }
        let mut report = SweepReport::default();
        let mut offered = false;
        // No statement starts with less than the margin left (`db::limit`).
        let usable = deadline
            .checked_sub(db::STATEMENT_MARGIN)
            .unwrap_or(deadline);
        for slot in slots {
            if Instant::now() >= usable {
                report.out_of_time = true;
                break;
            }
            let checked = db::transact!(&self.pool, "sweep", deadline, |conn| {
                self.check_slot(&mut conn, SlotId(slot)).await
            });
            match checked {
                Ok(Some(checked)) => {
                    report.visited += 1;
                    report.reclaimed += checked.reclaimed;
                    report.repaired += checked.repaired;
                    report.deleted += checked.deleted;
                    offered |= checked.offered;
                }
                Ok(None) => {} // deleted meanwhile
                Err(err) => {
                    report.failed += 1;
                    tracing::warn!(slot_id = slot, error = %err, "sweep skipped a slot");
                    self.skipped(SlotId(slot), usable).await;
                    report.out_of_time = Instant::now() >= usable;
                }
            }
        }
        self.invalidate_after_offers(offered).await;
        // The clients' allowances, a rotation as the slots' (SPEC §8).
        if Instant::now() < usable {
            let (visited, repaired, failed) = self.sweep_clients(limits.sample, usable).await;
            report.clients_checked = visited;
            report.repaired += repaired;
            report.failed += failed;
        }
        // The feed: number what committed unseen by any poll (so the
        // publisher's schedule finds it too), then retention.
        if Instant::now() < usable {
            match self.sweep_events(deadline).await {
                Ok((sequenced, purged)) => {
                    report.events_sequenced = sequenced;
                    report.events_deleted = purged.deleted;
                    report.events_waiting_for_publisher = purged.waiting_for_publisher;
                }
                Err(err) => {
                    report.failed += 1;
                    tracing::warn!(error = %err, "sweep skipped the change feed");
                }
            }
        }
        Ok(report)
    }

    /// Numbers every committed event, then deletes those past
    /// `EVENT_RETENTION_DAYS` by the database's clock (and, where a bus
    /// is configured, only those the publisher has sent).
    async fn sweep_events(&self, deadline: Instant) -> Result<(u64, events::PurgeReport), Error> {
        let mut sequenced = 0;
        loop {
            let run = db::transact!(&self.pool, "sweep", deadline, |conn| {
                events::sequence(&mut conn).await
            })?;
            sequenced += u64::from(run.unwrap_or(0));
            if run != Some(events::SEQUENCE_BATCH) || Instant::now() >= deadline {
                break;
            }
        }
        let retention =
            chrono::Duration::from_std(self.rules.event_retention).unwrap_or(chrono::Duration::MAX);
        let unsent = if self.rules.events_published {
            events::Unsent::Keep
        } else {
            events::Unsent::Purge
        };
        let purged = db::transact!(&self.pool, "sweep", deadline, |conn| {
            let now: DateTime<Utc> = sqlx::query_scalar("SELECT UTC_TIMESTAMP(6)")
                .fetch_one(&mut *conn)
                .await?;
            let cutoff = now
                .checked_sub_signed(retention)
                .unwrap_or(DateTime::<Utc>::MIN_UTC);
            events::purge(&mut conn, cutoff, unsent, deadline).await
        })?;
        if purged.waiting_for_publisher {
            tracing::warn!(
                purged_through = purged.purged_through,
                "events past EVENT_RETENTION_DAYS are kept: the publisher has not sent them"
            );
        }
        Ok((sequenced, purged))
    }

    /// [`Booking::sweep`] of up to `max_slots` due slots and as many others,
    /// within the default budget; returns how many holds were reclaimed.
    pub async fn reclaim_expired(&self, max_slots: u32) -> Result<u64, Error> {
        let report = self
            .sweep(SweepLimits {
                max_due: max_slots,
                sample: max_slots,
                budget: self
                    .deadline()
                    .saturating_duration_since(tokio::time::Instant::now()),
            })
            .await?;
        Ok(report.reclaimed)
    }

    /// One slot's check, as a sweep runs it (its own transaction, the
    /// default deadline): reclaim, recount, line, retention. `false`: no
    /// such slot. For the bench, which times it against a slot's history.
    pub async fn check_one(&self, slot: SlotId) -> Result<bool, Error> {
        let checked = db::transact!(&self.pool, "sweep", self.deadline(), |conn| {
            self.check_slot(&mut conn, slot).await
        })?;
        Ok(checked.is_some())
    }

    /// Reclaims and re-checks one slot under its lock. `None`: no such slot.
    async fn check_slot(
        &self,
        conn: &mut MySqlConnection,
        slot_id: SlotId,
    ) -> Result<Option<Checked>, Error> {
        let mut tx = conn.begin().await?;
        let row: Option<CheckLocked> = sqlx::query_as(CHECK_LOCK)
            .bind(slot_id.0)
            .fetch_optional(&mut *tx)
            .await?;
        let Some((capacity, remaining, held, watermark, waiting, smallest, starts_at)) = row else {
            return Ok(None);
        };
        let (now, counted, expired, confirmed, line, line_min, floor): CheckCounted =
            sqlx::query_as(CHECK_COUNT)
                .bind(slot_id.0)
                .bind(watermark)
                .bind(slot_id.0)
                .bind(watermark)
                .bind(slot_id.0)
                .bind(slot_id.0)
                .bind(slot_id.0)
                .bind(slot_id.0)
                .bind(watermark)
                .fetch_one(&mut *tx)
                .await?;
        // What the counters would be after an ordinary reclaim, and what
        // the holds table says they must be.
        let kept = i64::from(held) - expired;
        let true_remaining = i64::from(capacity) - confirmed;
        let mut repaired = 0;
        // The line's figures too (SPEC §8: an entry written by hand is in
        // no counter until here; a hold's claim passes a slot whose
        // `waiting` is 0, and an offer reads `waiting_min`).
        let smallest = smallest.map_or(-1, i64::from);
        let line_smallest = line_min.map_or(-1, i64::from);
        for (counter, stored, truth) in [
            ("held", kept, counted),
            ("remaining", i64::from(remaining), true_remaining),
            ("waiting", i64::from(waiting), line),
            ("waiting_min", smallest, line_smallest),
        ] {
            if stored != truth {
                repaired += 1;
                tracing::error!(
                    slot_id = slot_id.0,
                    counter,
                    stored,
                    truth,
                    "counter drifted from the holds table; repaired"
                );
            }
        }
        if expired > 0 {
            super::reclaim::record_window(&mut tx, slot_id, watermark, now).await?;
        }
        // More confirmed than capacity cannot be repaired by a counter: the
        // error above says so; the UNSIGNED column keeps 0.
        let true_remaining = u32::try_from(true_remaining.max(0)).unwrap_or(capacity);
        let waiting = u32::try_from(line).unwrap_or(u32::MAX);
        sqlx::query(CHECK_APPLY)
            .bind(floor.map(|floor| floor.naive_utc()))
            .bind(u32::try_from(counted).unwrap_or(u32::MAX))
            .bind(true_remaining)
            .bind(waiting)
            .bind(line_min)
            .bind(now)
            .bind(now)
            .bind(slot_id.0)
            .execute(&mut *tx)
            .await?;
        // The line (SPEC §18), with the counters exact at `now`: a started
        // slot's entries end; otherwise what is free is offered.
        let mut offered = false;
        if waiting > 0 {
            if starts_at <= now {
                super::waitlist::expire_waiting(&mut tx, slot_id, None).await?;
            } else {
                let counted = u32::try_from(counted).unwrap_or(u32::MAX);
                let free = true_remaining.saturating_sub(counted);
                let left =
                    super::waitlist::offer_locked(&mut tx, slot_id, free, self.hold_ttl).await?;
                offered = left < free;
            }
        }
        let retention =
            chrono::Duration::from_std(self.rules.retention).unwrap_or(chrono::Duration::MAX);
        let cutoff = now
            .checked_sub_signed(retention)
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let deleted = sqlx::query(RETENTION_DELETE)
            .bind(slot_id.0)
            .bind(cutoff)
            .bind(RETENTION_BATCH)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(Some(Checked {
            reclaimed: u64::try_from(expired.min(i64::from(held))).unwrap_or(0),
            repaired,
            deleted,
            offered,
        }))
    }
}
