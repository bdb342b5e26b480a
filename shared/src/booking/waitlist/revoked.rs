//! The waiting entries of revoked clients (SPEC §23.9: a revoked client is
//! never offered seats): a revocation ends those it finds; an offer pass
//! ends, before its offers, those made by a key an environment still
//! trusted (docs/DESIGN.md, "Revoking a client").

use super::offer::expire_entries;
use crate::domain::SlotId;
use crate::error::Error;
use crate::events::NewEvent;
use sqlx::MySqlConnection;

/// On an entry of `waitlist_entries`: its client is revoked.
macro_rules! revoked {
    () => {
        "EXISTS (SELECT 1 FROM api_clients c \
         WHERE c.id = waitlist_entries.client_id AND c.revoked_at IS NOT NULL)"
    };
}

/// The waiting entries of revoked clients that `?` seats cover, locked
/// (one range of the first-fit index: the entries those seats fit). Read
/// by every offer pass that can offer, before its offers: a revocation
/// ends its client's entries itself, so these are the ones made by a key
/// an environment still trusted (SPEC §8: up to 30 s). The subquery is a
/// consistent read (a locking read's subqueries lock nothing): the client
/// rows stay unlocked but for the foreign key's shared lock of an offer.
pub const REVOKED_IN_LINE: &str = concat!(
    "SELECT id FROM waitlist_entries FORCE INDEX (waitlist_entries_slot_id_status_quantity_id_index) \
     WHERE slot_id = ? AND status = 'waiting' AND quantity <= ? AND ",
    revoked!(),
    " ORDER BY id FOR UPDATE"
);

/// The entries of revoked clients that `free` seats cover end `expired`
/// (SPEC §23.9: never offered), with their events and the line's counters,
/// before the offers: none stands before an entry offered (W3), none
/// keeps seats it fits from everyone (W2).
pub(super) async fn end_revoked(
    conn: &mut MySqlConnection,
    slot: SlotId,
    free: u32,
    events: &mut Vec<NewEvent>,
) -> Result<(), Error> {
    let ids: Vec<u64> = sqlx::query_scalar(REVOKED_IN_LINE)
        .bind(slot.0)
        .bind(free)
        .fetch_all(&mut *conn)
        .await?;
    expire_entries(conn, slot, &ids, events).await
}
