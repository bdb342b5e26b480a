//! Where a webhook may be sent (SPEC §20, "The URL"): the URL's rules,
//! checked at registration, and its host's addresses, checked at
//! registration and again at every attempt, so that a name that later
//! resolves elsewhere (DNS rebinding) is caught when it matters. The
//! sender connects to an address [`resolve_checked`] returned, never to the
//! name again: what was checked is what is reached.
//!
//! Refused unless `WEBHOOK_ALLOW_PRIVATE`: every address that is not
//! public unicast — loopback, private (RFC 1918, fc00::/7), link-local
//! (169.254/16 with the instance-metadata 169.254.169.254, fe80::/10),
//! shared (100.64/10), multicast, unspecified, broadcast, documentation and
//! the other reserved ranges — and the IPv6 forms that carry an IPv4
//! address (IPv4-mapped, IPv4-compatible, NAT64, 6to4) by the address they
//! carry.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use url::{Host, Url};

pub use crate::config::WebhookRules as Rules;

/// A subscription's `url` is at most this long (`webhook_subscriptions.url`).
pub const MAX_URL_LEN: usize = 2048;

/// Why a URL is refused; each says it in words for the `url` field's
/// message. Carries no part of the URL: a URL may hold a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("The url must be an absolute URL of at most {MAX_URL_LEN} characters.")]
    Malformed,
    #[error("The url must start with https://.")]
    HttpsOnly,
    #[error("The url must start with https:// or http://.")]
    Scheme,
    #[error("The url must not carry a user name or password.")]
    Credentials,
    #[error("The url must name a host.")]
    NoHost,
}

/// Why an address is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// The host resolves to (or is) an address of this class.
    #[error("the host's address {address} is {class}, which webhooks may not reach")]
    NotAllowed { address: IpAddr, class: Class },
    /// No address: the name does not resolve (or resolving failed).
    #[error("the host does not resolve: {0}")]
    Unresolved(String),
}

impl AddressError {
    /// The delivery's `last_error` (SPEC §20).
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotAllowed { .. } => "address_not_allowed",
            Self::Unresolved(_) => "connection_failed",
        }
    }
}

/// The URL as it will be stored and called, if it keeps the rules:
/// `https` (or `http` under `WEBHOOK_ALLOW_HTTP`), no user or password, a
/// host, at most [`MAX_URL_LEN`] characters as written and as normalised.
/// An IP literal's address is checked here too; a name's, by
/// [`resolve_checked`].
pub fn check_url(raw: &str, rules: &Rules) -> Result<Url, UrlError> {
    if raw.chars().count() > MAX_URL_LEN {
        return Err(UrlError::Malformed);
    }
    let url = Url::parse(raw).map_err(|_| UrlError::Malformed)?;
    if url.as_str().len() > MAX_URL_LEN {
        return Err(UrlError::Malformed);
    }
    match url.scheme() {
        "https" => {}
        "http" if rules.allow_http => {}
        "http" => return Err(UrlError::HttpsOnly),
        _ if rules.allow_http => return Err(UrlError::Scheme),
        _ => return Err(UrlError::HttpsOnly),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlError::Credentials);
    }
    match url.host() {
        None => Err(UrlError::NoHost),
        Some(Host::Domain("")) => Err(UrlError::NoHost),
        Some(_) => Ok(url),
    }
}

/// Every address `url`'s host stands for, each with the URL's port, when
/// all of them may be reached. A name that resolves to any address that
/// may not is refused whole: which of its addresses a client would pick is
/// not ours to guess, and a name mixing public and private answers is the
/// shape of a rebinding attempt. An IP literal is not looked up.
pub async fn resolve_checked(url: &Url, rules: &Rules) -> Result<Vec<SocketAddr>, AddressError> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| AddressError::Unresolved("no port".into()))?;
    let addresses: Vec<SocketAddr> = match url.host() {
        Some(Host::Ipv4(ip)) => vec![SocketAddr::new(IpAddr::V4(ip), port)],
        Some(Host::Ipv6(ip)) => vec![SocketAddr::new(IpAddr::V6(ip), port)],
        Some(Host::Domain(name)) => tokio::net::lookup_host((name, port))
            .await
            .map_err(|err| AddressError::Unresolved(err.kind().to_string()))?
            .collect(),
        None => return Err(AddressError::Unresolved("no host".into())),
    };
    if addresses.is_empty() {
        return Err(AddressError::Unresolved("no address".into()));
    }
    for address in &addresses {
        check_address(address.ip(), rules)?;
    }
    Ok(addresses)
}

/// `Ok` when webhooks may reach `address` under `rules`.
pub fn check_address(address: IpAddr, rules: &Rules) -> Result<(), AddressError> {
    match classify(address) {
        Some(class) if !rules.allow_private => Err(AddressError::NotAllowed { address, class }),
        _ => Ok(()),
    }
}

/// What makes an address one that is not public unicast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Unspecified,
    Loopback,
    Private,
    LinkLocal,
    Shared,
    Multicast,
    Broadcast,
    Documentation,
    /// Benchmarking, IETF protocol assignments, the old class E, 6to4
    /// relays' anycast, site-local, discard-only, Teredo, ORCHID and the
    /// other ranges of IANA's special-purpose registries that reach no
    /// public host.
    Reserved,
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Unspecified => "unspecified",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::LinkLocal => "link-local",
            Self::Shared => "shared (carrier-grade NAT)",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Documentation => "for documentation",
            Self::Reserved => "reserved",
        })
    }
}

/// `None` for a public unicast address, else its class.
pub fn classify(address: IpAddr) -> Option<Class> {
    match address {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Class> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip.is_broadcast() => Class::Broadcast,
        (0, _, _) => Class::Unspecified, // "this network", 0.0.0.0 included
        (127, _, _) => Class::Loopback,
        (10, _, _) | (172, 16..=31, _) | (192, 168, _) => Class::Private,
        (169, 254, _) => Class::LinkLocal,
        (100, 64..=127, _) => Class::Shared,
        (224..=239, _, _) => Class::Multicast,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Class::Documentation,
        (192, 0, 0) | (192, 88, 99) | (198, 18..=19, _) | (240..=255, _, _) => Class::Reserved,
        _ => return None,
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<Class> {
    let s = ip.segments();
    // The forms that carry an IPv4 address are what that address is:
    // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64's
    // well-known prefix (64:ff9b::a.b.c.d) and 6to4 (2002:AABB:CCDD::).
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if ip.is_unspecified() {
        return Some(Class::Unspecified);
    }
    if ip.is_loopback() {
        return Some(Class::Loopback);
    }
    if s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0) {
        return classify_v4(tail);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return classify_v4(tail);
    }
    if s[0] == 0x2002 {
        let carried = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        return classify_v4(carried);
    }
    Some(match s[0] {
        0xfc00..=0xfdff => Class::Private,
        0xfe80..=0xfebf => Class::LinkLocal,
        0xff00..=0xffff => Class::Multicast,
        0x2001 if s[1] == 0x0db8 => Class::Documentation,
        0x3fff if s[1] <= 0x0fff => Class::Documentation,
        // 2001::/23, IETF protocol assignments: Teredo, ORCHID,
        // benchmarking and the like.
        0x2001 if s[1] < 0x0200 => Class::Reserved,
        // Global unicast.
        0x2000..=0x3fff => return None,
        // Everything else is not public unicast: site-local (fec0::/10),
        // local-use NAT64 (64:ff9b:1::/48), discard-only (100::/64), …
        _ => Class::Reserved,
    })
}

#[cfg(test)]
#[path = "address_tests.rs"]
mod tests;
