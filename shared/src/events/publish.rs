//! The publisher (SPEC §12): sends the feed's events to an EventBridge bus,
//! at least once, in feed order per hold, and records how far it got in
//! `event_feed.published_through`.
//!
//! Why it is correct:
//! - **One publisher at a time**: a named lock (`GET_LOCK`) on the run's
//!   own connection, held for the whole run. Another run finds it taken and
//!   returns at once; a run that dies loses it with its connection.
//! - **No skip**: by the sequencer's proof every snapshot sees the
//!   numbered events as a prefix (docs/DESIGN.md, "The change feed"), so
//!   the events after `published_through` read in `seq` order have no hole
//!   that a later commit could fill. `published_through` moves only to the
//!   last `seq` of a batch EventBridge accepted whole, after it did: an
//!   event that was not accepted stays above it and is sent again by the
//!   next attempt or the next run (so at least once: the consumers
//!   de-duplicate by the event's `id`, in `detail`).
//! - **In order per hold**: batches are sent one after another, each only
//!   once the previous one was accepted whole, and a batch never holds two
//!   events of one hold (`batch`): a hold's later event is never sent
//!   before an earlier one was accepted.
//! - **Never in a booking's way**: bookings never call EventBridge nor
//!   wait on this lock; the publisher reads committed rows and writes only
//!   `event_feed`, in one-statement transactions.

use super::batch::{Outgoing, SOURCE, batches};
use super::feed::EventRow;
use super::sequence::sequence;
use crate::aws::describe_sdk_error;
use crate::error::Error;
use aws_sdk_eventbridge::Client;
use aws_sdk_eventbridge::primitives::DateTime as AwsDateTime;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use backon::{BackoffBuilder, ExponentialBuilder};
use serde::Serialize;
use sqlx::{MySqlConnection, MySqlPool};
use std::time::Duration;
use tokio::time::Instant;

/// One publisher at a time per feed. Timeout 0: a run that finds it taken
/// returns at once (the other run is sending the same events). Held by the
/// session, so it goes with the connection if the run dies. Named locks
/// are the server's, not a database's: the name carries the database's
/// (hashed: MySQL allows 64 characters), so that feeds sharing a server
/// (stages, the tests' databases) each have their own publisher.
pub const PUBLISH_LOCK: &str =
    "SELECT GET_LOCK(CONCAT('slot-booking.event-publisher.', SHA1(DATABASE())), 0)";
pub const PUBLISH_UNLOCK: &str =
    "SELECT RELEASE_LOCK(CONCAT('slot-booking.event-publisher.', SHA1(DATABASE())))";
/// How far the feed was sent. A plain read: the lock above, not this row's
/// lock, keeps publishers apart (the sequencer and retention take it).
pub const PUBLISHED_THROUGH: &str = "SELECT published_through FROM event_feed WHERE id = 1";
/// The next events to send, in feed order. One statement, one snapshot: a
/// prefix of the numbered events (the sequencer's Lemma 2).
pub const PUBLISH_SCAN: &str = "SELECT id, seq, type, occurred_at, data, hold_id, slot_id \
     FROM events FORCE INDEX (events_seq_index) WHERE seq > ? ORDER BY seq LIMIT ?";
/// After a batch was accepted whole. Never down: under the lock no other
/// run moves it, and a guard costs nothing.
pub const PUBLISH_ADVANCE: &str =
    "UPDATE event_feed SET published_through = GREATEST(published_through, ?) WHERE id = 1";

/// What is left to send when a run ends: the numbered events above
/// `published_through`, and how long ago the first of them happened (by
/// the database's clock; 0 when none is left). The next event to send is
/// the oldest one waiting, to within the 2 minutes a `hold.expired` may
/// be written after its expiry.
pub const PUBLISH_BACKLOG: &str = "SELECT \
     CAST(GREATEST(CAST(f.sequenced_through AS SIGNED) - CAST(f.published_through AS SIGNED), 0) AS UNSIGNED), \
     CAST(GREATEST(COALESCE(TIMESTAMPDIFF(SECOND, (SELECT e.occurred_at FROM events e \
         FORCE INDEX (events_seq_index) WHERE e.seq > f.published_through ORDER BY e.seq LIMIT 1), \
         UTC_TIMESTAMP(6)), 0), 0) AS UNSIGNED) \
     FROM event_feed f WHERE f.id = 1";

