//! The slot resource read from the database (SPEC §10): `confirmed`,
//! `held` and `remaining` from one statement, so from one snapshot, with
//! `capacity = confirmed + held + remaining` by construction.
//!
//! `confirmed = capacity − slots.remaining` (only a confirmation consumes
//! `remaining`); `held` = the seats of active holds = `slots.held` less the
//! expired-but-counted seats (docs/DESIGN.md, "The counter"); `remaining`
//! = what is bookable, the availability list's figure. The figures are
//! the hold path's own: the bookable figure is `slot_bookable!`, the very
//! query the hold's pre-check runs.

use crate::db::counter::slot_bookable;
use crate::domain::{Slot, SlotId};
use crate::error::Error;
use chrono::{DateTime, Utc};
use sqlx::MySqlConnection;

/// One slot, its bookable figure by the hold path's query (a scalar
/// subquery of the same statement: one snapshot, one clock). Binds: the
/// id twice.
pub const READ_SLOT: &str = concat!(
    "SELECT id, starts_at, ends_at, capacity, remaining, (",
    slot_bookable!(),
    ") AS bookable, max_seats_per_client, waiting, created_at, updated_at FROM slots WHERE id = ?"
);

/// The slots a batch insert just wrote, inside its transaction. A new
/// slot has no holds, so its bookable figure is `remaining − held` (both
/// as inserted); no expired-but-counted seats can exist yet.
pub const READ_NEW_SLOTS: &str = "SELECT id, starts_at, ends_at, capacity, remaining, \
     CAST(remaining AS SIGNED) - CAST(held AS SIGNED) AS bookable, max_seats_per_client, \
     waiting, created_at, updated_at \
     FROM slots WHERE id BETWEEN ? AND ? ORDER BY id";

/// `(id, starts_at, ends_at, capacity, remaining, bookable,
/// max_seats_per_client, waiting, created_at, updated_at)`
type LedgerRow = (
    u64,
    DateTime<Utc>,
    DateTime<Utc>,
    u32,
    u32,
    Option<i64>,
    Option<u32>,
    u32,
    DateTime<Utc>,
    DateTime<Utc>,
);

/// The slot, or `None` when it does not exist. A plain read: under the
/// slot's lock, it sees everything committed before the lock.
pub(crate) async fn read(conn: &mut MySqlConnection, id: SlotId) -> Result<Option<Slot>, Error> {
    let row: Option<LedgerRow> = sqlx::query_as(READ_SLOT)
        .bind(id.0)
        .bind(id.0)
        .fetch_optional(conn)
        .await?;
    Ok(row.map(slot))
}

/// The slots with ids `first..=last`, in id order.
pub(crate) async fn read_new(
    conn: &mut MySqlConnection,
    first: u64,
    last: u64,
) -> Result<Vec<Slot>, Error> {
    let rows: Vec<LedgerRow> = sqlx::query_as(READ_NEW_SLOTS)
        .bind(first)
        .bind(last)
        .fetch_all(conn)
        .await?;
    Ok(rows.into_iter().map(slot).collect())
}

/// The resource from one row. `held` is `remaining − bookable`, clamped to
/// `0..=remaining` (only an out-of-band edit can put it outside), and the
/// shown `remaining` is what is left of the stored one: so `capacity =
/// confirmed + held + remaining` holds in every answer, whatever the rows.
fn slot(row: LedgerRow) -> Slot {
    let (
        id,
        starts_at,
        ends_at,
        capacity,
        remaining,
        bookable,
        share,
        waiting,
        created_at,
        updated_at,
    ) = row;
    let stored = i64::from(remaining.min(capacity));
    let bookable = bookable.unwrap_or(stored).clamp(0, stored);
    let held = (stored - bookable) as u32;
    let remaining = remaining.min(capacity);
    Slot {
        id: SlotId(id),
        starts_at,
        ends_at,
        capacity,
        confirmed: capacity - remaining,
        held,
        remaining: remaining - held,
        max_seats_per_client: share,
        waiting,
        created_at,
        updated_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(capacity: u32, remaining: u32, bookable: i64) -> LedgerRow {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        (
            1,
            at,
            at,
            capacity,
            remaining,
            Some(bookable),
            None,
            0,
            at,
            at,
        )
    }

    #[test]
    fn the_three_figures_always_add_up_to_the_capacity() {
        let s = slot(row(10, 7, 4));
        assert_eq!((s.confirmed, s.held, s.remaining), (3, 3, 4));
        // Oversold by an operator's edit: nothing shown is negative.
        let s = slot(row(10, 7, -2));
        assert_eq!((s.confirmed, s.held, s.remaining), (3, 7, 0));
        let s = slot(row(10, 12, 12));
        assert_eq!((s.confirmed, s.held, s.remaining), (0, 0, 10));
        for (capacity, remaining, bookable) in [(5, 5, 9), (5, 0, 0), (1, 1, -1)] {
            let s = slot(row(capacity, remaining, bookable));
            assert_eq!(s.confirmed + s.held + s.remaining, s.capacity);
        }
    }
}
