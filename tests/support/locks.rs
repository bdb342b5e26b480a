//! Row locks taken from the test's own connection, to queue the service's
//! transactions in an order the test chooses.

use super::TestDb;
use shared::domain::SlotId;
use sqlx::{MySql, Transaction};
use std::time::Duration;
use tokio::sync::Mutex;

/// A transaction as a failed wait reports it: state, table of the lock
/// it waits for, the session's state, its statement.
type Waiting = (String, Option<String>, Option<String>, Option<String>);

/// When this process last read InnoDB's transactions (see
/// [`TestDb::lock_waiters`]).
static LAST_READ: Mutex<Option<tokio::time::Instant>> = Mutex::const_new(None);

/// A slot's row lock held by an admin transaction, as a competing
/// transaction would hold it: the service's transactions that need it
/// queue behind it, in arrival order.
pub struct SlotLock(Transaction<'static, MySql>);

impl SlotLock {
    pub async fn take(db: &TestDb, slot: SlotId) -> Self {
        let mut tx = db.admin.begin().await.expect("begin");
        sqlx::query("SELECT id FROM slots WHERE id = ? FOR UPDATE")
            .bind(slot.0)
            .execute(&mut *tx)
            .await
            .expect("lock the slot");
        Self(tx)
    }

    pub async fn release(self) {
        self.0.rollback().await.expect("release the slot");
    }
}

/// Every insert into the events table waits, as behind a slow disk: a
/// booking that has decided and written everything queues at its last
/// statement (the event's, with its COMMIT), still holding the slot's
/// lock. A locking read of the whole table locks the gap after its last
/// row, where every new event goes.
pub struct EventsLock(Transaction<'static, MySql>);

impl EventsLock {
    pub async fn take(db: &TestDb) -> Self {
        let mut tx = db.admin.begin().await.expect("begin");
        sqlx::query("SELECT id FROM events FOR UPDATE")
            .execute(&mut *tx)
            .await
            .expect("lock the events' last gap");
        Self(tx)
    }

    pub async fn release(self) {
        self.0.rollback().await.expect("release the events");
    }
}

impl TestDb {
    /// The events of `kind` (`hold.extended`…) about hold `id`.
    pub async fn events_of(&self, id: &str, kind: &str) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE hold_id = ? AND type = ?")
            .bind(id)
            .bind(kind)
            .fetch_one(&self.admin)
            .await
            .expect("count events")
    }

    /// The events of `kind` (`waitlist.left`…) about waiting-list entry
    /// `id`: its resource is their data.
    pub async fn events_of_entry(&self, id: &str, kind: &str) -> i64 {
        sqlx::query_scalar(
            "SELECT COUNT(*) FROM events WHERE type = ? AND JSON_VALUE(data, '$.id') = ?",
        )
        .bind(kind)
        .bind(id)
        .fetch_one(&self.admin)
        .await
        .expect("count events")
    }

    /// How many transactions wait for a row lock of this test's database
    /// now (InnoDB's view of it is at most 100 ms old). Told by the table
    /// of the lock waited for: a session inside a stored procedure (the
    /// `events_commit` CALL) shows no database in the process list.
    pub async fn lock_waiters(&self) -> i64 {
        // InnoDB refreshes the view behind INNODB_TRX only on a read that
        // comes 100 ms or more after the previous one, anyone's: tests
        // polling side by side would keep one another reading a stale
        // view for ever. Every read of this process waits its turn.
        let mut last = LAST_READ.lock().await;
        if let Some(at) = *last {
            tokio::time::sleep_until(at + Duration::from_millis(110)).await;
        }
        let waiting = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX t \
             JOIN information_schema.INNODB_LOCKS l ON l.lock_id = t.trx_requested_lock_id \
             WHERE t.trx_state = 'LOCK WAIT' AND SUBSTRING_INDEX(l.lock_table, '.', 1) = ?",
        )
        .bind(format!("`{}`", self.name))
        .fetch_one(&self.admin)
        .await
        .expect("lock waiters");
        *last = Some(tokio::time::Instant::now());
        waiting
    }

    /// The connection, other than `blocker`, whose transaction waits now
    /// for a lock that `blocker`'s transaction holds, while running a
    /// statement that contains `sql`: true only once that connection has
    /// sent a locking statement and queued behind the blocker, never while
    /// an earlier statement (a plain read of the same text) is still
    /// running. InnoDB's view of it is at most 100 ms old.
    pub async fn blocked_by(&self, blocker: u64, sql: &str) -> Option<u64> {
        let mut last = LAST_READ.lock().await;
        if let Some(at) = *last {
            tokio::time::sleep_until(at + Duration::from_millis(110)).await;
        }
        let found = sqlx::query_scalar(
            "SELECT CAST(r.trx_mysql_thread_id AS UNSIGNED) \
             FROM information_schema.INNODB_LOCK_WAITS w \
             JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id \
             JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id \
             WHERE b.trx_mysql_thread_id = ? AND r.trx_mysql_thread_id <> ? \
             AND r.trx_state = 'LOCK WAIT' AND INSTR(r.trx_query, ?) > 0 \
             LIMIT 1",
        )
        .bind(blocker)
        .bind(blocker)
        .bind(sql)
        .fetch_optional(&self.admin)
        .await
        .expect("lock waits");
        *last = Some(tokio::time::Instant::now());
        found
    }

    /// Waits until `n` transactions wait for a row lock of this test's
    /// database; fails the test after 10 s.
    pub async fn wait_for_lock_waiters(&self, n: i64) {
        let until = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::time::Instant::now() < until {
            if self.lock_waiters().await >= n {
                return;
            }
        }
        let states: Vec<Waiting> = sqlx::query_as(
            "SELECT t.trx_state, l.lock_table, p.STATE, LEFT(t.trx_query, 60) \
             FROM information_schema.INNODB_TRX t \
             LEFT JOIN information_schema.INNODB_LOCKS l ON l.lock_id = t.trx_requested_lock_id \
             LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id",
        )
        .fetch_all(&self.admin)
        .await
        .expect("transactions");
        panic!(
            "{n} lock waiters of `{}` never appeared: {states:?}",
            self.name
        );
    }
}
