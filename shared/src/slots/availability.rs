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

use super::Slots;
use super::cursor::{Cursor, Filters};
use crate::cache::Page;
use crate::db;
use crate::db::counter::expired_but_counted;
use crate::domain::{SlotAvailability, SlotId};
use crate::error::Error;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use sqlx::MySqlPool;

/// What a client can still book, SIGNED: `remaining − held +
/// expired-but-counted` (on the UNSIGNED columns a negative intermediate
/// would be error 1690 and fail the whole list), for a slot aliased `s`.
/// The expired-but-counted seats are summed per slot, by the hold path's
/// own index range (booking/sql.rs, `slot_bookable`), so a page costs one
/// short dive per slot of the page, whatever the size of the table; and
/// none for a slot whose counter is 0, which by the counter's definition
/// counts no hold, expired or not.
macro_rules! bookable_signed {
    () => {
        concat!(
            "(CAST(s.remaining AS SIGNED) - CAST(s.held AS SIGNED) + IF(s.held = 0, 0, ",
            "(SELECT CAST(COALESCE(SUM(x.quantity), 0) AS SIGNED) FROM holds x ",
            "FORCE INDEX (holds_slot_id_status_expires_at_index) WHERE x.slot_id = s.id AND ",
            expired_but_counted!(),
            ")))"
        )
    };
}

/// See [`Query::sql`]: a window with fewer entries than this in its index
/// is read from that index (a few milliseconds at this size).
pub const SMALL_WINDOW: u32 = 20_000;

/// Where a page's ids come from (see [`Query::sql`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// The window's own index, forced, its entries sorted by id.
    Window,
    /// The primary key, from the cursor's id, the window as a filter.
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
}

impl Query {
    /// The call without parameters: the first page of the slots that have
    /// not ended.
    pub fn first_page() -> Self {
        Self {
            filters: Filters::default(),
            limit: MAX_LIMIT,
            cursor: None,
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
    /// [`Query::bind_window`].
    fn window(&self) -> String {
        let mut sql = String::new();
        match (self.filters.from, self.cursor.and_then(|c| c.now)) {
            (Some(_), _) => sql.push_str(" AND s.starts_at >= ?"),
            (None, Some(_)) => sql.push_str(" AND s.ends_at > ?"),
            (None, None) => sql.push_str(" AND s.ends_at > UTC_TIMESTAMP(6)"),
        }
        if self.filters.to.is_some() {
            sql.push_str(" AND s.starts_at < ?");
        }
        sql
    }

    /// How many entries the window's index holds, up to [`SMALL_WINDOW`]:
    /// read from that index alone, at most that many entries. Not after the
    /// cursor: in a window's index the ids already served are not a range
    /// to skip but scattered through it (at its start, when ids follow
    /// time), so that count would cost every page the entries before it.
    fn probe_sql(&self) -> String {
        format!(
            "SELECT COUNT(*) FROM (SELECT s.id FROM slots s FORCE INDEX ({}) WHERE s.id > 0{} \
             LIMIT {SMALL_WINDOW}) w",
            self.window_index(),
            self.window()
        )
    }

    /// The smallest id in the window, from the window's index alone: where
    /// the first page of a large window starts its walk along the primary
    /// key, rather than walking through every slot below the window. It
    /// costs the window's entries once per walk; the later pages start
    /// after their cursor.
    fn seek_sql(&self) -> String {
        format!(
            "SELECT MIN(s.id) FROM slots s FORCE INDEX ({}) WHERE s.id > 0{}",
            self.window_index(),
            self.window()
        )
    }

    /// The statement for this query, built from the constant fragments
    /// below only (never from input: every value is a bind, in the order
    /// of [`Query::run`]). The page's ids are chosen first, in a derived
    /// table (keyset: after the last id, by id, `limit + 1` of them), and
    /// only those rows are read and projected.
    ///
    /// Where the ids come from is the plan. A small window (fewer than
    /// [`SMALL_WINDOW`] entries in its index, by the probe) is read
    /// from its own index, forced: the optimiser, which cannot know that
    /// ids follow time, would rather walk the primary key from the start,
    /// through every slot before the window (330 ms for a week at 1 M
    /// slots). A larger one is walked along the primary key from the last
    /// id (a first page from the window's smallest id: [`Query::seek_sql`]):
    /// reading its whole index and sorting it would cost every page the
    /// whole window (300 ms for a year), while the walk reads about a page
    /// of rows once it is inside the window.
    fn sql(&self, plan: Plan) -> String {
        let mut sql = String::from(PAGE_SELECT);
        match plan {
            Plan::Window => {
                sql.push_str(" FROM slots s FORCE INDEX (");
                sql.push_str(self.window_index());
                sql.push_str(") WHERE s.id > ?");
            }
            Plan::Keyset => sql.push_str(" FROM slots s WHERE s.id > ?"),
        }
        sql.push_str(&self.window());
        if self.filters.available {
            sql.push_str(concat!(" AND ", bookable_signed!(), " > 0"));
        }
        sql.push_str(PAGE_END);
        sql
    }

    /// Binds the cursor's id and the window's instants, in statement order.
    /// Bound as DATETIME, the columns' type: a TIMESTAMP parameter (how
    /// sqlx sends a `DateTime<Utc>`) cannot hold a time after 2038, and
    /// such a window would match nothing.
    fn bind_window<'q, O>(
        &self,
        query: sqlx::query::QueryAs<'q, sqlx::MySql, O, sqlx::mysql::MySqlArguments>,
        after: Option<u64>,
    ) -> sqlx::query::QueryAs<'q, sqlx::MySql, O, sqlx::mysql::MySqlArguments> {
        let mut query = query;
        if let Some(after) = after {
            query = query.bind(after);
        }
        match (self.filters.from, self.cursor.and_then(|c| c.now)) {
            (Some(from), _) => query = query.bind(from.naive_utc()),
            (None, Some(now)) => query = query.bind(now.naive_utc()),
            (None, None) => {}
        }
        if let Some(to) = self.filters.to {
            query = query.bind(to.naive_utc());
        }
        query
    }

