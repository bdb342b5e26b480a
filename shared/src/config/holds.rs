//! SPEC §9's rules for holds: how many seats one may claim, how long
//! extensions may keep it, how long an ended hold's key keeps replaying.

use super::error::ConfigError;
use super::settings::integer;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldRules {
    /// `HOLD_MAX_QUANTITY`: the most seats one hold may claim.
    pub max_quantity: u32,
    /// `HOLD_MAX_LIFETIME_SECONDS`: no extension moves `expires_at` past
    /// `created_at` plus this.
    pub max_lifetime: Duration,
    /// `HOLD_RETENTION_DAYS`: an ended hold that was never a booking is
    /// deleted this long after it ended.
    pub retention: Duration,
    /// `EVENT_RETENTION_DAYS` (SPEC §12): the change feed keeps an event
    /// this long. Here because the sweeper, which keeps holds to their
    /// retention, keeps events to theirs.
    pub event_retention: Duration,
    /// `EVENT_BUS_NAME` set: a publisher sends the feed to that bus, and
    /// retention deletes no event it has not sent (SPEC §12: every event
    /// reaches the bus at least once). Unset (no bus, as locally): age
    /// alone decides.
    pub events_published: bool,
    /// `AVAILABILITY_SCAN_LIMIT` (SPEC §16): the most slots one page of the
    /// availability list examines. Not a rule of holds: it rides with them
    /// to the booking service, which computes the cached first page, and
    /// to the slot service.
    pub availability_scan: u32,
    /// `CLIENT_CANCEL_WINDOW` (SPEC §23.8): a booking its own client
    /// cancelled counts against that client's `max_held_seats` this long
    /// after its cancellation; zero: not at all.
    pub cancel_window: Duration,
}

pub const DAY: Duration = Duration::from_secs(86_400);
/// The longest `CLIENT_CANCEL_WINDOW`: 30 days.
pub const MAX_CANCEL_WINDOW: Duration = Duration::from_secs(30 * 86_400);

impl Default for HoldRules {
    fn default() -> Self {
        Self {
            max_quantity: 50,
            max_lifetime: Duration::from_secs(1800),
            retention: 7 * DAY,
            event_retention: 7 * DAY,
            events_published: false,
            availability_scan: 10_000,
            cancel_window: DAY,
        }
    }
}

