//! Sections of `docs/BENCHMARKS.md` that a run of their group alone
//! (`--only cache_down`) updates in place, between markers, each saying
//! the commit it was measured at; a full run writes them with the rest.

use crate::cachedown;
use crate::prose::{facts_rows_and_targets, measured_at};
use crate::report::{Meta, Row};
use crate::table::table;
use crate::targets::Target;
use std::fmt::Write;

/// The groups whose section can be updated from a run of that group.
pub const IN_PLACE: &[&str] = &[
    "cache_down",
    "scale",
    "feed",
    "revision",
    "fair_use",
    "lifecycle",
    "hot",
    "sweep_history",
];

/// The section of `group`, markers included.
pub fn render(group: &str, meta: &Meta, rows: &[Row], targets: &[Target], full: bool) -> String {
    let (begin, end) = markers(group);
    let body = match group {
        "cache_down" => cache_down(meta, rows, targets, full),
        "scale" => scale(meta, rows, targets, full),
        "feed" => feed(meta, rows, targets, full),
        "revision" => revision(meta, rows, targets, full),
        "fair_use" => fair_use(meta, rows, targets, full),
        "lifecycle" => lifecycle(meta, rows, targets, full),
        "hot" => hot(meta, rows, targets, full),
        "sweep_history" => sweep_history(meta, rows, targets, full),
        _ => String::new(),
    };
    format!("{begin}\n{body}{end}\n")
}

/// `doc` with the section of `group` replaced by `section`, or with
/// `section` appended if the document has none yet.
pub fn replace(doc: &str, group: &str, section: &str) -> String {
    let (begin, end) = markers(group);
    match (doc.find(&begin), doc.find(&end)) {
        (Some(b), Some(e)) if b < e => {
            let after = (e + end.len()..doc.len())
                .find(|&i| doc.as_bytes().get(i) != Some(&b'\n'))
                .unwrap_or(doc.len());
            let rest = &doc[after..];
            format!(
                "{}{section}{}{rest}",
                &doc[..b],
                if rest.is_empty() { "" } else { "\n" }
            )
        }
        _ => format!("{}\n\n{section}", doc.trim_end()),
    }
}

fn markers(group: &str) -> (String, String) {
    (
        format!("<!-- section {group}: written by `--only {group}` or a full run -->"),
        format!("<!-- end of section {group} -->"),
    )
}

fn cache_down(meta: &Meta, rows: &[Row], targets: &[Target], full: bool) -> String {
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(w, "## A dead cache, fleet-wide\n");
    let _ = writeln!(w, "{}", measured_at("cache_down", meta, full));
    let _ = writeln!(
        w,
        "{} environments, each a `shared::App` as a function builds it (its own one-connection pool, \
         its own cache client with the production settings: 100 ms per connect and per command, no \
         retry, a skip window of 1 s doubling to 8 s), whose cache is *hanging* (a listener that \
         accepts and never answers) or *refused* (a closed port). The environments start cold and \
         keep their cache client through the four phases of a mode, so each crosses several skip \
         windows; *sequential* is one caller going round the environments, *parallel* one caller per \
         environment. Every call authenticates first, as a request does: the environment's gate \
         (the bench client's key, looked up once per environment; its rate limit asked of the same \
         dead cache, so unchecked). Reads are `availability_json` (served from the database: \
         *bypass*); writes are confirms and cancels of pre-made holds, alternating, each \
         invalidating the cache after commit. *cache_connects_per_env_so_far* counts the connections each environment tried to \
         open to the cache since the mode started (the first, then one background probe per window; \
         no request waits for a probe). Each phase alternates rounds with *.no_cache*: the same \
         service on the same connections with no cache at all (its gate too), what this machine's database alone \
         costs at that concurrency (the bench, MariaDB and other work share its cores).\n",
        cachedown::ENVS
    );
    table(
        w,
        rows.iter()
            .filter(|r| r.scenario.starts_with("cache_down.")),
    );
    let _ = writeln!(w, "\n| target | measured | result |\n|---|---|---|");
    for t in targets.iter().filter(|t| t.target.starts_with("cache ")) {
        let _ = writeln!(w, "| {} | {} | **{}** |", t.target, t.measured, t.verdict());
    }
    md
}

