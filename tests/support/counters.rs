//! The held-seats counter checked against its definition D
//! (docs/DESIGN.md) and the count-based oracle, for every slot at once,
//! in seats: a hold counts its `quantity` (SPEC §9).

use super::TestDb;
use chrono::{DateTime, Utc};

/// One slot's figures, all from one consistent snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterCheck {
    pub slot_id: u64,
    /// `slots.held` as stored.
    pub held: i64,
    /// What D says it must be: the seats of the slot's `held` holds that
    /// expire after its watermark.
    pub counted: i64,
    /// `remaining − (seats of active holds)`, judged at a time after the
    /// snapshot.
    pub bookable: i64,
    pub capacity: i64,
    /// `slots.remaining` as stored.
    pub remaining: i64,
    /// The seats of the slot's confirmed holds.
    pub confirmed: i64,
    /// The counted holds (those of D) that expire before the slot's
    /// floor `held_expires_min`, which must bound them all from below
    /// (docs/DESIGN.md, "The projection's floor").
    pub below_floor: i64,
}

impl CounterCheck {
    pub fn exact(&self) -> bool {
        self.held == self.counted
    }

    /// The first invariant this snapshot breaks, if any: D, the floor,
    /// `remaining = capacity − confirmed`, `0 ≤ remaining ≤ capacity`,
    /// `bookable ≥ 0`.
    pub fn broken(&self) -> Option<String> {
        let slot = self.slot_id;
        if !self.exact() {
            return Some(format!(
                "slot {slot}: held = {} but D says {}",
                self.held, self.counted
            ));
        }
        if self.below_floor > 0 {
            return Some(format!(
                "slot {slot}: {} counted holds expire before held_expires_min",
                self.below_floor
            ));
        }
        if self.remaining != self.capacity - self.confirmed {
            return Some(format!(
                "slot {slot}: remaining {} but capacity {} − confirmed seats {} = {}",
                self.remaining,
                self.capacity,
                self.confirmed,
                self.capacity - self.confirmed
            ));
        }
        if !(0..=self.capacity).contains(&self.remaining) {
            return Some(format!(
                "slot {slot}: remaining {} outside 0..={}",
                self.remaining, self.capacity
            ));
        }
        if self.bookable < 0 {
            return Some(format!("slot {slot}: oversold, bookable {}", self.bookable));
        }
        None
    }
}

impl TestDb {
    /// Every slot's counter against D, its bookable figure by the oracle
    /// and its confirmed seats, in one snapshot. The snapshot is taken
    /// first and the clock read after it: judged at a later time, a hold
    /// that expired (and whose seat was resold) between a statement's start
    /// and its snapshot cannot pass for active.
    pub async fn counter_checks(&self) -> Vec<CounterCheck> {
        let mut tx = self
            .admin
            .begin_with("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            .await
            .expect("snapshot");
        let now: DateTime<Utc> = sqlx::query_scalar("SELECT UTC_TIMESTAMP(6)")
            .fetch_one(&mut *tx)
            .await
            .expect("now");
        // Slot, held, counted, bookable, capacity, remaining, confirmed,
        // below the floor.
        type Checked = (u64, i64, i64, i64, i64, i64, i64, i64);
        let rows: Vec<Checked> = sqlx::query_as(
            "SELECT s.id, CAST(s.held AS SIGNED), \
             (SELECT CAST(COALESCE(SUM(h.quantity), 0) AS SIGNED) FROM holds h \
              WHERE h.slot_id = s.id AND h.status = 'held' AND h.expires_at > s.reclaimed_until), \
             CAST(s.remaining AS SIGNED) - (SELECT CAST(COALESCE(SUM(h.quantity), 0) AS SIGNED) \
              FROM holds h WHERE h.slot_id = s.id AND h.status = 'held' AND h.expires_at > ?), \
             CAST(s.capacity AS SIGNED), CAST(s.remaining AS SIGNED), \
             (SELECT CAST(COALESCE(SUM(h.quantity), 0) AS SIGNED) FROM holds h \
              WHERE h.slot_id = s.id AND h.status = 'confirmed'), \
             (SELECT COUNT(*) FROM holds h WHERE h.slot_id = s.id AND h.status = 'held' \
              AND h.expires_at > s.reclaimed_until AND h.expires_at < s.held_expires_min) \
             FROM slots s ORDER BY s.id",
        )
        .bind(now)
        .fetch_all(&mut *tx)
        .await
        .expect("counter checks");
        tx.rollback().await.expect("rollback");
        rows.into_iter()
            .map(
                |(
                    slot_id,
                    held,
                    counted,
                    bookable,
                    capacity,
                    remaining,
                    confirmed,
                    below_floor,
                )| {
                    CounterCheck {
                        slot_id,
                        held,
                        counted,
                        bookable,
                        capacity,
                        remaining,
                        confirmed,
                        below_floor,
                    }
                },
            )
            .collect()
    }

    /// Fails the test unless every slot's counter is exact, its `remaining`
    /// is what its confirmed seats leave, and nothing is oversold.
    pub async fn assert_counters_exact(&self, what: &str) {
        for check in self.counter_checks().await {
            if let Some(broken) = check.broken() {
                panic!("{what}: {broken}");
            }
        }
    }
}
