//! The checker on hand-made histories of a waiting line (SPEC §18), one
//! slot of one seat: offers first come first served, made by the calls
//! that must make them, and nobody jumping the line. Times in ms.

use super::tests::{call, held, hold, short_lived, timed, verdict, verdict_under};
use super::{Call, Request, Response};

fn join(key: &str) -> Request {
    Request::Join {
        slot: 1,
        key: key.into(),
    }
}

fn entry(id: u64, key: &str, status: &str) -> Response {
    Response::entry(200, id, 1, key, status)
}

fn waiting(code: u16, id: u64, key: &str, position: u32) -> Response {
    Response::entry(code, id, 1, key, "waiting").placed(position)
}

fn read(id: u64) -> Request {
    Request::Entry { entry: id }
}

/// k1 holds the seat; e1 then e2 join its line; k1 is cancelled.
fn a_line_of_two() -> Vec<Call> {
    vec![
        call(0, (0, 10), hold(1, "k1"), held(201, 1, "k1", "held")),
        call(1, (20, 30), join("e1"), waiting(201, 11, "e1", 1)),
        call(2, (40, 50), join("e2"), waiting(201, 12, "e2", 2)),
        call(
            0,
            (60, 70),
            Request::Cancel { hold: 1 },
            held(200, 1, "k1", "cancelled"),
        ),
    ]
}

#[test]
fn a_cancel_offers_the_first_waiting_entry_and_its_confirm_fulfils_it() {
    let mut history = a_line_of_two();
    history.extend([
        call(1, (80, 90), read(11), entry(11, "e1", "offered").offered(2)),
        call(2, (80, 90), read(12), waiting(200, 12, "e2", 1)),
        call(
            1,
            (100, 110),
            Request::Confirm { hold: 2 },
            held(200, 2, "o2", "confirmed"),
        ),
        call(
            1,
            (120, 130),
            read(11),
            entry(11, "e1", "fulfilled").offered(2),
        ),
        call(3, (140, 150), join("e3"), waiting(201, 13, "e3", 2)),
        call(
            2,
            (160, 170),
            Request::Leave { entry: 12 },
            entry(12, "e2", "left"),
        ),
        call(3, (180, 190), read(13), waiting(200, 13, "e3", 1)),
    ]);
    assert!(verdict(&history, 1).linearizable());
}

#[test]
fn an_offer_to_the_second_entry_while_the_first_waits_is_rejected() {
    let mut history = a_line_of_two();
    history.extend([
        call(1, (80, 90), read(11), waiting(200, 11, "e1", 1)),
        call(2, (80, 90), read(12), entry(12, "e2", "offered").offered(2)),
    ]);
    let why = verdict(&history, 1).counterexample.expect("rejected");
    assert!(why.contains("the model answers 200 entry offered"), "{why}");
}

#[test]
fn a_hold_that_takes_the_seat_a_waiting_entry_could_use_is_rejected() {
    let mut history = a_line_of_two();
    history.push(call(3, (80, 90), hold(1, "k2"), held(201, 3, "k2", "held")));
    let why = verdict(&history, 1).counterexample.expect("rejected");
    assert!(
        why.contains("the model answers 409 capacity_exhausted"),
        "{why}"
    );
    // Once the line is served, the next freed seat is anyone's.
    let mut history = a_line_of_two();
    history.extend([
        call(
            1,
            (80, 90),
            Request::Cancel { hold: 2 },
            held(200, 2, "o2", "cancelled"),
        ),
        call(
            2,
            (100, 110),
            Request::Cancel { hold: 3 },
            held(200, 3, "o3", "cancelled"),
        ),
        call(3, (120, 130), hold(1, "k2"), held(201, 4, "k2", "held")),
        call(
            1,
            (140, 150),
            read(11),
            entry(11, "e1", "expired").offered(2),
        ),
        call(
            2,
            (140, 150),
            read(12),
            entry(12, "e2", "expired").offered(3),
        ),
    ]);
    assert!(verdict(&history, 1).linearizable());
}

#[test]
fn positions_follow_the_order_the_joins_took_effect_in() {
    let overlapping = [
        call(0, (0, 10), hold(1, "k1"), held(201, 1, "k1", "held")),
        call(1, (20, 50), join("e1"), waiting(201, 11, "e1", 2)),
        call(2, (30, 40), join("e2"), waiting(201, 12, "e2", 1)),
    ];
    assert!(verdict(&overlapping, 1).linearizable());
    let both_first = [
        call(0, (0, 10), hold(1, "k1"), held(201, 1, "k1", "held")),
        call(1, (20, 50), join("e1"), waiting(201, 11, "e1", 1)),
        call(2, (30, 40), join("e2"), waiting(201, 12, "e2", 1)),
    ];
    assert!(!verdict(&both_first, 1).linearizable());
    let while_free = [call(1, (0, 10), join("e1"), waiting(201, 11, "e1", 1))];
    assert!(!verdict(&while_free, 1).linearizable());
    let refused = [call(
        1,
        (0, 10),
        join("e1"),
        Response::error(409, "seats_available"),
    )];
    assert!(verdict(&refused, 1).linearizable());
}

/// Holds of 100 ms: k1's expiry is offered to e1 by the next hold, which
/// is refused; the offer lapses in turn, and a read of e1 may then say
/// `offered` or `expired`, never before.
#[test]
fn an_expiry_is_offered_by_the_next_hold_and_a_lapsed_offer_may_read_either_way() {
    let rules = short_lived();
    let history = |late: &str, early: &str| {
        vec![
            call(
                0,
                (0, 10),
                hold(1, "k1"),
                timed(201, 1, "k1", "held", (5, 105)),
            ),
            call(1, (20, 30), join("e1"), waiting(201, 11, "e1", 1)),
            call(
                2,
                (120, 130),
                hold(1, "k2"),
                Response::error(409, "capacity_exhausted"),
            ),
            call(
                1,
                (140, 150),
                Request::Read { hold: 2 },
                timed(200, 2, "o2", "held", (125, 225)),
            ),
            call(1, (160, 170), read(11), entry(11, "e1", early).offered(2)),
            call(1, (240, 250), read(11), entry(11, "e1", late).offered(2)),
        ]
    };
    assert!(verdict_under(&history("offered", "offered"), 1, rules).linearizable());
    assert!(verdict_under(&history("expired", "offered"), 1, rules).linearizable());
    assert!(!verdict_under(&history("expired", "expired"), 1, rules).linearizable());
    // The hold that found the seat free took it from the line.
    let mut jumped = history("offered", "offered");
    jumped[2] = call(
        2,
        (120, 130),
        hold(1, "k2"),
        timed(201, 2, "k2", "held", (125, 225)),
    );
    jumped.truncate(3);
    assert!(!verdict_under(&jumped, 1, rules).linearizable());
}