fn scale(meta: &Meta, rows: &[Row], targets: &[Target], full: bool) -> String {
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(w, "## At a million slots\n");
    let _ = writeln!(w, "{}", measured_at("scale", meta, full));
    let _ = writeln!(
        w,
        "A database of its own, filled by the server from its sequence tables: a year of hourly \
         windows of 115 docks (six months each side of now, ids in time order, as a batch job \
         creates them), each slot with 10 holds of history (6 confirmed, 2 cancelled, 2 expired \
         long ago), an active hold on one slot in 50 of those to come and a just-expired, still \
         counted one on one in 500. One environment (a `shared::App` as a function builds it), \
         each call admitted by the bench client's key first, as the route does. *page* is \
         `Slots::availability` for one page of 1,000 with `from`/`to` (a week from tomorrow, \
         about 19,000 slots), read over and over; *walk* follows `next` to the end, one row per \
         page; *no_parameters_hit* is the cached call as the route serves it (`availability_json` \
         with the rate limit in its round trip) against a raw `GET` of the same value, in \
         alternating rounds (*availability_hit.100_slots* is the same at today's size, 100 slots, \
         measured first, as the projection group does: the figure the hit is judged by); \
         *no_parameters_miss* recomputes the first page after an \
         invalidation; *get_slot* reads slots scattered over the table; *create_slots* is \
         `Slots::create` with 500 slots per call. *seed_list* is the seed's unbounded list (every \
         slot ever made, one response) at this size, for comparison; *index_migration* drops the \
         availability indexes and runs their migration again while a writer keeps updating and \
         inserting slots. Last, *from_1000_available_sold_out*: every slot sold out by its \
         counters (`remaining` = `held`, nothing expired still counted), then the first page of \
         `from=1000-01-01T00:00:00Z&available=true` (the route's default page of 100), over and \
         over: nothing to find, each page stops after the `AVAILABILITY_SCAN_LIMIT` slots it may \
         examine (10,000 by default) and answers an empty page with `next`.\n"
    );
    let scale_targets = [
        "availability, a page",
        "availability without parameters",
        "POST /slots",
        "GET /slots/{id}",
    ];
    facts_rows_and_targets(
        w,
        rows,
        &["scale."],
        targets
            .iter()
            .filter(|t| scale_targets.iter().any(|p| t.target.starts_with(p))),
    );
    md
}

fn feed(meta: &Meta, rows: &[Row], targets: &[Target], full: bool) -> String {
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(w, "## The change feed at 10 million events\n");
    let _ = writeln!(w, "{}", measured_at("feed", meta, full));
    let _ = writeln!(
        w,
        "A database of its own, filled by the server from its sequence tables: events numbered \
         as the sequencer numbers them, nine in ten a hold event of one of 50 clients, one in ten \
         a slot event, each with a hold resource of the API's size. `Feed::page` as `GET /events` \
         calls it, one environment (one connection) per client: *admin_page* is a page of 100 \
         from a scattered position, *booker_page* the same for one of the clients (its own holds' \
         events merged with every slot's), *tail* a poll at the head (nothing new). Each call is \
         the idle check for unnumbered events, then one snapshot: the feed's bounds and the page. \
         Before the fill, on the empty feed, *outbox.* measures what the outbox costs a booking, \
         in alternating rounds on twin slots, three times as long as the other groups: \
         *service* is a hold or confirm as the service makes it (auth on, one CALL that writes \
         the change and its event and commits), *raw* the locked sequence of statements, its \
         event included, and *raw_no_outbox* the same without the event. Judged (issue 32, \
         restating issue 14): the service against *raw*, both arms paying the event's row; \
         *raw* against *raw_no_outbox*, what the event itself costs, is in the ratios, not \
         judged. *raw_no_outbox_again* is the same SQL as *raw_no_outbox* in a fourth arm of \
         the same rounds, a control: its ratio to *raw_no_outbox* is what two identical arms \
         read apart.\n"
    );
    facts_rows_and_targets(
        w,
        rows,
        &["feed.", "outbox."],
        targets
            .iter()
            .filter(|t| t.target.starts_with("GET /events") || t.target.contains("the outbox")),
    );
    md
}

fn revision(meta: &Meta, rows: &[Row], targets: &[Target], full: bool) -> String {
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(w, "## What issue 28 costs the hot slot\n");
    let _ = writeln!(w, "{}", measured_at("revision", meta, full));
    let _ = writeln!(
        w,
        "The service's statements for a hold on one slot (every hold queues on its row lock) and \
         for confirm, one slot and spread over 1,000, today (*raw*) against those it sent before \
         issue 28 (*raw_before*: the claim and the consume stamped `slots.updated_at` without \
         `GREATEST`, and confirm's plain read decided \"expired\" with its own now), in \
         alternating rounds on twin slots, three times as long as the other groups. What the \
         service adds around them (the record of its change kept for a retry, one clone of the \
         hold) is in *service*/*raw* of the hold and confirm groups.\n"
    );
    facts_rows_and_targets(
        w,
        rows,
        &["revision."],
        targets
            .iter()
            .filter(|t| t.target.contains("before issue 28")),
    );
    md
}

