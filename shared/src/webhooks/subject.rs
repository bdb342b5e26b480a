//! What an event is about (SPEC §20): the subject its delivery is ordered
//! within.

use crate::events::Event;

/// The subject an event's delivery is ordered within: `hold:<id>` for
/// `hold.*`, `entry:<id>` for `waitlist.*` (the entry's own id, in its
/// `data`: a waitlist event's `hold_id` is the offered hold's), `slot:<id>`
/// for `slot.*`, `basket:<id>` for `basket.*` (SPEC §21). Every event's
/// `data` is the resource after the change, whose `id` is the subject's.
/// `None`: a type no subject is known for (never written today): its
/// delivery goes in a subject of its own, the event.
pub fn subject(event: &Event) -> String {
    let prefix = match event.kind.split('.').next() {
        Some("hold") => "hold",
        Some("waitlist") => "entry",
        Some("slot") => "slot",
        Some("basket") => "basket",
        _ => return format!("event:{}", event.id),
    };
    match &event.data["id"] {
        serde_json::Value::Number(id) => format!("{prefix}:{id}"),
        serde_json::Value::String(id) => format!("{prefix}:{id}"),
        _ => format!("event:{}", event.id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use serde_json::json;

    fn event(kind: &str, data: serde_json::Value) -> Event {
        Event {
            id: 99,
            kind: kind.into(),
            occurred_at: Utc::now(),
            data,
            from_slot_id: None,
            seq: 1,
        }
    }

    #[test]
    fn each_family_has_its_subject() {
        let hold = json!({"id": 12, "slot_id": 7});
        assert_eq!(subject(&event("hold.created", hold.clone())), "hold:12");
        assert_eq!(subject(&event("hold.moved", hold)), "hold:12");
        let entry = json!({"id": 3, "slot_id": 7, "hold_id": 12});
        assert_eq!(subject(&event("waitlist.offered", entry)), "entry:3");
        assert_eq!(subject(&event("slot.updated", json!({"id": 7}))), "slot:7");
        assert_eq!(
            subject(&event("basket.created", json!({"id": "9"}))),
            "basket:9"
        );
        assert_eq!(subject(&event("other.thing", json!({"id": 1}))), "event:99");
    }
}
