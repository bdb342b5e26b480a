//! The `feed` group: `GET /events` at 10,000,000 events of history (SPEC
//! §12), in a database of its own (`slot_booking_bench_feed`), filled by
//! the server from MariaDB's sequence tables. Nine events in ten belong to
//! one of 50 clients' holds, one in ten is a slot event (everyone's); each
//! carries a resource of the API's size. `BENCH_FEED_EVENTS` shrinks it.
//!
//! First what the outbox costs hold and confirm (`scenarios::outbox`).
//! Then, through `Feed::page` as the route calls it, one environment per
//! client:
//! *admin_page* a page of 100 from a random position, *booker_page* the
//! same for one client (its own holds' events and the slots'), *tail* a
//! poll at the head of the feed (nothing new: what an idle poller costs).

use crate::measure::{self, Budget, Outcome};
use crate::report::Row;
use crate::scenarios::Timing;
use crate::setup::Bench;
use serde_json::json;
use shared::clients::{Caller, ClientId, Role};
use shared::events::{EventCursor, Feed};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Events per INSERT … SELECT.
const CHUNK: u64 = 1_000_000;
const CLIENTS: u64 = 50;
const PAGE: u32 = 100;

fn event_count() -> u64 {
    crate::setup::count_from_env("BENCH_FEED_EVENTS", 10_000, 10_000_000)
}

pub async fn run(
    server: &str,
    redis_url: &str,
    timing: Timing,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    let bench = Bench::create(server, "slot_booking_bench_feed", redis_url).await?;
    let done = measured(&bench, timing, emit).await;
    bench.drop_database().await;
    done
}

/// One event per `seq_1_to_N` row, numbered as the sequencer would have:
/// `seq = id`. The data is a hold resource of the API's shape and size.
const FILL: &str = "INSERT INTO events (id, seq, type, client_id, slot_id, hold_id, occurred_at, data) \
     SELECT s.seq + ?, s.seq + ?, IF((s.seq + ?) % 10 = 0, 'slot.updated', 'hold.created'), \
     IF((s.seq + ?) % 10 = 0, NULL, 2 + (s.seq + ?) % ?), (s.seq + ?) % 100000 + 1, s.seq + ?, \
     UTC_TIMESTAMP(6) - INTERVAL ((? - s.seq - ?) * 1000) MICROSECOND, \
     CONCAT('{\"id\":', s.seq + ?, ',\"slot_id\":', (s.seq + ?) % 100000 + 1, \
     ',\"status\":\"held\",\"quantity\":1,\"active\":true,\"idempotency_key\":\"', UUID(), \
     '\",\"expires_at\":\"2026-12-02T08:05:00.000000Z\",\"confirmed_at\":null,\"cancelled_at\":null,', \
     '\"created_at\":\"2026-12-02T08:00:00.000000Z\",\"updated_at\":\"2026-12-02T08:00:00.000000Z\"}') \
     FROM seq_1_to_1000000 s WHERE s.seq <= ?";

async fn measured(bench: &Bench, timing: Timing, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    // What the outbox costs a booking, on the still empty feed.
    crate::scenarios::outbox(bench, timing, emit).await?;
    let total = event_count();
    let started = Instant::now();
    // The outbox's events go: the feed is numbered from 1 below.
    for statement in [
        "TRUNCATE TABLE events",
        "UPDATE event_feed SET sequenced_through = 0, purged_through = 0, published_through = 0",
    ] {
        sqlx::query(statement)
            .execute(&bench.admin)
            .await
            .map_err(|e| format!("feed reset: {e}"))?;
    }
    let mut base = 0;
    while base < total {
        let n = (total - base).min(CHUNK);
        let mut query = sqlx::query(FILL);
        for _ in 0..4 {
            query = query.bind(base);
        }
        query = query.bind(base).bind(CLIENTS).bind(base).bind(base);
        query = query.bind(total).bind(base).bind(base).bind(base).bind(n);
        query
            .execute(&bench.admin)
            .await
            .map_err(|e| format!("feed fill: {e}"))?;
        base += n;
    }
    sqlx::query("UPDATE event_feed SET sequenced_through = ? WHERE id = 1")
        .bind(total)
        .execute(&bench.admin)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::query("ANALYZE TABLE events")
        .execute(&bench.admin)
        .await
        .map_err(|e| e.to_string())?;
    emit(Row::info(
        "feed.dataset",
        "fill",
        json!({"events": total, "clients": CLIENTS, "seconds": started.elapsed().as_secs()}),
    ));

    // Environments as functions build them: one connection each.
    let envs = Arc::new(bench.envs(8).await?);
    let admin = Caller {
        id: ClientId(1),
        role: Role::Admin,
        rate: None,
        held_cap: None,
    };
    let booker = Caller {
        id: ClientId(2),
        role: Role::Booker,
        rate: None,
        held_cap: None,
    };
    let cases: [(&str, Caller, bool); 3] = [
        ("admin_page", admin, false),
        ("booker_page", booker, false),
        ("tail", admin, true),
    ];
    for clients in [1, 8] {
        for (variant, caller, tail) in cases {
            let envs = envs.clone();
            let spread = Arc::new(AtomicU64::new(0x9E37_79B9_7F4A_7C15));
            let budget = Budget::Time(timing.seconds);
            // Warm the connections and the page's statements first.
            for env in envs.iter() {
                let _ = env
                    .app
                    .feed
                    .page(&caller, Some(EventCursor { after: 1 }), PAGE)
                    .await;
            }
            let sample = measure::run(clients, budget, move |client| {
                let (feed, spread): (Feed, _) = (envs[client].app.feed.clone(), spread.clone());
                async move {
                    // A scattered position (xorshift), never the last page.
                    let mut x = spread.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let after = if tail { total } else { x % (total - 1_000) };
                    match feed.page(&caller, Some(EventCursor { after }), PAGE).await {
                        Ok(page) if tail || page.events.len() == PAGE as usize => {
                            Ok(Outcome::Done("200"))
                        }
                        Ok(page) => Err(format!("a short page: {} events", page.events.len())),
                        Err(err) => Err(err.to_string()),
                    }
                }
            })
            .await;
            emit(Row::new(
                "feed.page_100",
                variant,
                clients,
                json!({"events": total, "limit": PAGE}),
                sample.stats(),
            ));
        }
    }
    Ok(())
}