fn fair_use(meta: &Meta, rows: &[Row], targets: &[Target], full: bool) -> String {
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(w, "## Fair use: the cap's cost, refusals' round trips\n");
    let _ = writeln!(w, "{}", measured_at("fair_use", meta, full));
    let _ = writeln!(
        w,
        "*fair_use.hold_cap*: holds on one slot (*one_slot*, every hold queues on its row lock) \
         and spread over 1,000 slots, 1 and 8 environments, in alternating rounds on twin slots: \
         *service_capped* by 256 bookers at the default cap (`CLIENT_MAX_HELD_SEATS`, 500 seats) \
         taking turns, so that consecutive holds are different clients' and none reaches its cap \
         (its *capped_clients* line says the most one held; a refused hold would be a cheaper \
         one), against *service_uncapped*, 256 bookers with no cap (`max_held_seats` 0) taking \
         turns the same way: the two differ in the cap alone. *service* is the bench client \
         alone, no cap: what the turns themselves cost (another client's rate-limit key and \
         index ranges on each hold). A capped hold claims its client's allowance first, in one \
         CALL with the slot's claim (`hold_claim_capped`): one row's write under the client's \
         lock, and a count of the client's active holds only when the bound would refuse; its \
         pre-check reads the allowance only for a client this environment refused at its cap \
         in the last minute (docs/DESIGN.md, \"One client's cap\"). One client's holds on many \
         slots at once queue on its row: that is what makes its cap exact, and it is not \
         measured here (one client's eight environments spread over 1,000 slots would \
         serialise). Before, against the bench client alone: the count of the client's active \
         holds under the locks ran at 0.63 to 0.72 (about 3 µs a counted hold, twice a hold, at \
         40 to 100 active holds per client); the allowance sent as a text packet, with a read \
         of it in every pre-check, at 0.78 to 0.88.\n\n\
         *fair_use.refusals*: a booker with a rate of 1/s, refused once with 429 on a warm \
         environment, then {COUNTED} times more within its `Retry-After`; a key no client has, \
         refused once with 401, then {COUNTED} times more within 10 s. *round_trips* is what the \
         server counted meanwhile — Redis's `total_commands_processed`, MariaDB's `Questions` for \
         the whole server (nothing else runs) — less the counting reads themselves; \
         *first_refusal* is the same count for the first refusal of each, which makes its round \
         trip: the count sees it.\n",
        COUNTED = 200
    );
    facts_rows_and_targets(
        w,
        rows,
        &["fair_use."],
        targets.iter().filter(|t| {
            [
                "hold with the per-client cap",
                "a 429 answered",
                "an unknown key refused",
            ]
            .iter()
            .any(|p| t.target.starts_with(p))
        }),
    );
    md
}

fn lifecycle(meta: &Meta, rows: &[Row], targets: &[Target], full: bool) -> String {
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(
        w,
        "## The lifecycle: a booking moved, a cancel that offers\n"
    );
    let _ = writeln!(w, "{}", measured_at("lifecycle", meta, full));
    let _ = writeln!(
        w,
        "*lifecycle.spread_1000*: 1,000 slots in pairs, 1 and 8 environments, in alternating \
         rounds on the same connections: *move_booking* moves a pre-made booking to the other \
         slot of its pair (`Booking::move_hold`: both slot rows locked, lower id first; the \
         hold row; one statement deciding expired, started and the share; the target's \
         `remaining` consumed iff its bookable seats cover it; the old slot's given back; the \
         hold's slot changed; its `hold.moved` event with the COMMIT), against *confirm* of a \
         pre-made hold (one slot row, the hold row, the consume, the mark, its event). Each is \
         a request as the service gets it, the gate first. Each pre-made row is used once. \
         *cancel_offer* cancels a pre-made hold on one of 1,000 full slots whose lines wait \
         for one seat each (SPEC §18: in the same transaction the seat the counter shows free \
         after the release goes to the first waiting entry: its hold made from the entry, \
         read, the entry marked, the counters, their events with the cancel's and the \
         COMMIT), against *cancel* of a pre-made hold on a slot without a line (before \
         sqlx 0.9.1 set TCP_NODELAY again, *cancel_offer* took 44 ms: a statement behind an \
         unanswered COM_STMT_CLOSE waited for the server's delayed ACK). \
         *hold_raw* is the service's hold sequence issued directly (`raw.rs`) on a slot \
         without a line, its claim guarded by `waiting = 0` by the primary key, against \
         *hold_raw_before_line*, the same sequence with the claim it had before the waiting \
         list.\n"
    );
    facts_rows_and_targets(
        w,
        rows,
        &["lifecycle."],
        targets.iter().filter(|t| {
            [
                "move of a booking",
                "cancel that offers",
                "hold on a slot without",
            ]
            .iter()
            .any(|p| t.target.starts_with(p))
        }),
    );
    md
}

