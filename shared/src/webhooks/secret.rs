//! A subscription's signing secret (SPEC §20): made, sealed for the
//! database, unsealed to sign, and the Standard Webhooks signature.
//!
//! Crypto is `ring`'s: AES-256-GCM (`ring::aead`) and HMAC-SHA256
//! (`ring::hmac`). `ring` is already in every function through rustls (the
//! TLS of sqlx, redis and the AWS SDK), it is a maintained, audited crate
//! whose AES-GCM and HMAC are the very code TLS runs, and so these add no
//! crate to the tree and nothing to the booking functions' zips (the
//! `aes-gcm` and `hmac` crates would add both, or need a cargo feature to
//! keep them out).
//!
//! A secret never reaches a log, a `Debug` line or an error: its types
//! print `***`, and no error here carries a byte of it.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use std::fmt;

/// What a secret's key is: 32 random bytes (SPEC §20).
pub const SECRET_BYTES: usize = 32;
const PREFIX: &str = "whsec_";

/// A signing secret, `whsec_` + base64 of its 32 bytes. Shown to its
/// client in the answers that create or rotate it, and nowhere else.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret([u8; SECRET_BYTES]);

impl WebhookSecret {
    /// A new secret from the operating system's randomness.
    pub fn generate() -> Result<Self, SecretError> {
        let mut bytes = [0u8; SECRET_BYTES];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| SecretError::NoRandomness)?;
        Ok(Self(bytes))
    }

    /// `whsec_` + standard base64 of exactly 32 bytes; `None` otherwise.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = STANDARD.decode(text.strip_prefix(PREFIX)?).ok()?;
        Some(Self(bytes.try_into().ok()?))
    }

    /// The secret as its client is shown it: only for the answer that
    /// creates or rotates it.
    pub fn expose(&self) -> String {
        format!("{PREFIX}{}", STANDARD.encode(self.0))
    }

    /// `v1,` + base64(HMAC-SHA256(key = the secret's bytes, message =
    /// `{id}.{timestamp}.{body}`)): Standard Webhooks' signature.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &self.0);
        let mut context = hmac::Context::with_key(&key);
        context.update(id.as_bytes());
        context.update(b".");
        context.update(timestamp.to_string().as_bytes());
        context.update(b".");
        context.update(body);
        format!("v1,{}", STANDARD.encode(context.sign().as_ref()))
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(***)")
    }
}

/// The `webhook-signature` header: the current secret's signature and,
/// while a rotated secret still signs (24 h, SPEC §20), the previous
/// one's, space-separated, so a receiver holding either verifies it.
pub fn signature_header(
    current: &WebhookSecret,
    previous: Option<&WebhookSecret>,
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    let mut header = current.sign(id, timestamp, body);
    if let Some(previous) = previous {
        header.push(' ');
        header.push_str(&previous.sign(id, timestamp, body));
    }
    header
}

/// The key that seals secrets at rest (`WEBHOOK_SECRET_KEY`: base64 of 32
/// bytes). Never printed.
#[derive(Clone)]
pub struct SealKey([u8; 32]);

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealKey(***)")
    }
}

pub const KEY_VARIABLE: &str = "WEBHOOK_SECRET_KEY";
/// On AWS: the Secrets Manager secret that holds the key, read at cold
/// start when [`KEY_VARIABLE`] is not set.
pub const KEY_ARN_VARIABLE: &str = "WEBHOOK_SECRET_KEY_ARN";

/// A sealed secret's layout: version, nonce, ciphertext, tag.
const SEALED_VERSION: u8 = 1;
const TAG_LEN: usize = 16;
pub const SEALED_LEN: usize = 1 + NONCE_LEN + SECRET_BYTES + TAG_LEN;
/// Binds a ciphertext to what it is: a sealed blob of anything else under
/// the same key does not open as a secret.
const AAD: &[u8] = b"slot-booking webhook secret v1";

impl SealKey {
    /// `WEBHOOK_SECRET_KEY` through `lookup`: `None` when unset or empty
    /// (a function that never touches a secret needs none); a value that
    /// is not base64 of 32 bytes stops the start, and is not echoed.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, crate::config::ConfigError> {
        match lookup(KEY_VARIABLE).filter(|text| !text.trim().is_empty()) {
            None => Ok(None),
            Some(text) => Self::from_base64(&text)
                .map(Some)
                .ok_or(crate::config::ConfigError {
                    key: KEY_VARIABLE,
                    // Never the value: it is the key, however malformed.
                    value: Some("***".into()),
                    expected: "32 bytes in standard base64 (`openssl rand -base64 32`) or 64 hex digits",
                }),
        }
    }

    /// Standard base64 of exactly 32 bytes (padded or not), or their 64
    /// hex digits (what Secrets Manager generates for the template:
    /// `WEBHOOK_SECRET_KEY_ARN`); `None` otherwise.
    pub fn from_base64(text: &str) -> Option<Self> {
        let text = text.trim();
        let bytes = if text.len() == 64 {
            hex::decode(text).ok()?
        } else {
            STANDARD
                .decode(text)
                .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(text))
                .ok()?
        };
        Some(Self(bytes.try_into().ok()?))
    }

    fn cipher(&self) -> LessSafeKey {
        // 32 bytes is AES-256's key length: `new` cannot refuse it.
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &self.0).expect("a 32-byte key"))
    }

    /// `version | nonce (96 random bits) | AES-256-GCM(secret) | tag`: a
    /// new nonce each time, so sealing one secret twice gives two blobs.
    pub fn seal(&self, secret: &WebhookSecret) -> Result<Vec<u8>, SecretError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| SecretError::NoRandomness)?;
        let mut sealed = Vec::with_capacity(SEALED_LEN);
        sealed.push(SEALED_VERSION);
        sealed.extend_from_slice(&nonce);
        let mut body = secret.0.to_vec();
        self.cipher()
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(AAD),
                &mut body,
            )
            .map_err(|_| SecretError::Sealing)?;
        sealed.extend_from_slice(&body);
        Ok(sealed)
    }

    /// The secret in `sealed`, if this key sealed it and no byte of it has
    /// changed since.
    pub fn unseal(&self, sealed: &[u8]) -> Result<WebhookSecret, SecretError> {
        if sealed.len() != SEALED_LEN || sealed[0] != SEALED_VERSION {
            return Err(SecretError::Unsealing);
        }
        let (nonce, body) = sealed[1..].split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SecretError::Unsealing)?;
        let mut body = body.to_vec();
        let opened = self
            .cipher()
            .open_in_place(nonce, Aad::from(AAD), &mut body)
            .map_err(|_| SecretError::Unsealing)?;
        let bytes: [u8; SECRET_BYTES] = opened.try_into().map_err(|_| SecretError::Unsealing)?;
        Ok(WebhookSecret(bytes))
    }
}

/// Why a secret could not be made, sealed or opened. Carries nothing of
/// the secret or the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("the operating system gave no randomness")]
    NoRandomness,
    #[error("a webhook secret could not be sealed")]
    Sealing,
    /// A wrong key, a changed byte, or not a sealed secret at all.
    #[error("a sealed webhook secret does not open under WEBHOOK_SECRET_KEY")]
    Unsealing,
}

#[cfg(test)]
#[path = "secret_tests.rs"]
mod tests;
