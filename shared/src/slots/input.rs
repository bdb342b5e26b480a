//! The bodies of `POST /slots` and `PATCH /slots/{id}` (SPEC §10,
//! §15.9, §15.10), validated before any statement runs. Every problem is
//! reported at once, each under its field: `capacity`, `3.capacity` for
//! the fourth element of a batch (0-based), and `body` for the shape of
//! the body itself (not an object or an array, an empty or oversized
//! batch, an element that is not an object). An unknown field is reported
//! under its own name (`colour`, `3.colour`), as every other field.

use crate::domain::parse_instant;
use crate::error::{Error, FieldErrors, sent_name};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// The most slots one `POST /slots` may create.
pub const MAX_BATCH: usize = 500;
/// The largest capacity a slot may have.
pub const MAX_CAPACITY: u32 = 1_000_000;

const FIELDS: [&str; 4] = ["starts_at", "ends_at", "capacity", SHARE];
/// The per-slot share (SPEC §16): null (no limit) or 1 to the capacity.
const SHARE: &str = "max_seats_per_client";

/// One slot to create: `ends_at > starts_at`, capacity 1 to
/// [`MAX_CAPACITY`], times in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewSlot {
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub capacity: u32,
    /// `None`: no limit.
    pub max_seats_per_client: Option<u32>,
}

/// A `POST /slots` body: one object (answered with one slot) or an array
/// of 1 to [`MAX_BATCH`] (answered with an array, in the given order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewSlots {
    One(NewSlot),
    Many(Vec<NewSlot>),
}

impl NewSlots {
    pub fn from_json(body: &Value) -> Result<Self, Error> {
        match body {
            Value::Object(fields) => {
                let mut errors = FieldErrors::new();
                let slot = new_slot(fields, None, &mut errors);
                match slot {
                    Some(slot) if errors.is_empty() => Ok(Self::One(slot)),
                    _ => Err(Error::Validation(errors)),
                }
            }
            Value::Array(items) if items.is_empty() || items.len() > MAX_BATCH => {
                Err(Error::invalid(
                    "body",
                    format!("The body must be one slot or an array of 1 to {MAX_BATCH} slots."),
                ))
            }
            Value::Array(items) => {
                let mut errors = FieldErrors::new();
                let mut slots = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::Object(fields) => {
                            slots.extend(new_slot(fields, Some(i), &mut errors));
                        }
                        _ => fail(
                            &mut errors,
                            "body".into(),
                            format!("Element {i} of the array must be a JSON object."),
                        ),
                    }
                }
                if errors.is_empty() && slots.len() == items.len() {
                    Ok(Self::Many(slots))
                } else {
                    Err(Error::Validation(errors))
                }
            }
            _ => Err(Error::invalid(
                "body",
                "The body must be a JSON object or an array of them.",
            )),
        }
    }

    pub fn as_slice(&self) -> &[NewSlot] {
        match self {
            Self::One(slot) => std::slice::from_ref(slot),
            Self::Many(slots) => slots,
        }
    }
}

/// A `PATCH /slots/{id}` body: at least one of the three fields. When both
/// times are given their order is checked here; against the stored other
/// field it is checked under the slot's lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotChange {
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub capacity: Option<u32>,
    /// `Some(None)`: the limit removed.
    pub max_seats_per_client: Option<Option<u32>>,
}

impl SlotChange {
    pub fn from_json(body: &Value) -> Result<Self, Error> {
        let Some(fields) = body.as_object() else {
            return Err(Error::invalid("body", "The body must be a JSON object."));
        };
        if fields.is_empty() {
            return Err(Error::invalid(
                "body",
                "The body must change at least one of starts_at, ends_at, capacity and \
                 max_seats_per_client.",
            ));
        }
        let mut errors = FieldErrors::new();
        unknown_fields(fields, None, &mut errors);
        let starts_at = optional(fields, "starts_at", None, &mut errors, instant);
        let ends_at = optional(fields, "ends_at", None, &mut errors, instant);
        let capacity = optional(fields, "capacity", None, &mut errors, capacity);
        let max_seats_per_client = optional(fields, SHARE, None, &mut errors, share);
        if let (Some(starts_at), Some(ends_at)) = (starts_at, ends_at) {
            order(starts_at, ends_at, None, &mut errors);
        }
        if let (Some(capacity), Some(Some(share))) = (capacity, max_seats_per_client) {
            within_capacity(share, capacity, None, &mut errors);
        }
        if errors.is_empty() {
            Ok(Self {
                starts_at,
                ends_at,
                capacity,
                max_seats_per_client,
            })
        } else {
            Err(Error::Validation(errors))
        }
    }
}

/// The message for `ends_at` not after `starts_at`, also used under the
/// slot's lock when one of the two is the stored value.
pub fn order_message(ends_at_given: bool) -> (&'static str, &'static str) {
    if ends_at_given {
        ("ends_at", "The ends_at must be later than starts_at.")
    } else {
        (
            "starts_at",
            "The starts_at must be earlier than the slot's ends_at.",
        )
    }
}