fn hot(meta: &Meta, rows: &[Row], targets: &[Target], full: bool) -> String {
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(w, "## A hot slot at cloud latency\n");
    let _ = writeln!(w, "{}", measured_at("hot", meta, full));
    let _ = writeln!(
        w,
        "*{}*: holds on one slot, 8 and 32 environments, the service's hold (a request as \
         the service gets it, the gate first) against the raw statements of its sequence \
         (`raw.rs`), in alternating rounds on twin slots. *delay_0us* reaches the database \
         straight; *delay_500us* through a delay line (`bench/src/delay.rs`: a loopback proxy \
         that holds each chunk for half the delay in each direction, in order, a thread pair \
         per direction of each connection, so neither requests nor connections queue behind \
         each other's delay), as RDS Proxy adds 0.3–1 ms per round trip on AWS. \
         `added_round_trip_ms` is what the line added, measured (median of 200 `SELECT 1` \
         through it less the median straight; more than 0.5: each thread's sleep overshoots by \
         the kernel's timer slack). The service's hold is one CALL that claims, inserts, \
         writes its event and commits inside the server (`hold_place`, docs/DESIGN.md \
         \"One CALL under the lock\"): the lock is held for no round trip. The raw arm is \
         the previous design, the locked sequence the service still takes on its rare paths: \
         the lock held across the claim's answer, the INSERT, the read-back and the COMMIT, \
         so through the line its rate on one slot is about one over four added round trips, \
         whatever the environments. *{}*: confirms of pre-made holds on one slot, the same \
         arms, environments and delays (the service's one CALL, `hold_confirm`, against the \
         sequence that keeps the lock across its consume, its mark, its read-back and its \
         COMMIT). The last targets are what the change may not cost the rest: holds spread \
         over 1,000 slots (*hold.spread_1000*), the one CALL against the locked sequence; \
         and the cached hit (*{}*, a path the change does not touch) as a share of a raw \
         GET of the same value, the two called by turns on each environment (*paired*: \
         `service_per_get`, the GET's mean time over the hit's), against that share before \
         the change: this bench's `--only projection` at 3135a37, the commit before the \
         change's first, run twice alternating with twice at the commit that brought the \
         pairing, on the day of the full run (2026-12-05): before, 0.952 and 0.958 at 1 \
         environment, 0.950 and 0.950 at 8; after, 0.960 and 0.955, 0.965 and 0.965.\n",
        crate::hot::SCENARIO,
        crate::hot::CONFIRM,
        crate::reads::HIT_SCENARIO,
    );
    facts_rows_and_targets(
        w,
        rows,
        &["hot."],
        targets.iter().filter(|t| t.target.starts_with("hot slot")),
    );
    md
}

fn sweep_history(meta: &Meta, rows: &[Row], targets: &[Target], full: bool) -> String {
    use crate::history::{LONG, SCENARIO, SHORT};
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(
        w,
        "## A slot's long history and the sweeper
"
    );
    let _ = writeln!(w, "{}", measured_at("sweep_history", meta, full));
    let _ = writeln!(
        w,
        "*{SCENARIO}*: the sweeper's check of one slot (`Booking::check_one`: its lock, the \
         recount of what its counters count, its line, retention, the COMMIT) on a slot with \
         {SHORT} ended holds and on one with {LONG} (cancelled within the retention, or \
         expired before the watermark), each with the same 3 active holds, called by turns, \
         call by call, on one environment. `long_per_short` is the short history's mean time \
         over the long one's: 1.0, no difference. The check reads index ranges of what it \
         counts (active holds, bookings, the waiting line) and retention reads only the rows \
         it deletes (`holds.ended_at`), never the slot's history (docs/DESIGN.md, \
         \"Counters that heal\").\n"
    );
    facts_rows_and_targets(
        w,
        rows,
        &["sweep."],
        targets
            .iter()
            .filter(|t| t.target.starts_with("a sweep's check")),
    );
    md
}
