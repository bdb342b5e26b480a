use super::*;

const S: Duration = Duration::from_secs(1);

fn health() -> Health<&'static str> {
    Health::new(S, 8 * S)
}

#[test]
fn the_first_contact_connects_then_uses_the_connection() {
    let mut h = health();
    let now = Instant::now();
    assert_eq!(h.route(now), Route::Connect);
    let epoch = h.install("c");
    assert_eq!(h.route(now), Route::Use("c", epoch));
}

#[test]
fn a_failure_skips_the_cache_then_one_probe_runs_while_requests_bypass() {
    let mut h = health();
    let now = Instant::now();
    let epoch = h.install("c");
    assert_eq!(h.failed(Some(epoch), now), Some(S));
    assert_eq!(h.route(now + S / 2), Route::Skip);
    assert_eq!(h.route(now + S), Route::Probe);
    assert_eq!(h.route(now + 2 * S), Route::Skip, "one probe at a time");
    let epoch = h.install("d");
    assert_eq!(h.route(now + 2 * S), Route::Use("d", epoch));
}

#[test]
fn the_window_doubles_while_the_cache_keeps_failing_up_to_the_cap() {
    let mut h = health();
    let mut now = Instant::now();
    assert_eq!(h.failed(None, now), Some(S));
    let mut windows = Vec::new();
    for _ in 0..6 {
        now += 100 * S;
        assert_eq!(h.route(now), Route::Probe);
        windows.push(h.probe_failed(false, now).unwrap());
    }
    assert_eq!(windows, [2 * S, 4 * S, 8 * S, 8 * S, 8 * S, 8 * S]);
}

#[test]
fn a_request_that_succeeds_resets_the_window_a_probe_alone_does_not() {
    let mut h = health();
    let now = Instant::now();
    h.failed(None, now);
    h.route(now + S);
    h.probe_failed(false, now + S);
    let epoch = h.install("c");
    // The probe answered, but a request fails again: longer still.
    assert_eq!(h.failed(Some(epoch), now), Some(4 * S));
    let epoch = h.install("d");
    h.succeeded(epoch);
    assert_eq!(h.failed(Some(epoch), now), Some(S));
}

#[test]
fn failures_on_a_connection_already_dropped_count_once() {
    let mut h = health();
    let now = Instant::now();
    let epoch = h.install("c");
    // Three requests in flight on the connection all time out.
    assert_eq!(h.failed(Some(epoch), now), Some(S));
    assert_eq!(h.failed(Some(epoch), now), None);
    assert_eq!(h.failed(Some(epoch), now), None);
    let newer = h.install("d");
    assert_eq!(h.failed(Some(epoch), now), None, "a late failure of c");
    assert_eq!(h.route(now), Route::Use("d", newer));
}

#[test]
fn an_invalidation_owed_survives_a_failed_probe() {
    let mut h = health();
    let now = Instant::now();
    h.failed(None, now);
    h.owe();
    h.route(now + S);
    let owed = h.take_owed();
    assert!(owed && !h.owed);
    h.probe_failed(owed, now + S);
    assert!(h.owed);
}

#[test]
fn one_failure_is_a_blip_and_a_failed_probe_after_it_an_outage() {
    let mut h = health();
    let now = Instant::now();
    let epoch = h.install("c");
    h.failed(Some(epoch), now);
    assert!(!h.failing(), "one timed-out command: INFO");
    h.probe_failed(false, now + S);
    assert!(h.failing(), "still failing a window later: WARN");
    let epoch = h.install("c");
    h.succeeded(epoch);
    assert!(!h.failing(), "a request answered: the count starts again");
}
