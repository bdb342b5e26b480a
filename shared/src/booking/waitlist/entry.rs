//! Reading an entry, and leaving the line (SPEC §18).

use super::offer::{LINE_LEFT, end, waiting_min};
use super::sql::find_entry;
use crate::booking::Booking;
use crate::booking::sql::lock_slot;
use crate::clients::Caller;
use crate::db::{self, Tx};
use crate::domain::{Entry, EntryId, EntryStatus};
use crate::error::Error;
use crate::events::{EventType, commit_with, entry_event};
use sqlx::MySql;
use sqlx::pool::PoolConnection;

/// What `leave_waitlist` did: `changed` is false for an entry that was no
/// longer waiting (answered as it is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Left {
    pub entry: Entry,
    pub changed: bool,
}

impl Booking {
    /// The entry, for its owner or an admin; for anyone else it does not
    /// exist. One query: its position comes with it.
    pub async fn waitlist_entry(&self, caller: &Caller, id: EntryId) -> Result<Entry, Error> {
        let entry = db::transact!(&self.pool, "get entry", self.deadline(), |conn| {
            find_entry(&mut *conn, id).await
        })?;
        entry
            .filter(|entry| caller.may_touch(entry.client_id))
            .ok_or(Error::EntryNotFound(id))
    }

    /// A waiting entry leaves the line (`left`, its seats no longer
    /// asked for); any other entry is answered as it is. Only its owner
    /// or an admin may; for anyone else it does not exist.
    pub async fn leave_waitlist(&self, caller: &Caller, id: EntryId) -> Result<Left, Error> {
        db::transact!(&self.pool, "leave", self.deadline(), |conn| {
            leave_once(&mut conn, caller, id).await
        })
    }
}

async fn leave_once(
    conn: &mut PoolConnection<MySql>,
    caller: &Caller,
    id: EntryId,
) -> Result<Left, Error> {
    // A plain read, the owner's check once: an entry's owner and slot
    // never change; only `waiting` is not final.
    let entry = find_entry(&mut **conn, id)
        .await?
        .filter(|entry| caller.may_touch(entry.client_id))
        .ok_or(Error::EntryNotFound(id))?;
    if entry.status != EntryStatus::Waiting {
        return Ok(Left {
            entry,
            changed: false,
        });
    }
    let mut tx = Tx::begin(conn).await?;
    // Entries change only under their slot's lock.
    lock_slot(&mut tx, entry.slot_id).await?;
    let Some(left) = end(&mut tx, id, "waiting", "left").await? else {
        // Offered or expired meanwhile: answered as it is now.
        tx.rollback().await?;
        let entry = find_entry(&mut **conn, id)
            .await?
            .ok_or(Error::EntryNotFound(id))?;
        return Ok(Left {
            entry,
            changed: false,
        });
    };
    sqlx::query(LINE_LEFT)
        .bind(left.quantity)
        .bind(left.slot_id.0)
        .execute(&mut *tx)
        .await?;
    waiting_min(&mut tx, left.slot_id).await?;
    let event = entry_event(EventType::WaitlistLeft, &left)?;
    commit_with(tx, &[event]).await?;
    Ok(Left {
        entry: left,
        changed: true,
    })
}