    /// Up to `limit + 1` rows (one more than the page, to know whether
    /// another page may follow). The probe only chooses the plan; both
    /// plans give the same rows. The page is a plain read: its snapshot and
    /// its `now` are taken as it starts.
    async fn run(
        &self,
        pool: &MySqlPool,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<Row>, Error> {
        let probe = self.probe_sql();
        let seek = self.seek_sql();
        db::transact!(pool, "availability", deadline, |conn| {
            let (entries,): (i64,) = self
                .bind_window(sqlx::query_as(sqlx::AssertSqlSafe(probe.as_str())), None)
                .fetch_one(&mut *conn)
                .await?;
            let plan = if entries < i64::from(SMALL_WINDOW) {
                Plan::Window
            } else {
                Plan::Keyset
            };
            let after = match (plan, self.cursor) {
                (_, Some(cursor)) => cursor.after.0,
                (Plan::Window, None) => 0,
                (Plan::Keyset, None) => {
                    let (first,): (Option<u64>,) = self
                        .bind_window(sqlx::query_as(sqlx::AssertSqlSafe(seek.as_str())), None)
                        .fetch_one(&mut *conn)
                        .await?;
                    match first {
                        Some(first) => first - 1,
                        None => return Ok(Vec::new()),
                    }
                }
            };
            let sql = self.sql(plan);
            Ok(self
                .bind_window(
                    sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(sql.as_str())),
                    Some(after),
                )
                .bind(self.limit.saturating_add(1))
                .fetch_all(&mut *conn)
                .await?)
        })
    }

    /// The page's slots and the cursor of the next page, if more may match.
    pub async fn slots(
        &self,
        pool: &MySqlPool,
        deadline: tokio::time::Instant,
    ) -> Result<(Vec<SlotAvailability>, Option<Cursor>), Error> {
        let mut rows = self.run(pool, deadline).await?;
        let more = rows.len() > self.limit as usize;
        rows.truncate(self.limit as usize);
        let next = match rows.last() {
            Some(last) if more => Some(Cursor {
                after: SlotId(last.0),
                // The walk's `now`: the first page's, kept by every page.
                now: match self.filters.from {
                    Some(_) => None,
                    None => Some(self.cursor.and_then(|c| c.now).unwrap_or(last.5)),
                },
            }),
            _ => None,
        };
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
    bookable_signed!(),
    ", 0) AS UNSIGNED) AS bookable, s.starts_at, s.ends_at, UTC_TIMESTAMP(6) AS now ",
    "FROM (SELECT s.id"
);

const PAGE_END: &str = " ORDER BY s.id LIMIT ?) page JOIN slots s ON s.id = page.id ORDER BY s.id";

/// The first page without parameters, as [`Query::first_page`] runs it:
/// binds `0` (after no id) and `1001` (the page and one more).
pub const FIRST_PAGE: &str = concat!(
    "SELECT s.id, s.capacity, CAST(GREATEST(",
    bookable_signed!(),
    ", 0) AS UNSIGNED) AS bookable, s.starts_at, s.ends_at, UTC_TIMESTAMP(6) AS now ",
    "FROM (SELECT s.id",
    " FROM slots s WHERE s.id > ? AND s.ends_at > UTC_TIMESTAMP(6)",
    " ORDER BY s.id LIMIT ?) page JOIN slots s ON s.id = page.id ORDER BY s.id"
);

/// `(id, capacity, bookable, starts_at, ends_at, now)`
type Row = (u64, u32, u64, DateTime<Utc>, DateTime<Utc>, DateTime<Utc>);

impl Slots {
    /// One page of the availability list, from the database (calls with
    /// parameters are not cached: docs/DESIGN.md, "Availability at any
    /// size").
    pub async fn availability(&self, query: &Query) -> Result<Page, Error> {
        query.page(self.pool(), self.deadline()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_page_is_the_query_without_parameters() {
        assert_eq!(Query::first_page().sql(Plan::Keyset), FIRST_PAGE);
    }

    #[test]
    fn the_etag_is_strong_and_tells_a_last_page_from_one_with_more() {
        let tag = etag(b"[]", false);
        assert!(tag.starts_with('"') && tag.ends_with('"') && tag.len() == 24);
        assert_eq!(tag, etag(b"[]", false));
        assert_ne!(tag, etag(b"[]", true));
        assert_ne!(tag, etag(b"[ ]", false));
    }
}
