//! The availability list, page by page (SPEC §4, §11): one query per page,
//! keyset pagination by slot id, and the page encoded once with its
//! validator (ETag) and its continuation (the next cursor).
//!
//! A walk that follows `next` sees every slot that matches its filters
//! for the whole walk exactly once, whatever is created or deleted
//! meanwhile: pages are ordered by the immutable id and each starts after
//! the last id served, and the "not ended" default is decided against the
//! `now` of the first page, carried by the cursor. `available=true` is a
//! property of the moment each page is read (seats come and go).
//!
//! A page examines at most `scan` slots (`AVAILABILITY_SCAN_LIMIT`, SPEC
//! §16), so no request costs the database more than that, whatever the
//! table holds and however few slots match: a large window is walked along
//! the primary key one id range of `scan` ids at a time (so at most `scan`
//! rows), and a page that found fewer matches than its limit in its range
//! still links to the next range while slots remain beyond it (DynamoDB's
//! `LastEvaluatedKey` after 1 MB examined, even when nothing matched).

use super::Slots;
use super::cursor::{Cursor, Filters};
use crate::cache::Page;
use crate::db;
use crate::db::counter::{bookable_signed, expired_but_counted, shown_signed};
use crate::domain::{SlotAvailability, SlotId};
use crate::error::Error;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use sqlx::MySqlPool;

/// The default of `AVAILABILITY_SCAN_LIMIT`: the most slots a page
/// examines. A window with fewer entries than this in its index is read
/// from that index (see [`Query::sql`]).
pub const DEFAULT_SCAN: u32 = 10_000;

/// Where a page's ids come from (see [`Query::sql`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// The window's own index, forced, its entries sorted by id.
    Window,
    /// The primary key, the `scan` ids after the cursor's, the window as a
    /// filter.
    Keyset,
}

/// The largest page, and the page without a `limit`.
pub const MAX_LIMIT: u32 = 1000;

/// One page asked for: the walk's filters, the page size and where the
/// walk stands (`None`: its first page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Query {
    pub filters: Filters,
    /// 1 to [`MAX_LIMIT`].
    pub limit: u32,
    pub cursor: Option<Cursor>,
    /// The most slots the page examines (`AVAILABILITY_SCAN_LIMIT`).
    pub scan: u32,
}

impl Query {
    /// The call without parameters: the first page of the slots that have
    /// not ended.
    pub fn first_page() -> Self {
        Self {
            filters: Filters::default(),
            limit: MAX_LIMIT,
            cursor: None,
            scan: DEFAULT_SCAN,
        }
    }

