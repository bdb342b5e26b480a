//! The sequential model's vocabulary: a key's status, the operations, what
//! an answer said and what the model answers. The model itself, one slot
//! of SPEC §4 and §9 with holds that expire, is in `slot.rs`; its waiting
//! line (§18) in `line.rs`.

use std::fmt;

/// An instant no run reaches: the expiry of a hold whose answers gave none.
pub const NEVER: u64 = u64::MAX;

/// The status of one key's hold; `Unused` until the key's first hold.
/// Expiry is not a status (SPEC §2): an expired hold is `held`, past its
/// `expires_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    Unused,
    Held,
    Confirmed,
    Cancelled,
}

impl Status {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "held" => Some(Self::Held),
            "confirmed" => Some(Self::Confirmed),
            "cancelled" => Some(Self::Cancelled),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unused => "unused",
            Self::Held => "held",
            Self::Confirmed => "confirmed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// The status of one key's waiting-list entry (SPEC §18); `None` until
/// the key's join (and always, for a hold's key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryStatus {
    None,
    Waiting,
    Offered,
    Fulfilled,
    Expired,
    Left,
}

impl EntryStatus {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "waiting" => Some(Self::Waiting),
            "offered" => Some(Self::Offered),
            "fulfilled" => Some(Self::Fulfilled),
            "expired" => Some(Self::Expired),
            "left" => Some(Self::Left),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Waiting => "waiting",
            Self::Offered => "offered",
            Self::Fulfilled => "fulfilled",
            Self::Expired => "expired",
            Self::Left => "left",
        }
    }
}

/// The operation of one call, on a key of the slot (by its index there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// On the slot of this index in the partition.
    Hold(u16),
    Confirm,
    Cancel,
    Extend,
    /// To the slot of this index in the partition (SPEC §17).
    Move(u16),
    /// A read of the hold.
    Read,
    /// The line of the slot of this index in the partition (SPEC §18).
    Join(u16),
    Leave,
    /// A read of the entry.
    Entry,
}

/// What a call's answer said, reduced to what the model decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// 2xx with a hold resource in this status, expiring at `expires`
    /// (`None`: the answer gave no time).
    Hold {
        code: u16,
        status: Status,
        expires: Option<u64>,
        /// The slot it is on, by its index in the partition.
        at: u16,
    },
    /// 2xx with an entry resource in this status, at `position` in its
    /// line (waiting only), on the slot of index `at`.
    Entry {
        code: u16,
        status: EntryStatus,
        position: Option<u32>,
        at: u16,
    },
    /// An error: status code and reason.
    Error { code: u16, reason: String },
    /// 503: the service may or may not have acted (see `check.rs`).
    Unknown,
    /// Anything else (a 2xx without a hold, a hold in an unknown status).
    Malformed(String),
}

/// What the model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    Hold {
        code: u16,
        status: Status,
        expires: u64,
        at: u16,
    },
    Entry {
        code: u16,
        status: EntryStatus,
        position: Option<u32>,
        at: u16,
        /// An offer whose hold has expired: a reclaim may have ended it
        /// (SPEC §18) or not yet, so `expired` fits too.
        lapsed: bool,
    },
    Error {
        code: u16,
        reason: &'static str,
    },
    /// Nothing: the call cannot take effect at this instant, for this
    /// reason.
    Impossible(&'static str),
}

impl Expected {
    pub fn matches(self, observed: &Observed) -> bool {
        match (self, observed) {
            (
                Self::Hold {
                    code,
                    status,
                    expires,
                    at,
                },
                Observed::Hold {
                    code: c,
                    status: s,
                    expires: e,
                    at: a,
                },
            ) => code == *c && status == *s && at == *a && e.is_none_or(|e| e == expires),
            (
                Self::Entry {
                    code,
                    status,
                    position,
                    at,
                    lapsed,
                },
                Observed::Entry {
                    code: c,
                    status: s,
                    position: p,
                    at: a,
                },
            ) => {
                let same = status == *s && position == *p;
                let ended = lapsed && *s == EntryStatus::Expired && p.is_none();
                code == *c && at == *a && (same || ended)
            }
            (Self::Error { code, reason }, Observed::Error { code: c, reason: r }) => {
                code == *c && reason == r
            }
            _ => false,
        }
    }
}

/// `812.345 ms` on the history's time line.
pub fn ms(nanos: u64) -> String {
    if nanos == NEVER {
        return "never".to_string();
    }
    format!("{:.3} ms", nanos as f64 / 1e6)
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Hold {
                code,
                status,
                expires,
                at,
            } => write!(
                f,
                "{code} {} @{at} (expires {})",
                status.as_str(),
                ms(*expires)
            ),
            Self::Entry {
                code,
                status,
                position,
                at,
                lapsed,
            } => {
                write!(f, "{code} entry {} @{at}", status.as_str())?;
                if let Some(p) = position {
                    write!(f, " at {p}")?;
                }
                if *lapsed {
                    f.write_str(" (or expired: its offer lapsed)")?;
                }
                Ok(())
            }
            Self::Error { code, reason } => write!(f, "{code} {reason}"),
            Self::Impossible(why) => write!(f, "nothing here: {why}"),
        }
    }
}

impl fmt::Display for Observed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Hold {
                code,
                status,
                expires,
                at,
            } => {
                write!(f, "{code} {} @{at}", status.as_str())?;
                match expires {
                    Some(e) => write!(f, " (expires {})", ms(*e)),
                    None => Ok(()),
                }
            }
            Self::Entry {
                code,
                status,
                position,
                at,
            } => {
                write!(f, "{code} entry {} @{at}", status.as_str())?;
                match position {
                    Some(p) => write!(f, " at {p}"),
                    None => Ok(()),
                }
            }
            Self::Error { code, reason } => write!(f, "{code} {reason}"),
            Self::Unknown => f.write_str("503 (outcome unknown)"),
            Self::Malformed(what) => write!(f, "malformed: {what}"),
        }
    }
}