impl HoldRules {
    /// Reads the variables; `hold_ttl` is `HOLD_TTL_SECONDS`, which the
    /// lifetime must not be shorter than (a new hold would outlive it).
    pub(super) fn from_lookup(
        lookup: &impl Fn(&str) -> Option<String>,
        hold_ttl: Duration,
    ) -> Result<Self, ConfigError> {
        let defaults = Self::default();
        let max_quantity = integer(
            lookup,
            "HOLD_MAX_QUANTITY",
            defaults.max_quantity.into(),
            1..=1000,
            "an integer from 1 to 1000",
        )?;
        let lifetime_key = "HOLD_MAX_LIFETIME_SECONDS";
        let max_lifetime = integer(
            lookup,
            lifetime_key,
            defaults.max_lifetime.as_secs(),
            1..=86_400,
            "an integer number of seconds from 1 to 86400",
        )?;
        if Duration::from_secs(max_lifetime) < hold_ttl {
            return Err(ConfigError {
                key: lifetime_key,
                value: Some(max_lifetime.to_string()),
                expected: "at least HOLD_TTL_SECONDS (a new hold lives that long)",
            });
        }
        let retention_days = integer(
            lookup,
            "HOLD_RETENTION_DAYS",
            defaults.retention.as_secs() / DAY.as_secs(),
            1..=3650,
            "an integer number of days from 1 to 3650",
        )?;
        let event_retention_days = integer(
            lookup,
            "EVENT_RETENTION_DAYS",
            defaults.event_retention.as_secs() / DAY.as_secs(),
            1..=3650,
            "an integer number of days from 1 to 3650",
        )?;
        let availability_scan = integer(
            lookup,
            "AVAILABILITY_SCAN_LIMIT",
            defaults.availability_scan.into(),
            100..=1_000_000,
            "an integer from 100 to 1000000",
        )?;
        let cancel_window = integer(
            lookup,
            "CLIENT_CANCEL_WINDOW",
            defaults.cancel_window.as_secs(),
            0..=MAX_CANCEL_WINDOW.as_secs(),
            "an integer number of seconds from 0 (off) to 2592000 (30 days)",
        )?;
        Ok(Self {
            cancel_window: Duration::from_secs(cancel_window),
            availability_scan: u32::try_from(availability_scan).unwrap_or(u32::MAX),
            event_retention: DAY * u32::try_from(event_retention_days).unwrap_or(u32::MAX),
            max_quantity: u32::try_from(max_quantity).unwrap_or(u32::MAX),
            max_lifetime: Duration::from_secs(max_lifetime),
            retention: DAY * u32::try_from(retention_days).unwrap_or(u32::MAX),
            // Any bus, even one the publisher would refuse: a publisher
            // that cannot start has sent nothing, and nothing is lost.
            events_published: lookup("EVENT_BUS_NAME").is_some_and(|bus| !bus.is_empty()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(vars: &[(&str, &str)]) -> Result<HoldRules, ConfigError> {
        let lookup = |key: &str| {
            vars.iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        };
        HoldRules::from_lookup(&lookup, Duration::from_secs(300))
    }

    #[test]
    fn unset_rules_are_the_specs_defaults() {
        assert_eq!(rules(&[]).unwrap(), HoldRules::default());
        assert_eq!(HoldRules::default().max_quantity, 50);
        assert_eq!(
            HoldRules::default().retention,
            Duration::from_secs(7 * 86_400)
        );
    }

    #[test]
    fn rules_are_read_and_bounded() {
        let read = rules(&[
            ("HOLD_MAX_QUANTITY", "5"),
            ("HOLD_MAX_LIFETIME_SECONDS", "600"),
            ("HOLD_RETENTION_DAYS", "1"),
            ("EVENT_RETENTION_DAYS", "30"),
            ("AVAILABILITY_SCAN_LIMIT", "500"),
            ("CLIENT_CANCEL_WINDOW", "0"),
        ])
        .unwrap();
        assert_eq!(read.cancel_window, Duration::ZERO, "0 turns it off");
        assert_eq!(HoldRules::default().cancel_window, DAY);
        assert_eq!(
            rules(&[("CLIENT_CANCEL_WINDOW", "2592000")])
                .unwrap()
                .cancel_window,
            Duration::from_secs(2_592_000)
        );
        assert_eq!(read.availability_scan, 500);
        assert_eq!(HoldRules::default().availability_scan, 10_000);
        assert_eq!(read.max_quantity, 5);
        assert_eq!(read.max_lifetime, Duration::from_secs(600));
        assert_eq!(read.retention, DAY);
        assert_eq!(read.event_retention, 30 * DAY);
        assert!(!read.events_published, "no bus: retention by age alone");
        assert!(
            rules(&[("EVENT_BUS_NAME", "feed")])
                .unwrap()
                .events_published
        );
        assert!(!rules(&[("EVENT_BUS_NAME", "")]).unwrap().events_published);
        for (key, bad) in [
            ("HOLD_MAX_QUANTITY", "0"),
            ("HOLD_MAX_QUANTITY", "1001"),
            ("HOLD_MAX_QUANTITY", "two"),
            ("HOLD_MAX_QUANTITY", ""),
            ("HOLD_RETENTION_DAYS", "0"),
            ("HOLD_RETENTION_DAYS", "-1"),
            ("EVENT_RETENTION_DAYS", "0"),
            ("EVENT_RETENTION_DAYS", "3651"),
            ("HOLD_MAX_LIFETIME_SECONDS", "0"),
            ("AVAILABILITY_SCAN_LIMIT", "99"),
            ("AVAILABILITY_SCAN_LIMIT", "1000001"),
            ("CLIENT_CANCEL_WINDOW", "-1"),
            ("CLIENT_CANCEL_WINDOW", "2592001"),
            ("CLIENT_CANCEL_WINDOW", "1d"),
        ] {
            let err = rules(&[(key, bad)]).unwrap_err();
            assert_eq!((err.key, err.value.as_deref()), (key, Some(bad)));
        }
    }

    #[test]
    fn a_lifetime_shorter_than_the_hold_ttl_is_refused() {
        let err = rules(&[("HOLD_MAX_LIFETIME_SECONDS", "299")]).unwrap_err();
        assert_eq!(err.key, "HOLD_MAX_LIFETIME_SECONDS");
        assert!(rules(&[("HOLD_MAX_LIFETIME_SECONDS", "300")]).is_ok());
    }
}
