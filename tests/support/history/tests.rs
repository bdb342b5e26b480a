//! The checker on small hand-made histories: what it must accept and what
//! it must reject. Times are in milliseconds.

use super::{Call, Report, Request, Response, Rules, check};
use std::collections::BTreeMap;
use std::time::Duration;

/// Holds that outlive every hand-made history without times.
pub(super) const FOREVER: Rules = Rules {
    ttl: u64::MAX / 4,
    max_lifetime: u64::MAX / 4,
};

pub(super) fn call(client: usize, span: (u64, u64), request: Request, response: Response) -> Call {
    Call {
        client,
        invoked: span.0 * 1_000_000,
        completed: span.1 * 1_000_000,
        request,
        response,
    }
}

pub(super) fn hold(slot: u64, key: &str) -> Request {
    Request::Hold {
        slot,
        key: key.into(),
    }
}

pub(super) fn held(status: u16, id: u64, key: &str, hold_status: &str) -> Response {
    Response::hold(status, id, 1, key, hold_status)
}

fn one_slot(capacity: u32) -> BTreeMap<u64, u32> {
    BTreeMap::from([(1, capacity)])
}

pub(super) fn verdict(history: &[Call], capacity: u32) -> Report {
    verdict_under(history, capacity, FOREVER)
}

pub(super) fn verdict_under(history: &[Call], capacity: u32, rules: Rules) -> Report {
    let report = check(history, &one_slot(capacity), rules);
    println!("{report}");
    report
}

#[test]
fn a_sequential_history_that_follows_the_model_is_accepted() {
    let history = [
        call(0, (0, 10), hold(1, "k1"), held(201, 7, "k1", "held")),
        call(
            0,
            (20, 30),
            Request::Confirm { hold: 7 },
            held(200, 7, "k1", "confirmed"),
        ),
        call(
            1,
            (40, 50),
            hold(1, "k2"),
            Response::error(409, "capacity_exhausted"),
        ),
        call(
            0,
            (60, 70),
            Request::Cancel { hold: 7 },
            held(200, 7, "k1", "cancelled"),
        ),
        call(1, (80, 90), hold(1, "k2"), held(201, 8, "k2", "held")),
        call(
            2,
            (100, 110),
            hold(1, "k1"),
            held(200, 7, "k1", "cancelled"),
        ),
        call(
            2,
            (120, 130),
            Request::Confirm { hold: 7 },
            Response::error(409, "hold_cancelled"),
        ),
        call(
            2,
            (140, 150),
            Request::Cancel { hold: 7 },
            held(200, 7, "k1", "cancelled"),
        ),
    ];
    assert!(verdict(&history, 1).linearizable());
}

/// B's hold is invoked first but can only succeed after C's cancel freed
/// the seat, and D's refusal only before it: the checker must reorder.
#[test]
fn overlapping_calls_are_accepted_when_some_order_inside_their_intervals_fits() {
    let history = [
        call(0, (0, 10), hold(1, "k1"), held(201, 1, "k1", "held")),
        call(1, (20, 100), hold(1, "k2"), held(201, 2, "k2", "held")),
        call(
            3,
            (22, 35),
            hold(1, "k3"),
            Response::error(409, "capacity_exhausted"),
        ),
        call(
            2,
            (30, 40),
            Request::Cancel { hold: 1 },
            held(200, 1, "k1", "cancelled"),
        ),
    ];
    assert!(verdict(&history, 1).linearizable());
}

#[test]
fn two_holds_on_a_one_seat_slot_without_a_cancel_between_them_are_rejected() {
    let history = [
        call(0, (0, 10), hold(1, "k1"), held(201, 1, "k1", "held")),
        call(1, (5, 15), hold(1, "k2"), held(201, 2, "k2", "held")),
        call(
            0,
            (20, 30),
            Request::Cancel { hold: 1 },
            held(200, 1, "k1", "cancelled"),
        ),
    ];
    let report = verdict(&history, 1);
    let why = report.counterexample.expect("rejected");
    assert!(
        why.contains("the model answers 409 capacity_exhausted"),
        "{why}"
    );
}

