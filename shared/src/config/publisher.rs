//! The publisher's settings (SPEC §12): `EVENT_BUS_NAME`, the feed's bus,
//! required by `events-publish`; optional for the functions that change
//! holds or slots, which, when it is set, nudge the publisher through that
//! bus after a change (`events::PublishTrigger`).

use super::error::ConfigError;

/// `EVENT_BUS_NAME` for the trigger after a change: unset or empty, no
/// trigger (the schedule alone publishes); a bus the publisher would
/// refuse, no trigger either (logged by the caller, never failing a start:
/// the trigger is a shortcut).
pub fn trigger_bus(lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
    PublisherSettings::from_lookup(lookup)
        .ok()
        .map(|settings| settings.bus)
}

/// `EVENT_BUS_NAME`: the EventBridge bus the feed is sent to (the
/// template's bus: its name, or its ARN).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublisherSettings {
    pub bus: String,
}

const BUS_EXPECTED: &str =
    "an EventBridge bus: a name of 1 to 256 of A-Z a-z 0-9 . - _ /, or an arn:… ARN";

impl PublisherSettings {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let key = "EVENT_BUS_NAME";
        let bus = lookup(key).filter(|value| !value.is_empty());
        match bus {
            Some(bus) if valid_bus(&bus) => Ok(Self { bus }),
            value => Err(ConfigError {
                key,
                value,
                expected: BUS_EXPECTED,
            }),
        }
    }
}

fn valid_bus(bus: &str) -> bool {
    let name = |text: &str| {
        (1..=256).contains(&text.len())
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
    };
    match bus.strip_prefix("arn:") {
        Some(rest) => rest.len() <= 1600 && rest.split(':').count() == 5 && !rest.contains(' '),
        None => name(bus),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(value: Option<&str>) -> Result<PublisherSettings, ConfigError> {
        PublisherSettings::from_lookup(|_| value.map(str::to_string))
    }

    #[test]
    fn the_bus_is_required_and_checked() {
        assert_eq!(read(Some("sb-events")).unwrap().bus, "sb-events");
        let arn = "arn:aws:events:eu-west-1:123456789012:event-bus/sb-events";
        assert_eq!(read(Some(arn)).unwrap().bus, arn);
        assert_eq!(read(None).unwrap_err().value, None);
        assert_eq!(read(Some("")).unwrap_err().value, None);
        for bad in ["two words", "ünï", "arn:aws:events", &"x".repeat(257)] {
            let err = read(Some(bad)).unwrap_err();
            assert_eq!(err.key, "EVENT_BUS_NAME");
            assert_eq!(err.value.as_deref(), Some(bad));
        }
    }
}