fn new_slot(
    fields: &Map<String, Value>,
    index: Option<usize>,
    errors: &mut FieldErrors,
) -> Option<NewSlot> {
    unknown_fields(fields, index, errors);
    let starts_at = required(fields, "starts_at", index, errors, instant);
    let ends_at = required(fields, "ends_at", index, errors, instant);
    let capacity = required(fields, "capacity", index, errors, capacity);
    // Absent or null: no limit; a bad value is an error already.
    let max_seats_per_client = optional(fields, SHARE, index, errors, share).flatten();
    let (starts_at, ends_at, capacity) = (starts_at?, ends_at?, capacity?);
    if !order(starts_at, ends_at, index, errors) {
        return None;
    }
    if let Some(share) = max_seats_per_client
        && !within_capacity(share, capacity, index, errors)
    {
        return None;
    }
    Some(NewSlot {
        starts_at,
        ends_at,
        capacity,
        max_seats_per_client,
    })
}

/// A share no larger than the capacity, else an error under its field.
fn within_capacity(
    share: u32,
    capacity: u32,
    index: Option<usize>,
    errors: &mut FieldErrors,
) -> bool {
    if share <= capacity {
        return true;
    }
    fail(errors, name(index, SHARE), share_message(share, capacity));
    false
}

/// Also used under the slot's lock, against the stored capacity.
pub fn share_message(share: u32, capacity: u32) -> String {
    format!(
        "The max_seats_per_client ({share}) must not exceed the capacity ({capacity}); \
         change both together."
    )
}

/// `ends_at > starts_at`, else an error under `ends_at`.
fn order(
    starts_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
    index: Option<usize>,
    errors: &mut FieldErrors,
) -> bool {
    if ends_at > starts_at {
        return true;
    }
    let (field, message) = order_message(true);
    fail(errors, name(index, field), message.into());
    false
}

fn unknown_fields(fields: &Map<String, Value>, index: Option<usize>, errors: &mut FieldErrors) {
    for unknown in fields.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
        let unknown = sent_name(unknown);
        let message = match index {
            None => format!("The {unknown:?} field is not allowed."),
            Some(i) => format!("The {unknown:?} field of element {i} is not allowed."),
        };
        let key = match index {
            None => unknown,
            Some(i) => format!("{i}.{unknown}"),
        };
        fail(errors, key.into(), message);
    }
}

/// A field's parsed value; the parser says what is wrong as the end of a
/// sentence that starts with the field's name.
type Parse<T> = fn(&Value) -> Result<T, Cow<'static, str>>;

fn required<T>(
    fields: &Map<String, Value>,
    field: &'static str,
    index: Option<usize>,
    errors: &mut FieldErrors,
    parse: Parse<T>,
) -> Option<T> {
    if fields.get(field).is_none() {
        fail(
            errors,
            name(index, field),
            format!("The {field} field is required."),
        );
        return None;
    }
    optional(fields, field, index, errors, parse)
}

fn optional<T>(
    fields: &Map<String, Value>,
    field: &'static str,
    index: Option<usize>,
    errors: &mut FieldErrors,
    parse: Parse<T>,
) -> Option<T> {
    match parse(fields.get(field)?) {
        Ok(value) => Some(value),
        Err(why) => {
            fail(errors, name(index, field), format!("The {field} {why}."));
            None
        }
    }
}

fn instant(value: &Value) -> Result<DateTime<Utc>, Cow<'static, str>> {
    match value {
        Value::String(raw) => parse_instant(raw).map_err(Cow::Borrowed),
        _ => Err("must be a string holding an RFC 3339 time with an offset".into()),
    }
}

fn capacity(value: &Value) -> Result<u32, Cow<'static, str>> {
    value
        .as_u64()
        .filter(|n| (1..=u64::from(MAX_CAPACITY)).contains(n))
        .map(|n| n as u32)
        .ok_or_else(|| format!("must be an integer from 1 to {MAX_CAPACITY}").into())
}

/// `null` (no limit: `None`) or 1 to [`MAX_CAPACITY`].
fn share(value: &Value) -> Result<Option<u32>, Cow<'static, str>> {
    if value.is_null() {
        return Ok(None);
    }
    capacity(value)
        .map(Some)
        .map_err(|_| "must be null or an integer from 1 to the capacity".into())
}

/// `capacity`, or `3.capacity` inside a batch.
fn name(index: Option<usize>, field: &'static str) -> Cow<'static, str> {
    match index {
        None => Cow::Borrowed(field),
        Some(i) => Cow::Owned(format!("{i}.{field}")),
    }
}

fn fail(errors: &mut FieldErrors, field: Cow<'static, str>, message: String) {
    errors.entry(field).or_default().push(message);
}

#[cfg(test)]
mod tests;
