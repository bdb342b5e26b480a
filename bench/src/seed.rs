//! The bench's rows: slots and holds seeded in batches, as the scenarios
//! need them.

use crate::setup::{BATCH, Bench};
use chrono::{DateTime, Utc};
use sqlx::{MySql, QueryBuilder};

impl Bench {
    /// `count` slots of `capacity` seats, in id order.
    pub async fn insert_slots(&self, count: usize, capacity: u32) -> Result<Vec<u64>, String> {
        let mut ids = Vec::with_capacity(count);
        let mut left = count;
        while left > 0 {
            let n = left.min(BATCH);
            let mut sql = QueryBuilder::<MySql>::new(
                "INSERT INTO slots (starts_at, ends_at, capacity, remaining) ",
            );
            sql.push_values(0..n, |mut row, i| {
                let hour = (count - left + i) as i64;
                row.push("UTC_TIMESTAMP() + INTERVAL ")
                    .push_unseparated(format!("{} HOUR", 24 + hour))
                    .push("UTC_TIMESTAMP() + INTERVAL ")
                    .push_unseparated(format!("{} HOUR", 25 + hour))
                    .push_bind(capacity)
                    .push_bind(capacity);
            });
            let done = sql
                .build()
                .execute(&self.admin)
                .await
                .map_err(|e| e.to_string())?;
            // A multi-row INSERT reports its first id; the rest follow it.
            let first = done.last_insert_id();
            ids.extend(first..first + n as u64);
            left -= n;
        }
        Ok(ids)
    }

    /// `per_slot` held holds on each of `slots` expiring at `expires_at`,
    /// owned by the bench client and counted in `slots.held` as the
    /// service would have counted them. Returns their ids, interleaved
    /// over the slots.
    pub async fn insert_holds(
        &self,
        slots: &[u64],
        per_slot: usize,
        expires_at: DateTime<Utc>,
    ) -> Result<Vec<u64>, String> {
        let total = slots.len() * per_slot;
        let mut ids = Vec::with_capacity(total);
        let mut made = 0;
        while made < total {
            let n = (total - made).min(BATCH);
            let mut sql = QueryBuilder::<MySql>::new(
                "INSERT INTO holds (slot_id, client_id, idempotency_key, status, expires_at) ",
            );
            sql.push_values(made..made + n, |mut row, i| {
                row.push_bind(slots[i % slots.len()])
                    .push_bind(self.client.0)
                    .push_bind(uuid::Uuid::new_v4().to_string())
                    .push("'held'")
                    .push_bind(expires_at);
            });
            let done = sql
                .build()
                .execute(&self.admin)
                .await
                .map_err(|e| e.to_string())?;
            let first = done.last_insert_id();
            ids.extend(first..first + n as u64);
            made += n;
        }
        // The counter and the projection's floor as the holds' claims would
        // leave them (docs/DESIGN.md, "The projection's floor").
        let held = format!(
            "UPDATE slots SET held_expires_min = LEAST(IF(held = 0, TIMESTAMP'9999-12-31 00:00:00', \
             held_expires_min), TIMESTAMP'{}'), held = held + {per_slot} WHERE id IN (",
            expires_at.format("%Y-%m-%d %H:%M:%S%.6f")
        );
        self.update_each(&held, slots).await?;
        Ok(ids)
    }

    /// `per_slot` bookings on each of `slots`: holds made as above, then
    /// confirmed, their seats taken from `remaining`, as confirm leaves
    /// them.
    pub async fn insert_bookings(
        &self,
        slots: &[u64],
        per_slot: usize,
        expires_at: DateTime<Utc>,
    ) -> Result<Vec<u64>, String> {
        let ids = self.insert_holds(slots, per_slot, expires_at).await?;
        let confirm =
            "UPDATE holds SET status = 'confirmed', confirmed_at = UTC_TIMESTAMP(6) WHERE id IN (";
        self.update_each(confirm, &ids).await?;
        let consume = format!(
            "UPDATE slots SET held = held - {per_slot}, remaining = remaining - {per_slot} WHERE id IN ("
        );
        self.update_each(&consume, slots).await?;
        Ok(ids)
    }

    /// `update` (a statement ending in `IN (`) on every id of `ids`, in
    /// batches.
    /// `per_slot` waiting entries of one seat on each of `slots`, the
    /// slots' line counters with them (SPEC §18), as joins would leave
    /// them.
    pub async fn insert_entries(&self, slots: &[u64], per_slot: usize) -> Result<(), String> {
        let total = slots.len() * per_slot;
        let mut made = 0;
        while made < total {
            let n = (total - made).min(BATCH);
            let mut sql = QueryBuilder::<MySql>::new(
                "INSERT INTO waitlist_entries \
                 (slot_id, client_id, quantity, idempotency_key, created_at, updated_at) ",
            );
            sql.push_values(made..made + n, |mut row, i| {
                row.push_bind(slots[i % slots.len()])
                    .push_bind(self.client.0)
                    .push("1")
                    .push_bind(uuid::Uuid::new_v4().to_string())
                    .push("UTC_TIMESTAMP(6)")
                    .push("UTC_TIMESTAMP(6)");
            });
            sql.build()
                .execute(&self.admin)
                .await
                .map_err(|e| e.to_string())?;
            made += n;
        }
        let line = format!(
            "UPDATE slots SET waiting = waiting + {per_slot}, waiting_min = 1 WHERE id IN ("
        );
        self.update_each(&line, slots).await
    }

    async fn update_each(&self, update: &str, ids: &[u64]) -> Result<(), String> {
        for chunk in ids.chunks(BATCH) {
            let mut sql = QueryBuilder::<MySql>::new(update);
            let mut list = sql.separated(", ");
            for id in chunk {
                list.push_bind(*id);
            }
            sql.push(")");
            sql.build()
                .execute(&self.admin)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}
