//! Row locks taken from the test's own connection, to queue the service's
//! transactions in an order the test chooses.

use super::TestDb;
use shared::domain::SlotId;
use sqlx::{MySql, Transaction};
use std::time::Duration;

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

impl TestDb {
    /// Waits until `n` transactions of this test's database wait for a row
    /// lock; fails the test after about 6 s.
    ///
    /// InnoDB refreshes its INNODB_TRX snapshot only when it has not been
    /// read for 100 ms: polling faster would keep reading the same one.
    pub async fn wait_for_lock_waiters(&self, n: i64) {
        for _ in 0..40 {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.INNODB_TRX t \
                 JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id \
                 WHERE t.trx_state = 'LOCK WAIT' AND p.DB = ?",
            )
            .bind(&self.name)
            .fetch_one(&self.admin)
            .await
            .expect("lock waiters");
            if waiting >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        let states: Vec<(String, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT t.trx_state, p.DB, t.trx_query FROM information_schema.INNODB_TRX t \
             LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id",
        )
        .fetch_all(&self.admin)
        .await
        .expect("transactions");
        panic!("{n} lock waiters never appeared: {states:?}");
    }
}
