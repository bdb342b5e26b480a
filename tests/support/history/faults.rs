//! The faults the history's workload runs under: answers lost in flight
//! (the server finishes what it was sent), and the server sessions they
//! leave behind ended, as a real server's timeouts would.

use crate::TestDb;
use crate::proxy::Proxy;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Until `stop` turns true: loses the proxy's answers in flight at
/// random moments, at most `cuts` times; returns how many.
pub async fn lose_answers(
    proxy: Arc<Proxy>,
    cuts: usize,
    mut stop: watch::Receiver<bool>,
) -> usize {
    let mut rng = StdRng::from_rng(&mut rand::rng());
    for done in 0..cuts {
        let pause = Duration::from_millis(rng.random_range(50..400));
        tokio::select! {
            _ = tokio::time::sleep(pause) => proxy.lose_answers(),
            _ = stop.wait_for(|stop| *stop) => return done,
        }
    }
    cuts
}

/// Sessions of `db` idle inside a transaction this long are ones whose
/// client is gone: a lost answer's server end, which waits for a next
/// statement that will never come (a real server notices the dead peer
/// by its timeouts). Ended here, their locks go with them.
const ABANDONED: &str = "SELECT CAST(p.ID AS UNSIGNED) FROM information_schema.PROCESSLIST p \
     JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID \
     WHERE p.DB = ? AND p.COMMAND = 'Sleep' AND p.TIME_MS > 500";

/// Until `stop` turns true, ends the abandoned sessions (above) every
/// 100 ms; returns how many.
pub async fn end_abandoned(db: &TestDb, mut stop: watch::Receiver<bool>) -> usize {
    let mut ended = 0;
    loop {
        let ids: Vec<u64> = sqlx::query_scalar(ABANDONED)
            .bind(&db.name)
            .fetch_all(&db.admin)
            .await
            .expect("abandoned sessions");
        for id in ids {
            // It may have ended meanwhile.
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("KILL CONNECTION {id}")))
                .execute(&db.admin)
                .await;
            ended += 1;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = stop.wait_for(|stop| *stop) => return ended,
        }
    }
}
