//! A subscription's `event_types` (SPEC §20, §23.1): which events it
//! receives. A list of event types and `family.*` patterns; `None`: every
//! type. The types are the feed's (`EventType::ALL`), §21's `basket.*`
//! (named here until baskets write them) and `webhook.ping`, which is
//! never in the feed; a pattern's family is one of those types' prefixes.

use crate::events::EventType;
use serde_json::Value;

/// §21's basket events: webhooks take them before baskets exist, so that
/// a subscription made today receives them once they do.
pub const BASKET_TYPES: [&str; 5] = [
    "basket.created",
    "basket.confirmed",
    "basket.cancelled",
    "basket.extended",
    "basket.expired",
];
/// Sent by `POST /webhooks/{id}/ping` only (§23.1, §23.11).
pub const PING: &str = "webhook.ping";
/// The families a `family.*` pattern may name.
pub const FAMILIES: [&str; 5] = ["hold", "waitlist", "slot", "basket", "webhook"];
/// The most entries a list takes (a list of every type is 20).
pub const MAX_ENTRIES: usize = 50;

/// Whether `name` is an event type a subscription may ask for.
pub fn is_known(name: &str) -> bool {
    EventType::ALL.iter().any(|kind| kind.as_str() == name)
        || BASKET_TYPES.contains(&name)
        || name == PING
}

/// A validated `event_types`: each entry a known type or a known family's
/// `family.*`, in the order given, without repeats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTypes(Vec<String>);

impl EventTypes {
    /// `null` → `Ok(None)` (every type); a non-empty list of at most
    /// [`MAX_ENTRIES`] known types or patterns → the list; anything else
    /// → the message for the `event_types` field.
    pub fn from_json(value: &Value) -> Result<Option<Self>, String> {
        let list = match value {
            Value::Null => return Ok(None),
            Value::Array(list) => list,
            _ => return Err(MESSAGE_SHAPE.into()),
        };
        if list.is_empty() || list.len() > MAX_ENTRIES {
            return Err(MESSAGE_SHAPE.into());
        }
        let mut entries: Vec<String> = Vec::with_capacity(list.len());
        let mut unknown = Vec::new();
        for entry in list {
            let Value::String(name) = entry else {
                return Err(MESSAGE_SHAPE.into());
            };
            if !is_known(name) && !is_pattern(name) {
                unknown.push(crate::error::sent_name(name));
            } else if !entries.contains(name) {
                entries.push(name.clone());
            }
        }
        if !unknown.is_empty() {
            return Err(format!(
                "Unknown event types: {}. Each must be an event type (hold.created, …) or a \
                 family's pattern: {}.",
                unknown
                    .iter()
                    .map(|name| format!("{name:?}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                FAMILIES.map(|family| format!("{family}.*")).join(", ")
            ));
        }
        Ok(Some(Self(entries)))
    }

    /// As stored: its JSON list.
    pub fn to_column(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "[]".into())
    }

    /// The stored column back; `None` for what was not written by
    /// [`Self::to_column`].
    pub fn from_column(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok().map(Self)
    }

    pub fn entries(&self) -> &[String] {
        &self.0
    }

    /// Whether an event of type `kind` is one this list asks for.
    pub fn matches(&self, kind: &str) -> bool {
        self.0.iter().any(|entry| match entry.strip_suffix(".*") {
            Some(family) => kind
                .strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('.')),
            None => entry == kind,
        })
    }
}

/// `family.*` for a known family.
fn is_pattern(name: &str) -> bool {
    name.strip_suffix(".*")
        .is_some_and(|family| FAMILIES.contains(&family))
}

const MESSAGE_SHAPE: &str = "The event_types must be null (every type) or a list of 1 to 50 \
     event types (hold.created, …) and family patterns (hold.*).";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_and_family_patterns_are_taken_and_nothing_else() {
        assert_eq!(EventTypes::from_json(&json!(null)), Ok(None));
        let list = EventTypes::from_json(&json!(["hold.*", "slot.updated", "hold.*"]))
            .unwrap()
            .unwrap();
        assert_eq!(list.entries(), ["hold.*", "slot.updated"]);
        assert_eq!(
            EventTypes::from_column(&list.to_column()),
            Some(list.clone())
        );
        assert!(list.matches("hold.created") && list.matches("hold.moved"));
        assert!(list.matches("slot.updated") && !list.matches("slot.created"));
        assert!(!list.matches("holdings.x") && !list.matches("waitlist.joined"));
        for every in EventType::ALL.map(EventType::as_str) {
            assert!(EventTypes::from_json(&json!([every])).is_ok(), "{every}");
        }
        for ok in [
            "basket.expired",
            "webhook.ping",
            "waitlist.*",
            "basket.*",
            "webhook.*",
        ] {
            assert!(EventTypes::from_json(&json!([ok])).is_ok(), "{ok}");
        }
        for bad in [
            json!([]),
            json!("hold.*"),
            json!(["hold.created", 3]),
            json!(["hold.made"]),
            json!(["*"]),
            json!(["hold"]),
            json!(["hold.*.*"]),
            json!(["HOLD.created"]),
            json!(["entry.*"]),
            json!({"hold": true}),
            json!(vec!["hold.created"; 51]),
        ] {
            assert!(EventTypes::from_json(&bad).is_err(), "{bad}");
        }
        let message = EventTypes::from_json(&json!(["hold.made", "x.*"])).unwrap_err();
        assert!(message.contains("\"hold.made\", \"x.*\""), "{message}");
    }
}
