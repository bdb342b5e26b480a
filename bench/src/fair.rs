//! SPEC §16's costs, in one run (`--only fair_use`): a hold with the
//! per-client cap in force against a hold without one, hot and spread, 1
//! and 8 environments, in alternating rounds; and the round trips a
//! refusal costs once it is known, counted by the servers themselves.

use crate::report::Row;
use crate::scenarios::{Arm, HoldCase, Preload, Timing, Variant, compare_holds};
use crate::setup::{Bench, CAPPED_CLIENTS, ROOMY};
use serde_json::json;
use shared::booking::DEFAULT_BUDGET;
use shared::clients::{Needs, NewClient, Role};
use shared::error::Error;

/// Refusals counted after the first of each kind.
const COUNTED: u64 = 200;

pub async fn run(bench: &Bench, timing: Timing, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    caps(bench, timing, emit).await?;
    refusals(bench, emit).await
}

/// Clients at the default cap, taking turns so that none reaches it,
/// against as many clients with no cap taking turns the same way: the same
/// holds, the cap's allowance added (and the bench client alone, for what
/// the turns themselves cost). Each case ends with the most seats one
/// capped client held.
async fn caps(bench: &Bench, timing: Timing, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    let envs = bench.envs(8).await?;
    for (scenario, slots) in [
        ("fair_use.hold_cap.one_slot", 1),
        ("fair_use.hold_cap.spread_1000", 1_000),
    ] {
        for clients in [1, 8] {
            let arms = [
                Variant::Service,
                Variant::ServiceUncapped,
                Variant::ServiceCapped,
            ]
            .into_iter()
            .map(|variant| Arm {
                scenario: scenario.to_string(),
                name: variant.name(),
                preload: Preload::Active(0),
                variant,
                quantity: 1,
            })
            .collect();
            let case = HoldCase {
                clients,
                slots,
                capacity: ROOMY,
                arms,
            };
            // Its target within a few per cent of what it judges.
            compare_holds(bench, &envs, timing.close(), case, emit).await?;
            let (most, at): (i64, u32) = sqlx::query_as(
                "SELECT CAST(COALESCE(MAX(seats), 0) AS SIGNED), \
                 (SELECT CAST(COUNT(*) AS UNSIGNED) FROM api_clients WHERE name LIKE 'bench-capped-%') \
                 FROM (SELECT SUM(h.quantity) AS seats FROM holds h JOIN api_clients c ON c.id = h.client_id \
                 WHERE c.name LIKE 'bench-capped-%' AND h.status = 'held' \
                 AND h.expires_at > UTC_TIMESTAMP(6) GROUP BY h.client_id) per_client",
            )
            .fetch_one(&bench.admin)
            .await
            .map_err(|e| e.to_string())?;
            emit(Row::info(
                scenario,
                &format!("capped_clients@{clients}"),
                json!({
                    "capped_clients": at,
                    "expected_clients": CAPPED_CLIENTS,
                    "cap": shared::config::DEFAULT_CLIENT_MAX_HELD_SEATS,
                    "most_seats_one_client_held": most,
                }),
            ));
        }
    }
    Ok(())
}

/// Redis's `total_commands_processed`: an `INFO` is counted once it has
/// answered, so the next reading includes it.
async fn cache_commands(redis: &mut redis::aio::ConnectionManager) -> Result<u64, String> {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(redis)
        .await
        .map_err(|e| e.to_string())?;
    info.lines()
        .find_map(|line| line.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| "INFO stats without total_commands_processed".into())
}

/// The server's `Questions`, every session's statements: a `SHOW STATUS`
/// counts itself.
async fn statements(bench: &Bench) -> Result<u64, String> {
    let (_, value): (String, String) = sqlx::query_as("SHOW GLOBAL STATUS LIKE 'Questions'")
        .fetch_one(&bench.admin)
        .await
        .map_err(|e| e.to_string())?;
    value.parse().map_err(|_| format!("Questions = {value}"))
}

/// A 429 on a warm environment, and an unknown key refused again within
/// 10 s: the first refusal of each makes its round trip, the next
/// [`COUNTED`] none. Counted by Redis and by MariaDB for the whole server
/// (nothing else runs meanwhile), the counting reads themselves taken off.
async fn refusals(bench: &Bench, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    let (_, limited) = bench
        .client(NewClient {
            name: "bench-limited".into(),
            role: Role::Booker,
            rate_limit_per_second: Some(1),
            max_held_seats: Some(0),
        })
        .await?;
    let env = bench.envs(1).await?.remove(0);
    let admit = |bearer: &str| {
        let deadline = tokio::time::Instant::now() + DEFAULT_BUDGET;
        let gate = env.app.gate.clone();
        let bearer = bearer.to_string();
        async move { gate.admit(Some(&bearer), Needs::Booker, deadline).await }
    };
    // Its burst (twice its rate) spent, until a refusal; then, its
    // Retry-After passed, one token back: admitted once more, so that the
    // next refusal is a first one, with its round trip.
    for n in 0.. {
        match admit(&limited).await {
            Ok(_) if n < 100 => {}
            Ok(_) => return Err("a client with a rate of 1/s admitted 100 times".into()),
            Err(Error::RateLimited { .. }) => break,
            Err(err) => return Err(err.to_string()),
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    admit(&limited)
        .await
        .map_err(|e| format!("after its Retry-After: {e}"))?;
    let mut redis = bench.redis().await?;
    let counted = |first: u64, then: u64| json!({"first_refusal": first, "counted_refusals": COUNTED, "round_trips": then});

    let before = cache_commands(&mut redis).await?;
    let first = admit(&limited).await;
    let middle = cache_commands(&mut redis).await?;
    for _ in 0..COUNTED {
        let again = admit(&limited).await;
        if !matches!(again, Err(Error::RateLimited { .. })) {
            return Err(format!("expected a 429, got {again:?}"));
        }
    }
    let after = cache_commands(&mut redis).await?;
    if !matches!(first, Err(Error::RateLimited { .. })) {
        return Err(format!("expected a 429, got {first:?}"));
    }
    emit(Row::info(
        "fair_use.refusals",
        "rate_limited_429.cache_commands",
        counted(middle - before - 1, after - middle - 1),
    ));

    let unknown = "Bearer sb_the_bench_made_no_client_with_this_key_0000";
    let before = statements(bench).await?;
    let first = admit(unknown).await;
    let middle = statements(bench).await?;
    for _ in 0..COUNTED {
        let again = admit(unknown).await;
        if !matches!(again, Err(Error::Unauthenticated(_))) {
            return Err(format!("expected a 401, got {again:?}"));
        }
    }
    let after = statements(bench).await?;
    if !matches!(first, Err(Error::Unauthenticated(_))) {
        return Err(format!("expected a 401, got {first:?}"));
    }
    emit(Row::info(
        "fair_use.refusals",
        "unknown_key_401.database_statements",
        counted(middle - before - 1, after - middle - 1),
    ));
    Ok(())
}
