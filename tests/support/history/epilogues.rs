//! What the history's workload is judged on, made at least once whatever
//! the dice said, and recorded with the rest: each on a slot of its own.

use super::Request;
use super::workload::{self, Shared};
use crate::new_key;
use serde_json::Value;
use shared::App;
use std::time::Duration;

/// The line's life, whatever the dice said, recorded with the rest, on
/// a slot of one seat: a join refused while the seat is free; a hold, a
/// join, the hold cancelled (the entry offered), the offer confirmed (the
/// entry fulfilled); a second join, the booking cancelled (the second
/// entry offered); a third join, the offer let expire, then a hold that
/// first offers its seat to the third entry (and is refused); that offer
/// moved to `elsewhere` (a free slot of one seat) and confirmed there, and
/// the first hold's key replayed.
pub async fn a_line_served(
    app: &App,
    shared: &Shared,
    (slot, elsewhere): (u64, u64),
    ttl: Duration,
) {
    let client = usize::MAX - 1;
    let call = |request| async move { workload::call(app, &shared.rec, client, &request).await };
    let hold = || Request::Hold {
        slot,
        key: new_key().to_string(),
    };
    let join = || Request::Join {
        slot,
        key: new_key().to_string(),
    };
    let id = |body: &Value, field: &str| body[field].as_u64().expect(field);
    assert_eq!(call(join()).await.0, 409, "the seat is free");
    let first_hold = hold();
    let (_, held) = call(first_hold.clone()).await;
    let (_, first) = call(join()).await;
    assert_eq!(first["position"], 1, "{first}");
    call(Request::Cancel {
        hold: id(&held, "id"),
    })
    .await;
    let first = id(&first, "id");
    let (_, offered) = call(Request::Entry { entry: first }).await;
    assert_eq!(offered["status"], "offered", "{offered}");
    let booking = id(&offered, "hold_id");
    call(Request::Confirm { hold: booking }).await;
    let (_, fulfilled) = call(Request::Entry { entry: first }).await;
    assert_eq!(fulfilled["status"], "fulfilled", "{fulfilled}");
    let (_, second) = call(join()).await;
    call(Request::Cancel { hold: booking }).await;
    let second = id(&second, "id");
    let (_, offered) = call(Request::Entry { entry: second }).await;
    let lapsing = id(&offered, "hold_id");
    call(Request::Read { hold: lapsing }).await;
    let (_, third) = call(join()).await;
    tokio::time::sleep(ttl + Duration::from_millis(50)).await;
    let (status, _) = call(hold()).await;
    assert_eq!(status, 409, "the third entry came first");
    let third = id(&third, "id");
    let (_, offered) = call(Request::Entry { entry: third }).await;
    assert_eq!(offered["status"], "offered", "{offered}");
    let last = id(&offered, "hold_id");
    call(Request::Read { hold: last }).await;
    let (_, ended) = call(Request::Entry { entry: second }).await;
    assert_eq!(ended["status"], "expired", "{ended}");
    let (status, moved) = call(Request::Move {
        hold: last,
        to: elsewhere,
    })
    .await;
    assert_eq!(status, 200, "{moved}");
    call(Request::Confirm { hold: last }).await;
    let (_, fulfilled) = call(Request::Entry { entry: third }).await;
    assert_eq!(fulfilled["status"], "fulfilled", "{fulfilled}");
    let (status, replayed) = call(first_hold).await;
    assert_eq!(status, 200, "{replayed}");
}

/// Every refusal the run is judged on, made at least once whatever the
/// dice said, and recorded with the rest: a hold on the epilogue's own
/// slot, extended to its cap, extended again (refused at the cap), let
/// expire, then confirmed and extended (both refused, expired).
pub async fn refusals_at_the_cap_and_after_expiry(
    app: &App,
    shared: &Shared,
    slot: u64,
    ttl: Duration,
    lifetime: Duration,
) {
    let client = usize::MAX;
    let hold = Request::Hold {
        slot,
        key: new_key().to_string(),
    };
    let (status, body) = workload::call(app, &shared.rec, client, &hold).await;
    assert_eq!(status, 201, "{body}");
    let hold = body["id"].as_u64().expect("the hold's id");
    // Past a quarter of the TTL, one extension reaches the cap.
    tokio::time::sleep(ttl / 3).await;
    for _ in 0..2 {
        workload::call(app, &shared.rec, client, &Request::Extend { hold }).await;
    }
    tokio::time::sleep(lifetime.saturating_sub(ttl / 3) + Duration::from_millis(50)).await;
    workload::call(app, &shared.rec, client, &Request::Confirm { hold }).await;
    workload::call(app, &shared.rec, client, &Request::Extend { hold }).await;
}
