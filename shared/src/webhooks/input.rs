//! The bodies of `POST /webhooks` and `PATCH /webhooks/{id}`, validated:
//! every problem at once, each under its own field (SPEC §19.6). The URL's
//! host is resolved and checked after this, by the service (it needs the
//! network).

use super::address::{Rules, check_url};
use super::event_types::EventTypes;
use super::subscription::Status;
use crate::error::{Error, FieldErrors, sent_name};
use serde_json::{Map, Value};
use url::Url;

/// The longest description (`webhook_subscriptions.description`).
pub const MAX_DESCRIPTION: usize = 500;

/// A `POST /webhooks` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSubscription {
    pub url: Url,
    /// `None`: every type.
    pub event_types: Option<EventTypes>,
    pub description: String,
}

/// A `PATCH /webhooks/{id}` body: `None` leaves a field as it is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscriptionPatch {
    pub url: Option<Url>,
    /// `Some(None)`: every type from now on.
    pub event_types: Option<Option<EventTypes>>,
    pub description: Option<String>,
    pub status: Option<Status>,
}

const FIELDS: [&str; 4] = ["url", "event_types", "description", "status"];

impl NewSubscription {
    /// `{"url": "https://…", "event_types": [...] | null, "description":
    /// "…"}`: `url` required; `event_types` absent or null for every type;
    /// `description` up to 500 characters, empty when absent or null.
    pub fn from_json(body: &Value, rules: &Rules) -> Result<Self, Error> {
        let mut fields = Fields::of(body, &FIELDS[..3])?;
        let url = match fields.take("url") {
            None | Some(Value::Null) => {
                fields.fail("url", "The url field is required.".into());
                None
            }
            Some(value) => fields.url(value, rules),
        };
        let event_types = fields
            .take("event_types")
            .map_or(Some(None), |value| fields.event_types(value));
        let description = match fields.take("description") {
            None => Some(String::new()),
            Some(value) => fields.description(value),
        };
        match (url, event_types, description) {
            (Some(url), Some(event_types), Some(description)) if fields.errors.is_empty() => {
                Ok(Self {
                    url,
                    event_types,
                    description,
                })
            }
            _ => Err(Error::Validation(fields.errors)),
        }
    }
}

impl SubscriptionPatch {
    /// Any of `url`, `event_types` (null: every type), `description` and
    /// `status` (`enabled` or `disabled`); `{}` changes nothing.
    pub fn from_json(body: &Value, rules: &Rules) -> Result<Self, Error> {
        let mut fields = Fields::of(body, &FIELDS)?;
        let mut patch = Self::default();
        if let Some(value) = fields.take("url") {
            patch.url = fields.url(value, rules);
        }
        if let Some(value) = fields.take("event_types") {
            patch.event_types = fields.event_types(value);
        }
        if let Some(value) = fields.take("description") {
            patch.description = fields.description(value);
        }
        if let Some(value) = fields.take("status") {
            patch.status = match value.as_str() {
                Some("enabled") => Some(Status::Enabled),
                Some("disabled") => Some(Status::Disabled),
                _ => {
                    let message = "The status must be \"enabled\" or \"disabled\".";
                    fields.fail("status", message.into());
                    None
                }
            };
        }
        if fields.errors.is_empty() {
            Ok(patch)
        } else {
            Err(Error::Validation(fields.errors))
        }
    }
}

/// A body's fields and the errors found so far.
struct Fields {
    map: Map<String, Value>,
    errors: FieldErrors,
}

impl Fields {
    /// The body's object, with every field not in `known` already an error
    /// under its own name.
    fn of(body: &Value, known: &[&str]) -> Result<Self, Error> {
        let Some(map) = body.as_object() else {
            return Err(Error::invalid("body", "The body must be a JSON object."));
        };
        let mut errors = FieldErrors::new();
        for unknown in map.keys().filter(|k| !known.contains(&k.as_str())) {
            let name = sent_name(unknown);
            let message = format!(
                "The {name:?} field is not allowed; this body takes {}.",
                known.join(", ")
            );
            errors.entry(name.into()).or_default().push(message);
        }
        Ok(Self {
            map: map.clone(),
            errors,
        })
    }

    fn take(&mut self, field: &str) -> Option<Value> {
        self.map.remove(field)
    }

    fn fail(&mut self, field: &'static str, message: String) {
        self.errors.entry(field.into()).or_default().push(message);
    }

    fn url(&mut self, value: Value, rules: &Rules) -> Option<Url> {
        let Value::String(raw) = value else {
            self.fail("url", "The url must be a string.".into());
            return None;
        };
        check_url(&raw, rules)
            .map_err(|err| self.fail("url", err.to_string()))
            .ok()
    }

    fn event_types(&mut self, value: Value) -> Option<Option<EventTypes>> {
        EventTypes::from_json(&value)
            .map_err(|message| self.fail("event_types", message))
            .ok()
    }

    fn description(&mut self, value: Value) -> Option<String> {
        match value {
            Value::Null => Some(String::new()),
            Value::String(text)
                if text.chars().count() <= MAX_DESCRIPTION
                    && !text.chars().any(|c| c.is_control() && c != '\n') =>
            {
                Some(text)
            }
            _ => {
                let message = format!(
                    "The description must be a string of at most {MAX_DESCRIPTION} characters, \
                     without control characters but line breaks."
                );
                self.fail("description", message);
                None
            }
        }
    }
}

#[cfg(test)]
#[path = "input_tests.rs"]
mod tests;
