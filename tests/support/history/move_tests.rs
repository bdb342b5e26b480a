//! The checker on hand-made histories of a move (SPEC §17), two slots of
//! one seat each: the seat goes with the hold, never onto a full slot and
//! never left behind. Times in ms.

use super::tests::{FOREVER, call, hold};
use super::{Request, Response, check};
use std::collections::BTreeMap;

fn on(slot: u64, status: u16, id: u64, key: &str, hold_status: &str) -> Response {
    Response::hold(status, id, slot, key, hold_status)
}

fn two_slots() -> BTreeMap<u64, u32> {
    BTreeMap::from([(1, 1), (2, 1)])
}

/// A hold moved from slot 1 to slot 2 (SPEC §17) frees 1 and fills 2; its
/// key's replay on slot 1 is then a key used for another slot, on slot 2
/// the hold.
#[test]
fn a_move_takes_the_holds_seat_with_it() {
    let history = [
        call(0, (0, 10), hold(1, "k1"), on(1, 201, 7, "k1", "held")),
        call(
            0,
            (20, 30),
            Request::Move { hold: 7, to: 2 },
            on(2, 200, 7, "k1", "held"),
        ),
        call(1, (40, 50), hold(1, "k2"), on(1, 201, 8, "k2", "held")),
        call(
            1,
            (60, 70),
            hold(2, "k3"),
            Response::error(409, "capacity_exhausted"),
        ),
        call(
            2,
            (80, 90),
            hold(1, "k1"),
            Response::error(422, "idempotency_key_reuse"),
        ),
        call(2, (92, 98), hold(2, "k1"), on(2, 200, 7, "k1", "held")),
        call(
            0,
            (100, 110),
            Request::Move { hold: 7, to: 1 },
            Response::error(409, "capacity_exhausted"),
        ),
        call(
            0,
            (120, 130),
            Request::Move { hold: 7, to: 2 },
            on(2, 200, 7, "k1", "held"),
        ),
    ];
    let report = check(&history, &two_slots(), FOREVER);
    println!("{report}");
    assert!(report.linearizable(), "{report}");
    assert_eq!(report.slots, 1, "the move joins the two slots");
}

/// The oversell a broken move makes: its seat lands on a full slot.
#[test]
fn a_move_onto_a_full_slot_is_rejected() {
    let history = [
        call(0, (0, 10), hold(1, "k1"), on(1, 201, 7, "k1", "held")),
        call(1, (20, 30), hold(2, "k2"), on(2, 201, 8, "k2", "held")),
        call(
            0,
            (40, 50),
            Request::Move { hold: 7, to: 2 },
            on(2, 200, 7, "k1", "held"),
        ),
    ];
    let report = check(&history, &two_slots(), FOREVER);
    println!("{report}");
    assert!(!report.linearizable());
}

/// A move answered as done but whose seat stayed behind: the old slot
/// still refuses a hold it should have had room for.
#[test]
fn a_move_that_leaves_its_seat_behind_is_rejected() {
    let history = [
        call(0, (0, 10), hold(1, "k1"), on(1, 201, 7, "k1", "held")),
        call(
            0,
            (20, 30),
            Request::Move { hold: 7, to: 2 },
            on(2, 200, 7, "k1", "held"),
        ),
        call(
            1,
            (40, 50),
            hold(1, "k2"),
            Response::error(409, "capacity_exhausted"),
        ),
    ];
    let report = check(&history, &two_slots(), FOREVER);
    println!("{report}");
    assert!(!report.linearizable());
}

/// Concurrent moves and holds for one seat: whichever order explains the
/// answers is found.
#[test]
fn a_move_racing_a_hold_for_the_last_seat_is_accepted_either_way() {
    for move_won in [true, false] {
        let (moved, held) = if move_won {
            (
                on(2, 200, 7, "k1", "held"),
                Response::error(409, "capacity_exhausted"),
            )
        } else {
            (
                Response::error(409, "capacity_exhausted"),
                on(2, 201, 8, "k2", "held"),
            )
        };
        let history = [
            call(0, (0, 10), hold(1, "k1"), on(1, 201, 7, "k1", "held")),
            call(0, (20, 60), Request::Move { hold: 7, to: 2 }, moved),
            call(1, (30, 50), hold(2, "k2"), held),
        ];
        let report = check(&history, &two_slots(), FOREVER);
        assert!(report.linearizable(), "{report}");
    }
}
