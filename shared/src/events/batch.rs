//! The publisher's PutEvents batches: consecutive events in feed order,
//! cut so that a batch never holds two events of one hold (or of one
//! slot, for the slots' own events).
//!
//! Why the cut: EventBridge does not promise that the entries of one
//! PutEvents call are delivered in the order they were sent, and a call
//! can fail some entries and deliver the others. A hold's next event is
//! therefore only sent once every earlier one was accepted: it waits for
//! the next batch, which is sent after this one has been accepted whole.

use super::feed::Event;
use std::collections::HashSet;

/// At most this many entries per PutEvents call (the API's limit).
pub const BATCH_ENTRIES: usize = 10;
/// PutEvents refuses a request whose entries add up to 256 KB or more,
/// counted as EventBridge counts them (the `Time` field as 14 bytes, the
/// UTF-8 lengths of `Source`, `DetailType` and `Detail`).
pub const BATCH_BYTES: usize = 256 * 1024;
/// `Source` of every entry.
pub const SOURCE: &str = "slot-booking";

/// What a batch may not hold twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrderKey {
    Hold(u64),
    /// A slot's own event (`slot.*`, no hold).
    Slot(u64),
}

/// One event ready to send: its place in the feed, its order key and the
/// entry's `Detail`, the event as the API serves it (with its `id`, which
/// consumers de-duplicate by: delivery is at least once).
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub seq: u64,
    pub key: OrderKey,
    pub event: Event,
    pub detail: String,
}

impl Outgoing {
    pub fn new(event: Event, hold_id: Option<u64>, slot_id: u64) -> Result<Self, String> {
        let detail = serde_json::to_string(&event)
            .map_err(|err| format!("event {} cannot be serialised: {err}", event.id))?;
        let key = hold_id.map_or(OrderKey::Slot(slot_id), OrderKey::Hold);
        Ok(Self {
            seq: event.seq,
            key,
            event,
            detail,
        })
    }

    /// The entry's size as PutEvents counts it.
    pub fn size(&self) -> usize {
        14 + SOURCE.len() + self.event.kind.len() + self.detail.len()
    }
}

/// Splits `events` (in feed order) into consecutive batches of at most
/// [`BATCH_ENTRIES`] entries and under [`BATCH_BYTES`], none with two
/// entries of one [`OrderKey`]. Every batch has at least one entry: one
/// too large for any request goes alone (and is refused by EventBridge,
/// which stops the feed there, loudly, rather than skip it).
pub fn batches(events: Vec<Outgoing>) -> Vec<Vec<Outgoing>> {
    let mut batches: Vec<Vec<Outgoing>> = Vec::new();
    let mut current: Vec<Outgoing> = Vec::new();
    let mut keys: HashSet<OrderKey> = HashSet::new();
    let mut bytes = 0;
    for event in events {
        let full = current.len() >= BATCH_ENTRIES
            || bytes + event.size() >= BATCH_BYTES
            || keys.contains(&event.key);
        if full && !current.is_empty() {
            batches.push(std::mem::take(&mut current));
            keys.clear();
            bytes = 0;
        }
        keys.insert(event.key);
        bytes += event.size();
        current.push(event);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn outgoing(seq: u64, hold: Option<u64>, slot: u64, padding: usize) -> Outgoing {
        let event = Event {
            id: seq + 100,
            kind: "hold.created".into(),
            occurred_at: Utc::now(),
            data: serde_json::json!({ "padding": "x".repeat(padding) }),
            from_slot_id: None,
            seq,
        };
        Outgoing::new(event, hold, slot).expect("serialisable")
    }

    fn seqs(batches: &[Vec<Outgoing>]) -> Vec<Vec<u64>> {
        batches
            .iter()
            .map(|batch| batch.iter().map(|e| e.seq).collect())
            .collect()
    }

    #[test]
    fn at_most_ten_entries_in_feed_order() {
        let events = (1..=23).map(|seq| outgoing(seq, Some(seq), 1, 0)).collect();
        let got = batches(events);
        assert_eq!(got.iter().map(Vec::len).collect::<Vec<_>>(), [10, 10, 3]);
        let flat: Vec<u64> = seqs(&got).concat();
        assert_eq!(flat, (1..=23).collect::<Vec<_>>());
    }

    #[test]
    fn a_second_event_of_one_hold_starts_a_new_batch() {
        // Holds 7, 8, 7 (cut), 9, slot 3's own event, 8 (cut), slot 3 (cut).
        let events = vec![
            outgoing(1, Some(7), 3, 0),
            outgoing(2, Some(8), 3, 0),
            outgoing(3, Some(7), 3, 0),
            outgoing(4, Some(9), 3, 0),
            outgoing(5, None, 3, 0),
            outgoing(6, Some(8), 3, 0),
            outgoing(7, None, 3, 0),
        ];
        assert_eq!(
            seqs(&batches(events)),
            vec![vec![1, 2], vec![3, 4, 5, 6], vec![7]]
        );
    }

    #[test]
    fn batches_stay_under_256_kb() {
        let events: Vec<Outgoing> = (1..=5)
            .map(|seq| outgoing(seq, Some(seq), 1, 100 * 1024))
            .collect();
        let got = batches(events);
        assert_eq!(seqs(&got), vec![vec![1, 2], vec![3, 4], vec![5]]);
        for batch in &got {
            assert!(batch.iter().map(Outgoing::size).sum::<usize>() < BATCH_BYTES);
        }
        // One entry too large for any request still goes, alone.
        let huge = batches(vec![outgoing(1, Some(1), 1, 300 * 1024)]);
        assert_eq!(seqs(&huge), vec![vec![1]]);
        assert!(batches(Vec::new()).is_empty());
    }
}
