//! API keys: `[A-Za-z0-9_-]{24,128}`, stored only as the lowercase hex
//! SHA-256 of their bytes.

use crate::secret::Secret;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::TryRngCore;
use sha2::{Digest, Sha256};

/// A key as a client sent it, checked for shape only.
pub struct ApiKey(Secret);

impl ApiKey {
    pub const MIN_LEN: usize = 24;
    pub const MAX_LEN: usize = 128;

    /// `None` unless 24–128 characters of `[A-Za-z0-9_-]`.
    pub fn parse(raw: &str) -> Option<Self> {
        let well_formed = (Self::MIN_LEN..=Self::MAX_LEN).contains(&raw.len())
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        well_formed.then(|| Self(Secret::new(raw.to_string())))
    }

    /// A new key: `sb_` and 256 random bits from the operating system, in
    /// URL-safe base64 (46 characters, all in the key alphabet).
    pub fn generate() -> Result<Self, rand::rand_core::OsError> {
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng.try_fill_bytes(&mut bytes)?;
        Ok(Self(Secret::new(format!(
            "sb_{}",
            URL_SAFE_NO_PAD.encode(bytes)
        ))))
    }

    pub fn hash(&self) -> KeyHash {
        KeyHash::of(self.0.expose())
    }

    /// The key itself: only for the one answer that shows a new key.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }
}

/// `key_hash`: what the database stores and the look-up cache is keyed by.
/// Its `Debug` redacts it: a hash names its key as well as the key does.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct KeyHash(String);

impl std::fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyHash(***)")
    }
}

impl KeyHash {
    pub fn of(key: &str) -> Self {
        Self(hex::encode(Sha256::digest(key.as_bytes())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_24_to_128_characters_of_the_url_safe_alphabet() {
        assert!(ApiKey::parse(&"a".repeat(24)).is_some());
        assert!(ApiKey::parse(&"Z9_-".repeat(32)).is_some());
        assert!(ApiKey::parse(&"a".repeat(23)).is_none());
        assert!(ApiKey::parse(&"a".repeat(129)).is_none());
        for bad in ["a b", "a+b", "a/b", "a=b", "ä", "a.b", "a\u{0}b"] {
            let raw = format!("{bad}{}", "x".repeat(30));
            assert!(ApiKey::parse(&raw).is_none(), "{raw:?}");
        }
    }

    #[test]
    fn the_hash_is_lowercase_hex_sha256_of_the_keys_bytes() {
        // sha256("abc"), FIPS 180-2's first example.
        assert_eq!(
            KeyHash::of("abc").as_str(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn generated_keys_are_well_formed_and_never_repeat() {
        let a = ApiKey::generate().unwrap();
        let b = ApiKey::generate().unwrap();
        assert_eq!(a.expose().len(), 46);
        assert!(ApiKey::parse(a.expose()).is_some());
        assert_ne!(a.expose(), b.expose());
    }
}
