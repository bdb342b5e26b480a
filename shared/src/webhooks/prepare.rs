//! The signer (SPEC §20): a claimed attempt made into a request. Runs
//! where the secrets can be opened (in the VPC on AWS); what it returns is
//! all the sender needs (`send::Outgoing`).

use super::claim::Claimed;
use super::send::{Outgoing, SendError};
use super::{Rules, SealKey, resolve_checked, signature_header};
use url::Url;

/// Why an attempt was not made.
#[derive(Debug)]
pub enum NotSent {
    /// A failed attempt, recorded as such (`address_not_allowed`, or
    /// `connection_failed` when the name does not resolve).
    Refused(SendError),
    /// Our own trouble (a secret that does not open under the key): no
    /// attempt is recorded, the lease runs out and the delivery waits
    /// (never lost, never sent unsigned). Logged at ERROR by the caller.
    Internal(String),
}

/// The request for `claimed`: the event as the feed serves it, signed
/// with the subscription's secret (and the previous one while it still
/// signs), to the checked address of the URL's host, resolved now.
pub async fn prepare(
    claimed: &Claimed,
    key: &SealKey,
    rules: &Rules,
    timeout_ms: u64,
    timestamp: i64,
) -> Result<Outgoing, NotSent> {
    let body = serde_json::to_string(&claimed.event)
        .map_err(|err| NotSent::Internal(format!("the event does not serialise: {err}")))?;
    let request = Request {
        url: &claimed.url,
        secret_sealed: &claimed.secret_sealed,
        previous_sealed: claimed.previous_sealed.as_deref(),
        // `webhook-id`: the event's id, the same on every attempt.
        id: claimed.event.id.to_string(),
        body,
    };
    sign(request, key, rules, timeout_ms, timestamp).await
}

/// What a signed request is made of: the subscription's URL and sealed
/// secrets (the previous one only while it still signs), the
/// `webhook-id` and the body. A delivery's comes from its claim, a ping's
/// (`ping.rs`) from the subscription.
pub struct Request<'a> {
    pub url: &'a str,
    pub secret_sealed: &'a [u8],
    pub previous_sealed: Option<&'a [u8]>,
    pub id: String,
    pub body: String,
}

/// `request` signed, to the checked address of the URL's host, resolved
/// now (an address refused here is refused as an attempt's would be).
pub async fn sign(
    request: Request<'_>,
    key: &SealKey,
    rules: &Rules,
    timeout_ms: u64,
    timestamp: i64,
) -> Result<Outgoing, NotSent> {
    let url = Url::parse(request.url).map_err(|_| NotSent::Refused(SendError::ConnectionFailed))?;
    let addresses = resolve_checked(&url, rules).await.map_err(|err| {
        NotSent::Refused(match err.code() {
            "address_not_allowed" => SendError::AddressNotAllowed,
            _ => SendError::ConnectionFailed,
        })
    })?;
    let address = addresses[0];
    let current = key
        .unseal(request.secret_sealed)
        .map_err(|err| NotSent::Internal(format!("the secret does not open: {err}")))?;
    let previous = match request.previous_sealed {
        Some(sealed) => Some(key.unseal(sealed).map_err(|err| {
            NotSent::Internal(format!("the previous secret does not open: {err}"))
        })?),
        None => None,
    };
    let Request { id, body, .. } = request;
    let signature = signature_header(&current, previous.as_ref(), &id, timestamp, body.as_bytes());
    Ok(Outgoing {
        url: url.to_string(),
        address,
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("webhook-id".into(), id),
            ("webhook-timestamp".into(), timestamp.to_string()),
            ("webhook-signature".into(), signature),
        ],
        body,
        timeout_ms,
    })
}
