//! The subscription resource (SPEC §20) and its row.

use super::event_types::EventTypes;
use crate::domain::{ClientId, parse_path_id};
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct WebhookId(pub u64);

impl WebhookId {
    /// A path id; `None` (a 404) for what cannot name a row.
    pub fn parse(raw: &str) -> Option<Self> {
        parse_path_id(raw).map(Self)
    }
}

impl fmt::Display for WebhookId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Enabled,
    Disabled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enabled => "enabled",
            Self::Disabled => "disabled",
        }
    }
}

/// Why a subscription is disabled: `failing` and `gone` are the
/// deliveries' (SPEC §20), `by_client` a PATCH's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DisabledReason {
    Failing,
    Gone,
    ByClient,
}

impl DisabledReason {
    fn parse(raw: &str) -> Option<Self> {
        match raw {
            "failing" => Some(Self::Failing),
            "gone" => Some(Self::Gone),
            "by_client" => Some(Self::ByClient),
            _ => None,
        }
    }
}

/// The resource. `secret` is set only in the answers that create or
/// rotate it (and its `Debug` never shows it: [`super::WebhookSecret`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Subscription {
    pub id: WebhookId,
    pub client_id: ClientId,
    pub url: String,
    #[serde(serialize_with = "event_types")]
    pub event_types: Option<EventTypes>,
    pub description: String,
    pub status: Status,
    pub disabled_reason: Option<DisabledReason>,
    #[serde(serialize_with = "crate::domain::utc_micros")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::domain::utc_micros")]
    pub updated_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "shown")]
    pub secret: Option<super::WebhookSecret>,
}

fn event_types<S: Serializer>(types: &Option<EventTypes>, s: S) -> Result<S::Ok, S::Error> {
    match types {
        Some(types) => types.entries().serialize(s),
        None => s.serialize_none(),
    }
}

fn shown<S: Serializer>(secret: &Option<super::WebhookSecret>, s: S) -> Result<S::Ok, S::Error> {
    match secret {
        Some(secret) => s.serialize_str(&secret.expose()),
        None => s.serialize_none(),
    }
}

/// The resource's columns, in [`Row`]'s order.
macro_rules! subscription_columns {
    () => {
        "SELECT id, client_id, url, event_types, description, status, disabled_reason, \
         created_at, updated_at FROM webhook_subscriptions"
    };
}
pub(super) use subscription_columns;

pub(super) type Row = (
    u64,
    u64,
    String,
    Option<String>,
    String,
    String,
    Option<String>,
    DateTime<Utc>,
    DateTime<Utc>,
);

/// A row as the resource; a value no writer of ours stores is a 500.
pub(super) fn subscription(
    (id, client_id, url, event_types, description, status, reason, created_at, updated_at): Row,
) -> Result<Subscription, Error> {
    let corrupt = |what: &str| Error::Internal(sqlx::Error::Decode(what.to_string().into()));
    let event_types = match event_types {
        None => None,
        Some(text) => Some(
            EventTypes::from_column(&text)
                .ok_or_else(|| corrupt("webhook_subscriptions.event_types"))?,
        ),
    };
    let status = match status.as_str() {
        "enabled" => Status::Enabled,
        "disabled" => Status::Disabled,
        _ => return Err(corrupt("webhook_subscriptions.status")),
    };
    let disabled_reason = match reason {
        None => None,
        Some(raw) => Some(
            DisabledReason::parse(&raw)
                .ok_or_else(|| corrupt("webhook_subscriptions.disabled_reason"))?,
        ),
    };
    Ok(Subscription {
        id: WebhookId(id),
        client_id: ClientId(client_id),
        url,
        event_types,
        description,
        status,
        disabled_reason,
        created_at,
        updated_at,
        secret: None,
    })
}
