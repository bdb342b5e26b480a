//! The waiting list (SPEC §18): joining a full slot's line, leaving it,
//! reading an entry, and the offers every freeing transaction makes
//! (`offer.rs`). docs/DESIGN.md, "The waiting list", has the argument.

mod entry;
mod join;
mod offer;
mod sql;

pub use entry::Left;
pub use join::Joined;
pub(crate) use offer::{expire_waiting, offer_fulfilled, offer_locked, offers_ended};

use super::reclaim::{Counters, reclaim_locked};
use crate::domain::SlotId;
use crate::error::Error;
use sqlx::MySqlConnection;
use std::time::Duration;

/// Under the slot's lock (taken here if not yet): a reclaim, then, on a
/// slot with a line, the offers of what is free, for `ttl`. Afterwards
/// `held` is exact and no waiting entry's quantity fits `remaining −
/// held`: what is left may go to anyone. `None`: no such slot.
pub(crate) async fn reclaim_and_offer(
    conn: &mut MySqlConnection,
    slot: SlotId,
    ttl: Duration,
) -> Result<Option<Counters>, Error> {
    let Some(mut counters) = reclaim_locked(conn, slot).await? else {
        return Ok(None);
    };
    if counters.waiting > 0 {
        let free = counters.remaining.saturating_sub(counters.held);
        let left = offer_locked(conn, slot, free, ttl).await?;
        counters.offered = free - left;
        counters.held = counters.held.saturating_add(counters.offered);
    }
    Ok(Some(counters))
}