/// Events read per scan.
const PUBLISH_PAGE: u32 = 100;

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PublishReport {
    /// Another publisher held the lock: this run sent nothing.
    pub busy: bool,
    /// Events EventBridge accepted in this run.
    pub published: u64,
    /// PutEvents calls that were a retry (of the failed entries only).
    pub retries: u64,
    /// The last `seq` sent, as recorded when the run ended.
    pub published_through: u64,
    /// Why the run stopped before the feed's end: EventBridge kept failing
    /// until the deadline. The unsent events stay above
    /// `published_through`; the next run starts with them.
    pub failure: Option<String>,
    /// Numbered events not sent when the run ended (its backlog).
    pub unsent: u64,
    /// Seconds since the oldest of them happened; 0 when none is left.
    /// The publisher's metric `EventsUnsentAge` and its alarm.
    pub oldest_unsent_s: u64,
}

/// Sends every event above `published_through` to `bus`, oldest first,
/// until the feed's end or `deadline`; failed entries are retried with
/// back-off until then. Returns at once when another run is at work.
pub async fn publish(
    pool: &MySqlPool,
    client: &Client,
    bus: &str,
    deadline: Instant,
) -> Result<PublishReport, Error> {
    let mut conn = pool.acquire().await?;
    // Closed rather than returned to the pool, however the run ends (even
    // dropped mid-way by a timeout): the named lock goes with it, and never
    // stays held by an idle pooled connection.
    conn.close_on_drop();
    let got: Option<i64> = sqlx::query_scalar(PUBLISH_LOCK)
        .fetch_one(&mut *conn)
        .await?;
    if got != Some(1) {
        return Ok(PublishReport {
            busy: true,
            ..PublishReport::default()
        });
    }
    let mut result = run(&mut conn, client, bus, deadline).await;
    if let Ok(report) = &mut result {
        (report.unsent, report.oldest_unsent_s) = sqlx::query_as(PUBLISH_BACKLOG)
            .fetch_one(&mut *conn)
            .await?;
    }
    // Released now; the connection's close would release it anyway.
    let _ = sqlx::query(PUBLISH_UNLOCK).execute(&mut *conn).await;
    result
}

/// An event as the feed reads it, and what orders it on the bus.
#[derive(sqlx::FromRow)]
struct PublishRow {
    #[sqlx(flatten)]
    event: EventRow,
    hold_id: Option<u64>,
    slot_id: u64,
}

async fn run(
    conn: &mut MySqlConnection,
    client: &Client,
    bus: &str,
    deadline: Instant,
) -> Result<PublishReport, Error> {
    let mut report = PublishReport::default();
    loop {
        // 1. Number what has committed, so that this run sends it.
        sequence(&mut *conn).await?;
        // 2. From where the last accepted batch ended.
        let through: u64 = sqlx::query_scalar(PUBLISHED_THROUGH)
            .fetch_one(&mut *conn)
            .await?;
        report.published_through = through;
        let rows: Vec<PublishRow> = sqlx::query_as(PUBLISH_SCAN)
            .bind(through)
            .bind(PUBLISH_PAGE)
            .fetch_all(&mut *conn)
            .await?;
        if rows.is_empty() {
            return Ok(report);
        }
        let outgoing = rows
            .into_iter()
            .map(outgoing)
            .collect::<Result<Vec<_>, Error>>()?;
        // 3. Batch after batch, each accepted whole before the next.
        for batch in batches(outgoing) {
            let last = batch.last().map_or(through, |event| event.seq);
            let sent = send(client, bus, &batch, deadline).await;
            report.retries += sent.retries;
            if let Some(failure) = sent.failure {
                report.failure = Some(failure);
                return Ok(report);
            }
            sqlx::query(PUBLISH_ADVANCE)
                .bind(last)
                .execute(&mut *conn)
                .await?;
            report.published += batch.len() as u64;
            report.published_through = last;
        }
        if Instant::now() >= deadline {
            return Ok(report);
        }
    }
}

fn outgoing(row: PublishRow) -> Result<Outgoing, Error> {
    let event = row.event.into_event()?;
    Outgoing::new(event, row.hold_id, row.slot_id)
        .map_err(|message| Error::Internal(sqlx::Error::Decode(message.into())))
}

/// How sending one batch went.
struct Sent {
    retries: u64,
    /// `None`: every entry was accepted.
    failure: Option<String>,
}

/// The first retry's delay, and the longest: a Lambda run lasts a minute
/// at most, and a bus that is down for longer is the schedule's to retry.
const FIRST_RETRY: Duration = Duration::from_millis(200);
const LONGEST_RETRY: Duration = Duration::from_secs(5);

