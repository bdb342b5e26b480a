//! What an event is about, and whether a subscription wants it (SPEC §20).

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

/// A subscription's `event_types`: `None` (NULL) every type; else exact
/// types and `prefix.*` patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeFilter(Option<Vec<String>>);

impl TypeFilter {
    /// From the column (a JSON list). A list that does not parse matches
    /// nothing: the API checks what it stores, and a delivery nobody asked
    /// for is worse than one missed from a row written by hand.
    pub fn from_column(column: Option<&str>) -> Self {
        match column {
            None => Self(None),
            Some(raw) => Self(Some(serde_json::from_str(raw).unwrap_or_default())),
        }
    }

    pub fn matches(&self, kind: &str) -> bool {
        let Some(patterns) = &self.0 else {
            return true;
        };
        patterns
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) if prefix.ends_with('.') => kind.starts_with(prefix),
                _ => pattern == kind,
            })
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

    #[test]
    fn types_and_prefixes_match_and_null_matches_all() {
        assert!(TypeFilter::from_column(None).matches("slot.created"));
        let filter = TypeFilter::from_column(Some(r#"["hold.*","slot.deleted"]"#));
        assert!(filter.matches("hold.created"));
        assert!(filter.matches("slot.deleted"));
        assert!(!filter.matches("slot.created"));
        assert!(!filter.matches("holding.x"));
        assert!(!TypeFilter::from_column(Some("nonsense")).matches("hold.created"));
    }
}
