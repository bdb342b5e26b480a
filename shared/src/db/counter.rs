//! The held-seats counter's SQL fragments: the one definition of an
//! active hold and of the counter's expired-but-counted seats
//! (docs/DESIGN.md, "The counter"). The booking operations decide with
//! them and the slot ledger and availability read with them; they live
//! below both, so that neither imports the other for them.

/// "A hold occupies a seat": the one definition, used by the capacity check
/// of the hold path and by the availability projection. An expired hold
/// keeps `status = 'held'` and stops counting the instant `expires_at`
/// passes; no sweeper is needed for correctness.
macro_rules! active_hold {
    () => {
        "status = 'held' AND expires_at > UTC_TIMESTAMP(6)"
    };
}

/// The held-seats counter (docs/DESIGN.md). `slots.held` is the sum of
/// the quantities of the slot's `held` holds that expire after its reclaim
/// watermark `slots.reclaimed_until`. Among those, the ones already
/// expired still occupy the counter but no longer a seat: this condition
/// finds them, for a hold aliased `x` of a slot aliased `s`. Reclaims and
/// the sweeper move the watermark, so they are few. Hence, with one clock,
/// `held − Σ quantity (holds matching this) = Σ quantity (ACTIVE_HOLD)`,
/// which the tests check as the oracle after every step.
macro_rules! expired_but_counted {
    () => {
        "x.status = 'held' AND x.expires_at > s.reclaimed_until AND x.expires_at <= UTC_TIMESTAMP(6)"
    };
}

/// What one slot has bookable: `remaining − held + expired-but-counted`
/// seats. SIGNED: on the UNSIGNED columns a negative intermediate would be
/// error 1690 (and `SUM` of an integer column is a DECIMAL). With `s.id = ?` the slot row is a constant to the optimiser, so
/// the watermark bounds an index range over `(slot_id, status,
/// expires_at)`: the cost is the slot's expired-but-counted holds, not its
/// active ones. The index is forced: statistics sometimes tempt the
/// optimiser into `(status, expires_at)`, ten times slower here.
macro_rules! slot_bookable {
    () => {
        concat!(
            "SELECT CAST(s.remaining AS SIGNED) - CAST(s.held AS SIGNED) ",
            "+ CAST(COALESCE(SUM(x.quantity), 0) AS SIGNED) ",
            "FROM slots s LEFT JOIN holds x FORCE INDEX (holds_slot_id_status_expires_at_index) ",
            "ON x.slot_id = s.id AND ",
            $crate::db::counter::expired_but_counted!(),
            " WHERE s.id = ?"
        )
    };
}

/// The seats of one client's active holds and waiting entries (SPEC §16,
/// §18), and of the bookings it cancelled that still count (SPEC §23.8:
/// `counts_until`, set by the cancel, is later than now), which its cap
/// bounds (docs/DESIGN.md, "One client's cap"): one range of `(client_id,
/// status, expires_at)`, one of `(client_id, status)` and one of
/// `(client_id, counts_until)`, as many rows as the cap allows (the last:
/// as many as the client's own cancellations within the window), whatever
/// the client's history. The indexes are forced for the same reason as
/// above. The client is bound once, as a one-row table the ranges read.
macro_rules! client_held {
    () => {
        concat!(
            "SELECT CAST(COALESCE((SELECT SUM(c.quantity) FROM holds c ",
            "FORCE INDEX (holds_client_id_status_expires_at_index) ",
            "WHERE c.client_id = k.id AND c.status = 'held' AND c.expires_at > UTC_TIMESTAMP(6)), 0) ",
            "+ COALESCE((SELECT SUM(w.quantity) FROM waitlist_entries w ",
            "WHERE w.client_id = k.id AND w.status = 'waiting'), 0) ",
            "+ COALESCE((SELECT SUM(d.quantity) FROM holds d ",
            "FORCE INDEX (holds_client_id_counts_until_index) ",
            "WHERE d.client_id = k.id AND d.counts_until > UTC_TIMESTAMP(6)), 0) AS SIGNED) ",
            "FROM (SELECT ? AS id) k"
        )
    };
}

/// The seats one client has on one slot, in confirmed bookings, active
/// holds and waiting entries (SPEC §18), which the slot's share bounds (SPEC §16), for a slot aliased `s`:
/// two ranges of `(slot_id, client_id, status, expires_at)`, as many rows
/// as the share allows plus the expired holds not yet given back.
macro_rules! slot_client_seats {
    () => {
        concat!(
            "SELECT CAST(COALESCE((SELECT SUM(h.quantity) FROM holds h ",
            "FORCE INDEX (holds_slot_id_client_id_status_expires_at_index) ",
            "WHERE h.slot_id = s.id AND h.client_id = k.id AND (h.status = 'confirmed' ",
            "OR (h.status = 'held' AND h.expires_at > UTC_TIMESTAMP(6)))), 0) ",
            "+ COALESCE((SELECT SUM(w.quantity) FROM waitlist_entries w ",
            "WHERE w.slot_id = s.id AND w.client_id = k.id AND w.status = 'waiting'), 0) AS SIGNED) ",
            "FROM (SELECT ? AS id) k"
        )
    };
}

/// What a client can still book, SIGNED: `remaining − held +
/// expired-but-counted` (on the UNSIGNED columns a negative intermediate
/// would be error 1690 and fail the whole list), for a slot aliased `s`.
/// The expired-but-counted seats are summed per slot by the hold path's
/// own index, but only for a slot where some may exist: none for a slot
/// whose counter is 0, which by the counter's definition counts no hold,
/// and none for a slot whose floor `held_expires_min` (a lower bound of
/// its counted holds' expiries) is still ahead: none of them has expired.
/// The walk itself is no range: in a correlated subquery the optimiser
/// reads every `held` entry of `(slot_id, status)` and filters, so it
/// costs the slot's held holds, and the floor is what keeps a page's cost
/// independent of them (docs/DESIGN.md, "The projection's floor").
macro_rules! bookable_signed {
    () => {
        concat!(
            "(CAST(s.remaining AS SIGNED) - CAST(s.held AS SIGNED) + ",
            "IF(s.held = 0 OR s.held_expires_min > UTC_TIMESTAMP(6), 0, ",
            "(SELECT CAST(COALESCE(SUM(x.quantity), 0) AS SIGNED) FROM holds x ",
            "FORCE INDEX (holds_slot_id_status_expires_at_index) WHERE x.slot_id = s.id AND ",
            expired_but_counted!(),
            ")))"
        )
    };
}

/// What the availability list shows bookable (SPEC §18): `bookable_signed!`, except
/// that seats a waiting entry could take are not shown: a slot with a line
/// whose smallest entry its bookable seats cover shows none until its
/// offers are made. A slot without a line pays one comparison.
macro_rules! shown_signed {
    () => {
        concat!(
            "IF(s.waiting = 0, ",
            bookable_signed!(),
            ", IF(",
            bookable_signed!(),
            " >= s.waiting_min, 0, ",
            bookable_signed!(),
            "))"
        )
    };
}

pub(crate) use {
    active_hold, bookable_signed, client_held, expired_but_counted, shown_signed, slot_bookable,
    slot_client_seats,
};