/// Sends `batch` until every entry is accepted, retrying only the entries
/// that failed, or gives up when the next attempt would start after
/// `deadline`.
async fn send(client: &Client, bus: &str, batch: &[Outgoing], deadline: Instant) -> Sent {
    // The schedule comes from `backon` (already in the tree through
    // `redis`): exponential with jitter, so that environments retrying
    // after one outage do not all come back at once. Not the SDK's own
    // retries: those repeat a whole request on a transient error, while a
    // PutEvents answer can accept some entries and refuse others (HTTP 200
    // with FailedEntryCount > 0), and only the refused ones may go again.
    let mut delays = ExponentialBuilder::new()
        .with_min_delay(FIRST_RETRY)
        .with_max_delay(LONGEST_RETRY)
        .with_jitter()
        .without_max_times()
        .build();
    let mut pending: Vec<&Outgoing> = batch.iter().collect();
    let mut retries = 0;
    loop {
        let failure = match tokio::time::timeout_at(deadline, put(client, bus, &pending)).await {
            Err(_) => "PutEvents did not answer before the deadline".to_string(),
            Ok(Err(failure)) => failure,
            Ok(Ok(refused)) if refused.is_empty() => {
                return Sent {
                    retries,
                    failure: None,
                };
            }
            Ok(Ok(refused)) => {
                let failure = format!(
                    "PutEvents refused {} of {} entries ({})",
                    refused.len(),
                    pending.len(),
                    refused[0].1
                );
                pending = refused.into_iter().map(|(event, _)| event).collect();
                failure
            }
        };
        let delay = delays.next().unwrap_or(LONGEST_RETRY);
        if Instant::now() + delay >= deadline {
            tracing::warn!(%failure, unsent = pending.len(), "publisher stops until its next run");
            return Sent {
                retries,
                failure: Some(failure),
            };
        }
        tracing::warn!(%failure, retry_in_ms = delay.as_millis() as u64, "publisher retries");
        tokio::time::sleep(delay).await;
        retries += 1;
    }
}

/// One PutEvents call: the entries it refused, each with why; `Err` when
/// the call itself failed (nothing is known to be accepted).
async fn put<'a>(
    client: &Client,
    bus: &str,
    pending: &[&'a Outgoing],
) -> Result<Vec<(&'a Outgoing, String)>, String> {
    let entries = pending
        .iter()
        .map(|event| entry(bus, event))
        .collect::<Vec<_>>();
    let output = client
        .put_events()
        .set_entries(Some(entries))
        .send()
        .await
        .map_err(|err| format!("PutEvents: {}", short(describe_sdk_error(&err))))?;
    let results = output.entries();
    // The answer's entries are the request's, in its order. Any other
    // answer accepts nothing for sure: every entry goes again.
    if results.len() != pending.len() {
        let why = format!(
            "PutEvents answered {} entries for {}",
            results.len(),
            pending.len()
        );
        return Ok(pending.iter().map(|event| (*event, why.clone())).collect());
    }
    let refused: Vec<(&Outgoing, String)> = pending
        .iter()
        .zip(results)
        .filter(|(_, result)| result.error_code().is_some() || result.event_id().is_none())
        .map(|(event, result)| {
            let why = format!(
                "{}: {}",
                result.error_code().unwrap_or("no event id"),
                result.error_message().unwrap_or_default()
            );
            (*event, why)
        })
        .collect();
    if refused.is_empty() && output.failed_entry_count() > 0 {
        let why = format!("FailedEntryCount {}", output.failed_entry_count());
        return Ok(pending.iter().map(|event| (*event, why.clone())).collect());
    }
    Ok(refused)
}

/// An SDK error's chain of causes can quote a whole response body: the
/// report and the log keep its start.
fn short(mut text: String) -> String {
    const LONGEST: usize = 300;
    if text.len() > LONGEST {
        let mut end = LONGEST;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

fn entry(bus: &str, event: &Outgoing) -> PutEventsRequestEntry {
    let at = event.event.occurred_at;
    let time = AwsDateTime::from_secs_and_nanos(at.timestamp(), at.timestamp_subsec_nanos());
    PutEventsRequestEntry::builder()
        .event_bus_name(bus)
        .source(SOURCE)
        .detail_type(event.event.kind.as_str())
        .detail(event.detail.as_str())
        .time(time)
        .build()
}