    /// The index that holds this query's window: `starts_at` with `from`,
    /// else `ends_at` (the "not ended" default).
    fn window_index(&self) -> &'static str {
        match self.filters.from {
            Some(_) => "slots_starts_at_index",
            None => "slots_ends_at_index",
        }
    }

    /// The window's conditions after `s.id > ?`, binds in the order of
    /// [`Query::bind_window`]. `in_index`: only those its index holds
    /// (`to` bounds `starts_at`, which the not-ended default's `ends_at`
    /// index does not), so that a count read from the index alone stops
    /// after that many entries read, not matched.
    fn window(&self, in_index: bool) -> String {
        let mut sql = String::new();
        match (self.filters.from, self.cursor.and_then(|c| c.now)) {
            (Some(_), _) => sql.push_str(" AND s.starts_at >= ?"),
            (None, Some(_)) => sql.push_str(" AND s.ends_at > ?"),
            (None, None) => sql.push_str(" AND s.ends_at > UTC_TIMESTAMP(6)"),
        }
        if self.bounded_by_to(in_index) {
            sql.push_str(" AND s.starts_at < ?");
        }
        sql
    }

    /// Whether `to` is one of the window's conditions (see [`Query::window`]).
    fn bounded_by_to(&self, in_index: bool) -> bool {
        self.filters.to.is_some() && (!in_index || self.filters.from.is_some())
    }

    /// How many entries the window's index range holds, up to `scan`:
    /// read from that index alone, at most that many entries. Not after the
    /// cursor: in a window's index the ids already served are not a range
    /// to skip but scattered through it (at its start, when ids follow
    /// time), so that count would cost every page the entries before it.
    fn probe_sql(&self) -> String {
        format!(
            "SELECT COUNT(*) FROM (SELECT s.id FROM slots s FORCE INDEX ({}) WHERE s.id > 0{} \
             LIMIT {}) w",
            self.window_index(),
            self.window(true),
            self.scan
        )
    }

    /// The statement for this query, built from the constant fragments
    /// below only (never from input: every value is a bind, in the order
    /// of [`Query::run`]). The page's ids are chosen first, in a derived
    /// table (keyset: after the last id, by id, `limit + 1` of them), and
    /// only those rows are read and projected.
    ///
    /// Where the ids come from is the plan. A small window (fewer than
    /// `scan` entries in its index, by the probe) is read from its own
    /// index, forced: the optimiser, which cannot know that ids follow
    /// time, would rather walk the primary key from the start, through
    /// every slot before the window (330 ms for a week at 1 M slots). A
    /// larger one is walked along the primary key, `scan` ids at a time
    /// after the last id: reading its whole index to find where it starts,
    /// or to sort it, would cost a page the whole window (0.5 s for all of
    /// 1 M slots), and an unbounded walk through slots that do not match
    /// (full ones, with `available=true`) would cost it the whole table.
    fn sql(&self, plan: Plan) -> String {
        let mut sql = String::from(PAGE_SELECT);
        match plan {
            Plan::Window => {
                sql.push_str(" FROM slots s FORCE INDEX (");
                sql.push_str(self.window_index());
                sql.push_str(") WHERE s.id > ?");
            }
            Plan::Keyset => sql.push_str(" FROM slots s WHERE s.id > ? AND s.id <= ?"),
        }
        sql.push_str(&self.window(false));
        if self.filters.available {
            sql.push_str(concat!(" AND ", shown_signed!(), " > 0"));
        }
        sql.push_str(PAGE_END);
        sql
    }

    /// Binds the cursor's id (and the range's end), then the window's
    /// instants, in statement order.
    /// Bound as DATETIME, the columns' type: a TIMESTAMP parameter (how
    /// sqlx sends a `DateTime<Utc>`) cannot hold a time after 2038, and
    /// such a window would match nothing.
    fn bind_window<'q, O>(
        &self,
        query: sqlx::query::QueryAs<'q, sqlx::MySql, O, sqlx::mysql::MySqlArguments>,
        range: Option<(u64, Option<u64>)>,
        in_index: bool,
    ) -> sqlx::query::QueryAs<'q, sqlx::MySql, O, sqlx::mysql::MySqlArguments> {
        let mut query = query;
        if let Some((after, until)) = range {
            query = query.bind(after);
            if let Some(until) = until {
                query = query.bind(until);
            }
        }
        match (self.filters.from, self.cursor.and_then(|c| c.now)) {
            (Some(from), _) => query = query.bind(from.naive_utc()),
            (None, Some(now)) => query = query.bind(now.naive_utc()),
            (None, None) => {}
        }
        if let Some(to) = self.filters.to.filter(|_| self.bounded_by_to(in_index)) {
            query = query.bind(to.naive_utc());
        }
        query
    }

    /// Up to `limit + 1` rows (one more than the page, to know whether
    /// another page may follow), and, for a walk whose range ended before
    /// the page filled, where the next range starts if slots remain beyond
    /// it (with a `now` for a walk that has none yet). The probe only
    /// chooses the plan; both give the same matches. The page is a plain
    /// read: its snapshot and its `now` are taken as it starts.
    async fn run(
        &self,
        pool: &MySqlPool,
        deadline: tokio::time::Instant,
    ) -> Result<Scanned, Error> {
        let probe = self.probe_sql();
        db::transact!(pool, "availability", deadline, |conn| {
            let (entries,): (i64,) = self
                .bind_window(
                    sqlx::query_as(sqlx::AssertSqlSafe(probe.as_str())),
                    None,
                    true,
                )
                .fetch_one(&mut *conn)
                .await?;
            let plan = if entries < i64::from(self.scan) {
                Plan::Window
            } else {
                Plan::Keyset
            };
            let after = self.cursor.map_or(0, |cursor| cursor.after.0);
            let until = match plan {
                Plan::Window => None,
                Plan::Keyset => Some(after.saturating_add(u64::from(self.scan))),
            };
            let sql = self.sql(plan);
            let rows: Vec<Row> = self
                .bind_window(
                    sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(sql.as_str())),
                    Some((after, until)),
                    false,
                )
                .bind(self.limit.saturating_add(1))
                .fetch_all(&mut *conn)
                .await?;
            let mut resume = None;
            if let Some(until) = until
                && rows.len() <= self.limit as usize
            {
                let (now, beyond): (DateTime<Utc>, bool) = sqlx::query_as(BEYOND)
                    .bind(until)
                    .fetch_one(&mut *conn)
                    .await?;
                resume = beyond.then_some((until, now));
            }
            Ok(Scanned { rows, resume })
        })
    }

    /// The page's slots and the cursor of the next page, if more may match.
    pub async fn slots(
        &self,
        pool: &MySqlPool,
        deadline: tokio::time::Instant,
    ) -> Result<(Vec<SlotAvailability>, Option<Cursor>), Error> {
        let Scanned { mut rows, resume } = self.run(pool, deadline).await?;
        let more = rows.len() > self.limit as usize;
        rows.truncate(self.limit as usize);
        // After the page's last slot when it is full, else after the last id
        // its range examined while slots remain beyond it.
        let after = match (rows.last(), resume) {
            (Some(last), _) if more => Some(last.0),
            (_, Some((until, _))) => Some(until),
            _ => None,
        };
        // The walk's `now`: the first page's, kept by every page.
        let now = self
            .cursor
            .and_then(|c| c.now)
            .or(rows.last().map(|last| last.5))
            .or(resume.map(|(_, now)| now));
        let next = after.map(|after| Cursor {
            after: SlotId(after),
            now: match self.filters.from {
                Some(_) => None,
                None => now,
            },
        });
        let slots = rows
            .into_iter()
            .map(
                |(id, capacity, bookable, starts_at, ends_at, _)| SlotAvailability {
                    slot_id: SlotId(id),
                    capacity,
                    remaining: u32::try_from(bookable).unwrap_or(capacity).min(capacity),
                    starts_at,
                    ends_at,
                },
            )
            .collect();
        Ok((slots, next))
    }

    /// The page encoded: the JSON array, its ETag and the next cursor.
    pub async fn page(
        &self,
        pool: &MySqlPool,
        deadline: tokio::time::Instant,
    ) -> Result<Page, Error> {
        let (slots, next) = self.slots(pool, deadline).await?;
        let body = serde_json::to_vec(&slots)
            .map_err(|err| Error::Internal(sqlx::Error::Encode(Box::new(err))))?;
        Ok(Page {
            etag: etag(&body, next.is_some()),
            next: next.map(|cursor| cursor.encode(&self.filters)),
            body,
        })
    }
}

