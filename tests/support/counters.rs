//! The held-seats counter checked against its definition D
//! (docs/DESIGN.md) and the count-based oracle, for every slot at once.

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
    /// `remaining − (seats in active holds)`, judged at a time after the
    /// snapshot.
    pub bookable: i64,
}

impl CounterCheck {
    pub fn exact(&self) -> bool {
        self.held == self.counted
    }
}

impl TestDb {
    /// Every slot's counter against D, and its bookable figure by the
    /// oracle, in one snapshot. The snapshot is taken first and the clock
    /// read after it: judged at a later time, a hold that expired (and
    /// whose seat was resold) between a statement's start and its snapshot
    /// cannot pass for active.
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
        let rows: Vec<(u64, i64, i64, i64)> = sqlx::query_as(
            "SELECT s.id, CAST(s.held AS SIGNED), \
             (SELECT CAST(COALESCE(SUM(h.quantity), 0) AS SIGNED) FROM holds h \
              WHERE h.slot_id = s.id AND h.status = 'held' AND h.expires_at > s.reclaimed_until), \
             CAST(s.remaining AS SIGNED) - (SELECT CAST(COALESCE(SUM(h.quantity), 0) AS SIGNED) \
              FROM holds h WHERE h.slot_id = s.id AND h.status = 'held' AND h.expires_at > ?) \
             FROM slots s ORDER BY s.id",
        )
        .bind(now)
        .fetch_all(&mut *tx)
        .await
        .expect("counter checks");
        tx.rollback().await.expect("rollback");
        rows.into_iter()
            .map(|(slot_id, held, counted, bookable)| CounterCheck {
                slot_id,
                held,
                counted,
                bookable,
            })
            .collect()
    }

    /// Fails the test unless every slot's counter is exact and nothing is
    /// oversold.
    pub async fn assert_counters_exact(&self, what: &str) {
        for check in self.counter_checks().await {
            assert!(
                check.exact(),
                "{what}: slot {} counts held = {} but D says {}",
                check.slot_id,
                check.held,
                check.counted
            );
            assert!(
                check.bookable >= 0,
                "{what}: slot {} oversold, bookable {}",
                check.slot_id,
                check.bookable
            );
        }
    }
}
