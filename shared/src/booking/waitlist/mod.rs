//! The waiting list (SPEC §18): joining a full slot's line, leaving it,
//! reading an entry, and the offers every freeing transaction makes
//! (`offer.rs`; with the reclaim before them, `reclaim_and_offer` in
//! `../reclaim.rs`). docs/DESIGN.md, "The waiting list", has the argument.

mod entry;
mod join;
pub(super) mod offer;
mod revoked;
mod sql;

pub use entry::Left;
pub use join::Joined;
pub(crate) use offer::{expire_waiting, offer_fulfilled, offer_locked};