/// A strong entity tag over the body and whether a next page exists (the
/// same slots with and without a `next` link are two representations).
/// Not over the cursor itself: a first page's cursor carries the `now` it
/// was read at, which would change the tag of an unchanged list.
pub fn etag(body: &[u8], more: bool) -> String {
    let mut hash = Sha256::new();
    hash.update([u8::from(more)]);
    hash.update(body);
    format!("\"{}\"", URL_SAFE_NO_PAD.encode(&hash.finalize()[..16]))
}

/// The projection of the page's slots, clamped at 0 (an operator's
/// out-of-band change must not fail the list), with the statement's own
/// `now` (the first page's `now` of a "not ended" walk). The ids of the
/// page follow (see [`Query::sql`]).
const PAGE_SELECT: &str = concat!(
    "SELECT s.id, s.capacity, CAST(GREATEST(",
    shown_signed!(),
    ", 0) AS UNSIGNED) AS bookable, s.starts_at, s.ends_at, UTC_TIMESTAMP(6) AS now ",
    "FROM (SELECT s.id"
);

const PAGE_END: &str = " ORDER BY s.id LIMIT ?) page JOIN slots s ON s.id = page.id ORDER BY s.id";

/// The first page without parameters, as [`Query::first_page`] runs it on
/// a large window: binds `0` (after no id), `10000` (the ids it may
/// examine) and `1001` (the page and one more).
pub const FIRST_PAGE: &str = concat!(
    "SELECT s.id, s.capacity, CAST(GREATEST(",
    shown_signed!(),
    ", 0) AS UNSIGNED) AS bookable, s.starts_at, s.ends_at, UTC_TIMESTAMP(6) AS now ",
    "FROM (SELECT s.id",
    " FROM slots s WHERE s.id > ? AND s.id <= ? AND s.ends_at > UTC_TIMESTAMP(6)",
    " ORDER BY s.id LIMIT ?) page JOIN slots s ON s.id = page.id ORDER BY s.id"
);

/// After a range that did not fill its page: whether any slot lies beyond
/// it (one dive into the primary key), and a `now` for a walk without one.
const BEYOND: &str = "SELECT UTC_TIMESTAMP(6), EXISTS(SELECT 1 FROM slots WHERE id > ?)";

/// `(id, capacity, bookable, starts_at, ends_at, now)`
type Row = (u64, u32, u64, DateTime<Utc>, DateTime<Utc>, DateTime<Utc>);

/// What a page read: its rows, and where the next range starts (with the
/// `now` of that read) when its own ended before the page filled and
/// slots remain beyond it.
struct Scanned {
    rows: Vec<Row>,
    resume: Option<(u64, DateTime<Utc>)>,
}

impl Slots {
    /// One page of the availability list, from the database (calls with
    /// parameters are not cached: docs/DESIGN.md, "Availability at any
    /// size").
    pub async fn availability(&self, query: &Query) -> Result<Page, Error> {
        let query = Query {
            scan: self.scan,
            ..*query
        };
        query.page(self.pool(), self.deadline()).await
    }
}

#[cfg(test)]
mod tests;
