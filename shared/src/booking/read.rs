//! Reading a hold back (SPEC §9): by id, or by the idempotency key of a
//! client that lost a response. Plain reads, one query each.

use super::Booking;
use super::sql::{find_by_id, find_by_key};
use crate::clients::Caller;
use crate::db;
use crate::domain::{Hold, HoldId, IdempotencyKey};
use crate::error::Error;

impl Booking {
    /// The hold, for its owner or an admin; for anyone else it does not
    /// exist (the same 404 as a missing hold). One query: the owner comes
    /// back with the row.
    pub async fn get_hold(&self, caller: &Caller, id: HoldId) -> Result<Hold, Error> {
        let hold = db::transact!(&self.pool, "get hold", self.deadline(), |conn| {
            find_by_id(&mut *conn, id).await
        })?;
        hold.filter(|hold| caller.may_touch(hold.client_id))
            .ok_or(Error::HoldNotFound(id))
    }

    /// The caller's own hold with this key (SPEC §15.4: keys belong to
    /// clients, so an admin finds only its own here too).
    pub async fn find_hold(&self, caller: &Caller, key: &IdempotencyKey) -> Result<Hold, Error> {
        let client = caller.id;
        db::transact!(&self.pool, "find hold", self.deadline(), |conn| {
            find_by_key(&mut *conn, client, key).await
        })?
        .ok_or(Error::NotFound("hold"))
    }
}
