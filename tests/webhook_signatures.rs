//! Our webhook signatures verified by Standard Webhooks' own library (the
//! `standardwebhooks` crate of the specification's repository), not by our
//! code: a receiver using it accepts what we send, with either secret
//! while a rotated one is live, and refuses what we did not sign.

use lambda_http::http::{HeaderMap, HeaderValue};
use shared::webhooks::{SealKey, WebhookSecret, signature_header};
use standardwebhooks::Webhook;

fn headers(id: &str, timestamp: i64, signature: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("webhook-id", HeaderValue::from_str(id).unwrap());
    headers.insert("webhook-timestamp", HeaderValue::from(timestamp));
    headers.insert(
        "webhook-signature",
        HeaderValue::from_str(signature).unwrap(),
    );
    headers
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[test]
fn the_reference_library_verifies_our_signature_with_the_secret_we_show() {
    let secret = WebhookSecret::generate().unwrap();
    let body = br#"{"id":"42","type":"hold.created","occurred_at":"2026-12-06T08:00:00.000000Z","data":{"id":7}}"#;
    let (id, timestamp) = ("42", now());
    let signature = signature_header(&secret, None, id, timestamp, body);
    let receiver = Webhook::new(&secret.expose()).unwrap();
    receiver
        .verify(body, &headers(id, timestamp, &signature))
        .expect("verified");
    // The library's own signature is ours, byte for byte.
    assert_eq!(receiver.sign(id, timestamp, body).unwrap(), signature);

    // Anything changed is refused: the body, the id, the timestamp, the key.
    let other = WebhookSecret::generate().unwrap();
    let refusals = [
        receiver.verify(br#"{"id":"43"}"#, &headers(id, timestamp, &signature)),
        receiver.verify(body, &headers("43", timestamp, &signature)),
        receiver.verify(body, &headers(id, timestamp + 1, &signature)),
        Webhook::new(&other.expose())
            .unwrap()
            .verify(body, &headers(id, timestamp, &signature)),
    ];
    for (n, refused) in refusals.into_iter().enumerate() {
        assert!(refused.is_err(), "case {n} verified");
    }
}

#[test]
fn while_a_rotated_secret_lives_a_receiver_holding_either_one_verifies() {
    let (new, old) = (
        WebhookSecret::generate().unwrap(),
        WebhookSecret::generate().unwrap(),
    );
    let body = br#"{"id":"9","type":"slot.updated"}"#;
    let (id, timestamp) = ("9", now());
    let signature = signature_header(&new, Some(&old), id, timestamp, body);
    assert_eq!(signature.split(' ').count(), 2, "{signature}");
    for secret in [&new, &old] {
        Webhook::new(&secret.expose())
            .unwrap()
            .verify(body, &headers(id, timestamp, &signature))
            .expect("either secret verifies");
    }
    let stranger = WebhookSecret::generate().unwrap();
    assert!(
        Webhook::new(&stranger.expose())
            .unwrap()
            .verify(body, &headers(id, timestamp, &signature))
            .is_err()
    );
}

#[test]
fn a_secret_sealed_and_unsealed_still_signs_what_the_library_verifies() {
    use base64::Engine;
    let key = base64::engine::general_purpose::STANDARD.encode([5u8; 32]);
    let key = SealKey::from_base64(&key).unwrap();
    let secret = WebhookSecret::generate().unwrap();
    let opened = key.unseal(&key.seal(&secret).unwrap()).unwrap();
    let (body, timestamp) = (b"{}", now());
    let signature = signature_header(&opened, None, "1", timestamp, body);
    Webhook::new(&secret.expose())
        .unwrap()
        .verify(body, &headers("1", timestamp, &signature))
        .expect("verified");
}
