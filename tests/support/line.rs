//! SPEC §18's invariants of the waiting list, read from the rows in one
//! statement each, so that a monitor can ask them inside its snapshot.

use super::TestDb;
use sqlx::MySqlConnection;

/// Slot, waiting, its entries' seats, waiting_min, their smallest, free.
type LineRow = (u64, i64, i64, Option<i64>, Option<i64>, i64);

const LINES: &str = "SELECT s.id, CAST(s.waiting AS SIGNED), \
     CAST(COALESCE((SELECT SUM(w.quantity) FROM waitlist_entries w \
       WHERE w.slot_id = s.id AND w.status = 'waiting'), 0) AS SIGNED), \
     CAST(s.waiting_min AS SIGNED), \
     (SELECT CAST(MIN(w.quantity) AS SIGNED) FROM waitlist_entries w \
       WHERE w.slot_id = s.id AND w.status = 'waiting'), \
     CAST(s.remaining AS SIGNED) - CAST(s.held AS SIGNED) \
     FROM slots s";

/// Pairs that break first fit in arrival order: `offered` was given a hold
/// (its `hold_id`) while `waiting`, earlier in the line and no larger, was
/// already there and still waits. An entry leaves `waiting` for good, and
/// the seats an offer scan has only shrink as it goes: when `offered`'s
/// turn came, `waiting` fitted too and came first.
const JUMPED: &str = "SELECT w.slot_id, w.id, e.id FROM waitlist_entries w \
     JOIN waitlist_entries e ON e.slot_id = w.slot_id AND e.id > w.id \
       AND e.quantity >= w.quantity AND e.hold_id IS NOT NULL \
     WHERE w.status = 'waiting'";

/// Every broken invariant of the lines, one sentence each (none: `[]`):
/// `waiting` and `waiting_min` summarise each slot's waiting entries; no
/// waiting entry fits what its slot has bookable (`remaining − held`,
/// which only under-states it while expiries wait for a reclaim: those
/// are the SPEC's exception); nobody was offered ahead of an earlier
/// entry that fitted.
pub async fn broken(conn: &mut MySqlConnection) -> Vec<String> {
    let mut broken = Vec::new();
    let lines: Vec<LineRow> = sqlx::query_as(LINES)
        .fetch_all(&mut *conn)
        .await
        .expect("the lines");
    for (slot, waiting, sum, min, true_min, free) in lines {
        if waiting != sum {
            broken.push(format!(
                "slot {slot}: waiting {waiting}, its entries' seats {sum}"
            ));
        }
        if min != true_min {
            broken.push(format!(
                "slot {slot}: waiting_min {min:?}, its smallest entry {true_min:?}"
            ));
        }
        if let Some(min) = true_min.filter(|min| free >= *min) {
            broken.push(format!(
                "slot {slot}: {free} seats free and an entry of {min} waits"
            ));
        }
    }
    let jumped: Vec<(u64, u64, u64)> = sqlx::query_as(JUMPED)
        .fetch_all(&mut *conn)
        .await
        .expect("the offers");
    for (slot, waiting, offered) in jumped {
        broken.push(format!(
            "slot {slot}: entry {offered} was offered while the earlier entry {waiting}, no larger, waits"
        ));
    }
    broken
}

impl TestDb {
    /// Fails unless every line's invariant holds now ([`broken`]).
    pub async fn assert_lines(&self) {
        let mut conn = self.admin.acquire().await.expect("a connection");
        let broken = broken(&mut conn).await;
        assert!(broken.is_empty(), "{broken:#?}");
    }
}
