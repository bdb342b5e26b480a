//! The waiting entries of revoked clients (SPEC §23.9: a revoked client is
//! never offered seats): a revocation ends those it finds; an offer pass
//! ends, before its offers, those made by a key an environment still
//! trusted, which it finds here (docs/DESIGN.md, "Revoking a client").

use crate::domain::SlotId;
use crate::error::Error;
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

/// The waiting entries of revoked clients that `free` seats cover
/// ([`REVOKED_IN_LINE`]), locked: the offer pass ends them `expired`
/// before its offers, so that none stands before an entry offered (W3) or
/// keeps seats it fits from everyone (W2).
pub(super) async fn in_line(
    conn: &mut MySqlConnection,
    slot: SlotId,
    free: u32,
) -> Result<Vec<u64>, Error> {
    Ok(sqlx::query_scalar(REVOKED_IN_LINE)
        .bind(slot.0)
        .bind(free)
        .fetch_all(conn)
        .await?)
}
