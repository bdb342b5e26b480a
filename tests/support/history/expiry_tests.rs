//! The checker on hand-made histories with times (SPEC §9): a hold
//! that expires frees its seat, an extension lands at its instant plus the
//! TTL, capped by the lifetime, and never revives an expired hold. A TTL of
//! 100 ms and a lifetime of 150 ms; times in ms.

use super::tests::{call, hold, short_lived, timed, verdict_under};
use super::{Request, Response};

fn confirm(id: u64) -> Request {
    Request::Confirm { hold: id }
}

fn extend(id: u64) -> Request {
    Request::Extend { hold: id }
}

#[test]
fn an_expired_hold_frees_its_seat_and_refuses_its_confirm() {
    let created = call(
        0,
        (0, 10),
        hold(1, "k1"),
        timed(201, 1, "k1", "held", (5, 105)),
    );
    let after = [
        created.clone(),
        call(
            1,
            (110, 120),
            hold(1, "k2"),
            timed(201, 2, "k2", "held", (115, 215)),
        ),
        call(
            0,
            (130, 140),
            confirm(1),
            Response::error(409, "hold_expired"),
        ),
    ];
    assert!(verdict_under(&after, 1, short_lived()).linearizable());
    // Before its expires_at, the seat is taken and the confirm succeeds.
    let before = [
        created.clone(),
        call(
            1,
            (50, 60),
            hold(1, "k2"),
            timed(201, 2, "k2", "held", (55, 155)),
        ),
    ];
    assert!(!verdict_under(&before, 1, short_lived()).linearizable());
    let refused_early = [
        created.clone(),
        call(
            0,
            (50, 60),
            confirm(1),
            Response::error(409, "hold_expired"),
        ),
    ];
    assert!(!verdict_under(&refused_early, 1, short_lived()).linearizable());
    // A confirm whose interval spans expires_at may land either side.
    let spanning = [
        created,
        call(
            0,
            (100, 110),
            confirm(1),
            timed(200, 1, "k1", "confirmed", (5, 105)),
        ),
    ];
    assert!(verdict_under(&spanning, 1, short_lived()).linearizable());
}

#[test]
fn an_extension_that_revives_an_expired_hold_is_rejected() {
    let history = [
        call(
            0,
            (0, 10),
            hold(1, "k1"),
            timed(201, 1, "k1", "held", (5, 105)),
        ),
        call(
            0,
            (120, 130),
            extend(1),
            timed(200, 1, "k1", "held", (5, 150)),
        ),
    ];
    let why = verdict_under(&history, 1, short_lived())
        .counterexample
        .expect("revived");
    assert!(why.contains("the model answers 409 hold_expired"), "{why}");
}

#[test]
fn an_extension_lands_at_its_instant_plus_the_ttl_capped_by_the_lifetime() {
    let created = call(
        0,
        (0, 10),
        hold(1, "k1"),
        timed(201, 1, "k1", "held", (5, 105)),
    );
    let extended = |span, to| call(0, span, extend(1), timed(200, 1, "k1", "held", (5, to)));
    let limited = |span| {
        call(
            0,
            span,
            extend(1),
            Response::error(409, "extension_limit_reached"),
        )
    };
    // At 30–40 ms: to 130–140 ms.
    let ok = [created.clone(), extended((30, 40), 135)];
    assert!(verdict_under(&ok, 1, short_lived()).linearizable());
    let outside = [created.clone(), extended((30, 40), 145)];
    assert!(!verdict_under(&outside, 1, short_lived()).linearizable());
    // At 60–70 ms the cap (155 ms) bites; then the limit is reached.
    let capped = [
        created.clone(),
        extended((60, 70), 155),
        limited((80, 90)),
        call(
            1,
            (95, 99),
            hold(1, "k1"),
            timed(200, 1, "k1", "held", (5, 155)),
        ),
    ];
    assert!(verdict_under(&capped, 1, short_lived()).linearizable());
    let past_cap = [created.clone(), extended((60, 70), 165)];
    assert!(!verdict_under(&past_cap, 1, short_lived()).linearizable());
    // Right after its creation an extension moves it later: no limit yet.
    let too_soon = [created, limited((30, 40))];
    assert!(!verdict_under(&too_soon, 1, short_lived()).linearizable());
}

#[test]
fn a_replay_must_show_the_latest_extension() {
    let history = [
        call(
            0,
            (0, 10),
            hold(1, "k1"),
            timed(201, 1, "k1", "held", (5, 105)),
        ),
        call(
            0,
            (30, 40),
            extend(1),
            timed(200, 1, "k1", "held", (5, 135)),
        ),
        call(
            1,
            (50, 60),
            hold(1, "k1"),
            timed(200, 1, "k1", "held", (5, 105)),
        ),
    ];
    assert!(!verdict_under(&history, 1, short_lived()).linearizable());
}
