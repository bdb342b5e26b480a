//! What confirm, cancel and move share around their attempts.

/// A change of one hold that answers a [`super::Transition`] (confirm,
/// cancel, move): its attempts under `db::transact!`, each made again when
/// it answers `None` (a move carried the hold off the slot it locked),
/// the answer of a retry that found the hold gone, then the cache's
/// invalidation. `written` names the attempts' record of what they wrote
/// (`written.rs`). A macro, not a function: an attempt borrows the
/// connection and that record, which a closure's future cannot name for
/// every lifetime.
macro_rules! transition {
    ($booking:expr, $operation:expr, $kind:expr, |$conn:ident, $written:ident| $attempt:expr) => {{
        let booking = $booking;
        let deadline = booking.deadline_before_invalidation();
        let mut $written = super::written::Written::default();
        let outcome = $crate::db::transact!(&booking.pool, $operation, deadline, |$conn| {
            loop {
                if let Some(done) = $attempt.await? {
                    break Ok(done);
                }
            }
        })
        .map_err(|err| $written.unknown_if_sent(err));
        let outcome = booking
            .gone_since(&$written, $kind, deadline, outcome)
            .await;
        booking.invalidate_unless_unchanged(&outcome).await;
        outcome
    }};
}