#[test]
fn a_replay_that_misses_a_completed_confirm_is_a_stale_read_and_rejected() {
    let confirm = |span| {
        call(
            1,
            span,
            Request::Confirm { hold: 1 },
            held(200, 1, "k1", "confirmed"),
        )
    };
    let replay = |span| call(2, span, hold(1, "k1"), held(200, 1, "k1", "held"));
    let created = call(0, (0, 10), hold(1, "k1"), held(201, 1, "k1", "held"));
    let stale = [created.clone(), confirm((20, 30)), replay((40, 50))];
    let why = verdict(&stale, 2)
        .counterexample
        .expect("stale read rejected");
    assert!(why.contains("the model answers 200 confirmed"), "{why}");
    // The same answer from a replay that overlaps the confirm is fine.
    let overlapping = [created, confirm((20, 30)), replay((25, 50))];
    assert!(verdict(&overlapping, 2).linearizable());
}

#[test]
fn a_same_key_refusal_beside_its_keys_new_hold_is_rejected() {
    let history = [
        call(0, (0, 20), hold(1, "k1"), held(201, 1, "k1", "held")),
        call(
            1,
            (5, 25),
            hold(1, "k1"),
            Response::error(409, "capacity_exhausted"),
        ),
    ];
    assert!(!verdict(&history, 1).linearizable());
}

#[test]
fn a_confirm_refused_for_capacity_while_its_hold_is_held_is_rejected() {
    let history = [
        call(0, (0, 10), hold(1, "k1"), held(201, 1, "k1", "held")),
        call(
            0,
            (20, 30),
            Request::Confirm { hold: 1 },
            Response::error(409, "capacity_exhausted"),
        ),
    ];
    assert!(!verdict(&history, 3).linearizable());
}

#[test]
fn one_id_for_two_keys_or_two_ids_for_one_key_is_rejected() {
    let reused_id = [
        call(0, (0, 10), hold(1, "k1"), held(201, 1, "k1", "held")),
        call(1, (20, 30), hold(1, "k2"), held(201, 1, "k2", "held")),
    ];
    assert!(!verdict(&reused_id, 3).linearizable());
    let two_ids = [
        call(0, (0, 10), hold(1, "k1"), held(201, 1, "k1", "held")),
        call(1, (20, 30), hold(1, "k1"), held(200, 2, "k1", "held")),
    ];
    assert!(!verdict(&two_ids, 3).linearizable());
}

/// A 503 may have committed (a deadline that fired after COMMIT was sent):
/// it may take effect at any instant after its invocation, or never.
#[test]
fn a_503_may_or_may_not_have_taken_effect() {
    let unknown = call(
        0,
        (0, 10),
        hold(1, "k1"),
        Response::error(503, "service_unavailable"),
    );
    let took_effect = [
        unknown.clone(),
        call(
            1,
            (20, 30),
            hold(1, "k2"),
            Response::error(409, "capacity_exhausted"),
        ),
        call(0, (40, 50), hold(1, "k1"), held(200, 1, "k1", "held")),
    ];
    assert!(verdict(&took_effect, 1).linearizable());
    let did_not = [
        unknown.clone(),
        call(1, (20, 30), hold(1, "k2"), held(201, 2, "k2", "held")),
    ];
    assert!(verdict(&did_not, 1).linearizable());
    let both = [
        unknown,
        call(1, (20, 30), hold(1, "k2"), held(201, 2, "k2", "held")),
        call(0, (40, 50), hold(1, "k1"), held(200, 1, "k1", "held")),
    ];
    assert!(!verdict(&both, 1).linearizable(), "two seats taken on one");
}

#[test]
fn an_answer_outside_the_model_is_rejected() {
    let history = [call(
        0,
        (0, 10),
        hold(1, "k1"),
        Response::error(500, "internal_error"),
    )];
    assert!(!verdict(&history, 1).linearizable());
}

/// A TTL of 100 ms and a lifetime of 150 ms, as the timed tests below use.
pub(super) fn short_lived() -> Rules {
    Rules::new(Duration::from_millis(100), Duration::from_millis(150))
}

const MS: u64 = 1_000_000;

/// `status` with hold `id` of key `key`, created at `created` ms, expiring
/// at `expires` ms.
pub(super) fn timed(
    status: u16,
    id: u64,
    key: &str,
    hold_status: &str,
    at: (u64, u64),
) -> Response {
    held(status, id, key, hold_status).at(at.0 * MS, at.1 * MS)
}

/// A hold retried after its COMMIT's answer was lost finds its own hold:
/// it must answer 201, as the lost answer would have, not a replay's 200.
#[test]
fn a_keys_first_hold_answering_200_is_rejected() {
    let history = [call(0, (0, 10), hold(1, "k1"), held(200, 1, "k1", "held"))];
    assert!(!verdict(&history, 1).linearizable());
}
