//! A hold's replay (SPEC §9): a key's hold answers a later request with
//! the same fingerprint, and refuses any other.

use super::HoldOutcome;
use crate::domain::{Hold, SlotId};
use crate::error::{Error, KeyReuse};

/// What a hold request asks for: with the client and the key, the
/// request's fingerprint (SPEC §9).
#[derive(Debug, Clone, Copy)]
pub(super) struct Wanted {
    pub(super) slot_id: SlotId,
    pub(super) quantity: u32,
}

/// A key's hold answers a request with the same fingerprint (slot and
/// quantity); any other is refused, since returning it would hand the
/// client seats it never asked for. The slot is compared first.
pub(super) fn replay(hold: Hold, wanted: Wanted) -> Result<HoldOutcome, Error> {
    if hold.slot_id != wanted.slot_id {
        return Err(Error::IdempotencyKeyReuse(KeyReuse::Slot {
            used_for: hold.slot_id,
        }));
    }
    if hold.quantity != wanted.quantity {
        return Err(Error::IdempotencyKeyReuse(KeyReuse::Quantity {
            used_for: hold.quantity,
            asked: wanted.quantity,
        }));
    }
    Ok(HoldOutcome {
        hold,
        created: false,
    })
}
