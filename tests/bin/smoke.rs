//! `make smoke API_URL=… API_KEY=…`: every route of openapi.yaml once,
//! against any running stack (a deploy, `make dev`, `make sam-local`), with
//! an admin key. It makes its own slot far in the future and a throw-away
//! client, and removes both again (also after a failure), so it is safe
//! against a real stack. One line per step; exits 1 on the first failed
//! step, with the body it got, 2 on bad usage.

use reqwest::Method;
use serde_json::json;
use slot_booking_tests::smoke::{Api, Call, Check, Failure, Step, ensure};
use std::time::Instant;

/// What the smoke made, to be undone whatever happens.
#[derive(Default)]
struct Made {
    slot: Option<u64>,
    holds: Vec<u64>,
    client: Option<u64>,
    webhook: Option<u64>,
}

fn check<'c>(
    f: impl FnOnce(&slot_booking_tests::smoke::Answer) -> Result<(), String> + 'c,
) -> Check<'c> {
    Box::new(f)
}

fn none<'c>() -> Check<'c> {
    check(|_| Ok(()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let base = args.next().or_else(|| std::env::var("API_URL").ok());
    let key = args.next().or_else(|| std::env::var("API_KEY").ok());
    let (Some(base), Some(key)) = (base, key) else {
        eprintln!("usage: smoke API_URL ADMIN_KEY (or API_URL and API_KEY in the environment)");
        std::process::exit(2);
    };
    let api = Api::new(&base, &key);
    let started = Instant::now();
    let mut made = Made::default();
    let outcome = run(&api, &mut made).await;
    // Always: a failed step must not leave the slot or the client behind.
    let leftovers = clean_up(&api, &made).await;
    match outcome {
        Ok(steps) if leftovers.is_empty() => {
            println!(
                "smoke: PASSED, {steps} steps against {base} in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
        Ok(_) => {
            eprintln!("smoke: FAILED to clean up: {}", leftovers.join("; "));
            std::process::exit(1);
        }
        Err(Failure(why)) => {
            eprintln!("{why}");
            for left in &leftovers {
                eprintln!("smoke: could not clean up: {left}");
            }
            eprintln!("smoke: FAILED against {base}");
            std::process::exit(1);
        }
    }
}

/// The steps, in order; returns how many ran.
async fn run(api: &Api, made: &mut Made) -> Step<usize> {
    // Ten years ahead, to the second: no real booking's window, and a
    // window no other smoke run picks.
    let starts = chrono::Utc::now() + chrono::Duration::days(3650);
    let starts = starts.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let ends = (chrono::Utc::now() + chrono::Duration::days(3650) + chrono::Duration::hours(1))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let mut steps = 0;

    let created = api
        .send(
            Call::new(Method::POST, "/slots", "/slots")
                .json(json!({"starts_at": starts, "ends_at": ends, "capacity": 2})),
            201,
            check(|a| {
                ensure(
                    a.id() > 0 && a.body["capacity"] == 2 && a.body["remaining"] == 2,
                    "a slot of capacity 2, all remaining",
                )
            }),
        )
        .await?;
    let slot = created.id();
    made.slot = Some(slot);
    steps += 1;

    api.send(
        Call::new(Method::GET, "/slots/{id}", format!("/slots/{slot}")),
        200,
        check(move |a| {
            ensure(
                a.id() == slot
                    && a.body["confirmed"] == 0
                    && a.body["held"] == 0
                    && a.body["remaining"] == 2,
                "the slot just created, nothing held",
            )
        }),
    )
    .await?;
    steps += 1;

    // Its own window only: a stack's first page need not reach ten years.
    api.send(
        Call::new(Method::GET, "/slots/availability", "/slots/availability")
            .query("from", starts.clone())
            .query("to", ends.clone()),
        200,
        check(move |a| {
            let listed = a
                .body
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| s["slot_id"].as_u64() == Some(slot) && s["remaining"] == 2);
            ensure(listed, format!("slot {slot} listed with 2 remaining"))
        }),
    )
    .await?;
    steps += 1;

    let first_key = uuid::Uuid::new_v4().to_string();
    let hold_call = || {
        Call::new(
            Method::POST,
            "/slots/{id}/hold",
            format!("/slots/{slot}/hold"),
        )
        .header("idempotency-key", first_key.clone())
    };
    let held = api
        .send(
            hold_call(),
            201,
            check(move |a| {
                ensure(
                    a.id() > 0
                        && a.body["slot_id"].as_u64() == Some(slot)
                        && a.body["status"] == "held"
                        && a.body["quantity"] == 1
                        && a.body["active"] == true,
                    "an active hold of one seat on the slot",
                )
            }),
        )
        .await?;
    let hold = held.id();
    made.holds.push(hold);
    steps += 1;

    api.send(
        hold_call(),
        200,
        check(move |a| {
            ensure(
                a.id() == hold && a.header("idempotent-replayed") == Some("true"),
                "the same hold, Idempotent-Replayed: true",
            )
        }),
    )
    .await?;
    steps += 1;

    let same_hold = move |status: &'static str| {
        check(move |a| {
            ensure(
                a.id() == hold && a.body["status"] == status,
                format!("hold {hold}, {status}"),
            )
        })
    };
    api.send(
        Call::new(Method::GET, "/holds/{id}", format!("/holds/{hold}")),
        200,
        same_hold("held"),
    )
    .await?;
    api.send(
        Call::new(Method::GET, "/holds", "/holds").query("idempotency_key", first_key.clone()),
        200,
        same_hold("held"),
    )
    .await?;
    let expires = held.body["expires_at"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    api.send(
        Call::new(
            Method::POST,
            "/holds/{id}/extend",
            format!("/holds/{hold}/extend"),
        ),
        200,
        check(move |a| {
            // The same format throughout: text order is time order.
            let later = a.body["expires_at"]
                .as_str()
                .is_some_and(|e| *e >= *expires);
            ensure(a.id() == hold && later, "the hold, expiring no earlier")
        }),
    )
    .await?;
    // To the slot it is on: answered unchanged (a deployed stack's smoke
    // makes one slot; tests/moves.rs moves between two).
    api.send(
        Call::new(
            Method::POST,
            "/holds/{id}/move",
            format!("/holds/{hold}/move"),
        )
        .json(json!({ "slot_id": slot })),
        200,
        check(move |a| {
            ensure(
                a.id() == hold && a.body["slot_id"].as_u64() == Some(slot),
                "the hold, on its slot",
            )
        }),
    )
    .await?;
    api.send(
        Call::new(
            Method::POST,
            "/holds/{id}/confirm",
            format!("/holds/{hold}/confirm"),
        ),
        200,
        same_hold("confirmed"),
    )
    .await?;
    api.send(
        Call::new(Method::DELETE, "/holds/{id}", format!("/holds/{hold}")),
        200,
        same_hold("cancelled"),
    )
    .await?;
    steps += 6;

    let second = api
        .send(
            Call::new(
                Method::POST,
                "/slots/{id}/hold",
                format!("/slots/{slot}/hold"),
            )
            .header("idempotency-key", uuid::Uuid::new_v4().to_string())
            .json(json!({ "quantity": 2 })),
            201,
            check(|a| ensure(a.body["status"] == "held", "a second hold, of both seats")),
        )
        .await?;
    let second = second.id();
    made.holds.push(second);
    // The slot full: its waiting line (SPEC §18), joined, read, left.
    let entry = api
        .send(
            Call::new(
                Method::POST,
                "/slots/{id}/waitlist",
                format!("/slots/{slot}/waitlist"),
            )
            .header("idempotency-key", uuid::Uuid::new_v4().to_string()),
            201,
            check(|a| {
                ensure(
                    a.body["status"] == "waiting" && a.body["position"] == 1,
                    "an entry, first in line",
                )
            }),
        )
        .await?;
    let entry = entry.id();
    api.send(
        Call::new(Method::GET, "/waitlist/{id}", format!("/waitlist/{entry}")),
        200,
        check(move |a| ensure(a.id() == entry, format!("entry {entry}"))),
    )
    .await?;
    api.send(
        Call::new(
            Method::DELETE,
            "/waitlist/{id}",
            format!("/waitlist/{entry}"),
        ),
        200,
        check(move |a| {
            ensure(
                a.id() == entry && a.body["status"] == "left",
                format!("entry {entry}, left"),
            )
        }),
    )
    .await?;
    steps += 3;
    api.send(
        Call::new(Method::DELETE, "/holds/{id}", format!("/holds/{second}")),
        200,
        check(move |a| {
            ensure(
                a.id() == second && a.body["status"] == "cancelled",
                "the second hold, cancelled",
            )
        }),
    )
    .await?;
    steps += 2;

    api.send(
        Call::new(Method::PATCH, "/slots/{id}", format!("/slots/{slot}"))
            .json(json!({"capacity": 3})),
        200,
        check(move |a| {
            ensure(
                a.id() == slot && a.body["capacity"] == 3 && a.body["remaining"] == 3,
                "capacity 3, every seat given back",
            )
        }),
    )
    .await?;
    api.send(
        Call::new(Method::DELETE, "/slots/{id}", format!("/slots/{slot}")),
        200,
        check(move |a| ensure(a.id() == slot, format!("slot {slot}"))),
    )
    .await?;
    made.slot = None;
    made.holds.clear();
    api.send(
        Call::new(Method::GET, "/slots/{id}", format!("/slots/{slot}")),
        404,
        check(|a| ensure(a.body["reason"] == "not_found", "not_found once deleted")),
    )
    .await?;
    steps += 3;

    let name = format!("smoke-{}", uuid::Uuid::new_v4().simple());
    let client = api
        .send(
            Call::new(Method::POST, "/clients", "/clients")
                .json(json!({"name": name, "role": "booker"})),
            201,
            check(|a| {
                let key = a.body["key"].as_str().unwrap_or_default();
                ensure(
                    a.id() > 0 && key.starts_with("sb_") && a.body["role"] == "booker",
                    "a booker with its key",
                )
            }),
        )
        .await?;
    let client = client.id();
    made.client = Some(client);
    // Pages of up to 1,000, oldest first: the newest client is on the
    // last one, which has no `next` link.
    api.send(
        Call::new(Method::GET, "/clients", "/clients?limit=1000"),
        200,
        check(move |a| {
            let page = a.body.as_array().into_iter().flatten();
            let keyless = page.clone().all(|c| c.get("key").is_none());
            let listed = page.clone().any(|c| c["id"].as_u64() == Some(client));
            let last = a.header("link").is_none();
            ensure(
                keyless && (listed || !last),
                format!("client {client} listed, without its key"),
            )
        }),
    )
    .await?;
    api.send(
        Call::new(Method::PATCH, "/clients/{id}", format!("/clients/{client}"))
            .json(json!({"max_held_seats": 7, "rate_limit_per_second": null})),
        200,
        check(move |a| {
            ensure(
                a.id() == client
                    && a.body["max_held_seats"] == 7
                    && a.body["rate_limit_per_second"].is_null(),
                "the client, its limits changed",
            )
        }),
    )
    .await?;
    api.send(
        Call::new(
            Method::DELETE,
            "/clients/{id}",
            format!("/clients/{client}"),
        ),
        200,
        check(move |a| {
            ensure(
                a.id() == client && a.body["revoked_at"].is_string(),
                "the client, revoked",
            )
        }),
    )
    .await?;
    made.client = None;
    steps += 4;

    // The change feed: a page and the `next` it always links to (a real
    // stack's history may be long, so one event a page).
    let feed = api
        .send(
            Call::new(Method::GET, "/events", "/events").query("limit", "1"),
            200,
            check(|a| {
                let next = a.header("link").unwrap_or_default();
                ensure(
                    a.body.as_array().is_some_and(|page| page.len() <= 1)
                        && next.starts_with('<')
                        && next.contains(">; rel=\"next\", <")
                        && next.ends_with(">; rel=\"last\""),
                    "at most one event, a next link and the head's",
                )
            }),
        )
        .await?;
    let next = feed.header("link").unwrap_or_default();
    let after = next
        .split("after=")
        .nth(1)
        .and_then(|rest| rest.split(['&', '>']).next())
        .unwrap_or_default()
        .to_string();
    api.send(
        Call::new(Method::GET, "/events", "/events")
            .query("after", after)
            .query("limit", "1"),
        200,
        check(|a| {
            ensure(
                a.body.is_array() && a.header("link").is_some(),
                "the next page",
            )
        }),
    )
    .await?;
    steps += 2;

    steps += slot_booking_tests::smoke_webhooks::steps(api, &mut made.webhook).await?;

    // The pages: the console, the reference and the contract.
    for (label, path, media_type, holds) in [
        ("/console", "/console", "text/html", "/console/main.js"),
        (
            "/console/{name}",
            "/console/main.js",
            "text/javascript",
            "import",
        ),
        ("/docs", "/docs", "text/html", "/docs/redoc.standalone.js"),
        (
            "/docs/{name}",
            "/docs/docs.js",
            "text/javascript",
            "Redoc.init",
        ),
        (
            "/openapi.yaml",
            "/openapi.yaml",
            "application/yaml",
            "openapi: 3.1",
        ),
    ] {
        api.page(label, path, media_type, holds).await?;
    }
    steps += 5;

    api.send(
        Call::new(Method::GET, "$default", "/smoke/no-such-route"),
        404,
        check(|a| {
            ensure(
                a.body["reason"] == "not_found" && a.body["message"].is_string(),
                "the API's JSON 404",
            )
        }),
    )
    .await?;
    // A known path's other method: API Gateway's `$default` route too, 405
    // with the path's methods (SPEC §19.8).
    api.send(
        Call::new(Method::PUT, "$default", "/slots/availability"),
        405,
        check(|a| {
            ensure(
                a.body["reason"] == "method_not_allowed" && a.header("allow") == Some("GET"),
                "405 method_not_allowed with Allow: GET",
            )
        }),
    )
    .await?;
    Ok(steps + 2)
}

/// Undoes what a failed run left: its holds cancelled, its slot deleted,
/// its client revoked. Returns what could not be undone.
async fn clean_up(api: &Api, made: &Made) -> Vec<String> {
    // Holds first: a slot with a live hold cannot be deleted.
    let undo = made
        .holds
        .iter()
        .map(|hold| ("/holds/{id} (clean-up)", format!("/holds/{hold}")))
        .chain(
            made.slot
                .map(|slot| ("/slots/{id} (clean-up)", format!("/slots/{slot}"))),
        )
        .chain(
            made.client
                .map(|client| ("/clients/{id} (clean-up)", format!("/clients/{client}"))),
        )
        .chain(
            made.webhook
                .map(|id| ("/webhooks/{id} (clean-up)", format!("/webhooks/{id}"))),
        );
    let mut left = Vec::new();
    for (route, path) in undo {
        let call = Call::new(Method::DELETE, route, path);
        if let Err(Failure(why)) = api.send(call, 200, none()).await {
            left.push(why);
        }
    }
    left
}
