use super::*;

fn key(byte: u8) -> SealKey {
    SealKey::from_base64(&STANDARD.encode([byte; 32])).unwrap()
}

#[test]
fn a_secret_is_whsec_and_32_random_bytes_and_reads_back() {
    let a = WebhookSecret::generate().unwrap();
    let b = WebhookSecret::generate().unwrap();
    assert_ne!(a, b);
    let shown = a.expose();
    assert!(shown.starts_with("whsec_"), "{shown}");
    assert_eq!(STANDARD.decode(&shown[6..]).unwrap().len(), 32);
    assert_eq!(WebhookSecret::parse(&shown), Some(a));
    for bad in [
        "",
        "whsec_",
        "whsec_AAAA",
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    ] {
        assert_eq!(WebhookSecret::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn the_signature_is_standard_webhooks_v1() {
    // The example of the Standard Webhooks reference libraries.
    // Its secret is 24 bytes, not one of ours: the construction is
    // checked with ring's HMAC directly, then ours against it.
    let key = hmac::Key::new(
        hmac::HMAC_SHA256,
        &STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap(),
    );
    let message = b"msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{\"test\": 2432232314}";
    assert_eq!(
        STANDARD.encode(hmac::sign(&key, message).as_ref()),
        "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    );
    // Ours, the same construction over 32 bytes.
    let ours = WebhookSecret([7; 32]);
    let mac = hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA256, &[7; 32]),
        b"evt_1.1700000000.{\"a\":1}",
    );
    assert_eq!(
        ours.sign("evt_1", 1_700_000_000, br#"{"a":1}"#),
        format!("v1,{}", STANDARD.encode(mac.as_ref()))
    );
}

#[test]
fn while_a_rotated_secret_lives_the_header_carries_both_signatures() {
    let (new, old) = (WebhookSecret([1; 32]), WebhookSecret([2; 32]));
    let one = signature_header(&new, None, "e", 5, b"{}");
    assert_eq!(one, new.sign("e", 5, b"{}"));
    let two = signature_header(&new, Some(&old), "e", 5, b"{}");
    assert_eq!(
        two,
        format!("{} {}", new.sign("e", 5, b"{}"), old.sign("e", 5, b"{}"))
    );
}

#[test]
fn a_sealed_secret_opens_only_under_its_key_and_unchanged() {
    let secret = WebhookSecret::generate().unwrap();
    let sealed = key(1).seal(&secret).unwrap();
    assert_eq!(sealed.len(), SEALED_LEN);
    assert!(sealed.len() <= 255, "fits VARBINARY(255)");
    assert_eq!(key(1).unseal(&sealed).unwrap(), secret);
    assert_ne!(
        key(1).seal(&secret).unwrap(),
        sealed,
        "a new nonce each time"
    );
    assert_eq!(key(2).unseal(&sealed), Err(SecretError::Unsealing));
    for at in 0..sealed.len() {
        let mut tampered = sealed.clone();
        tampered[at] ^= 0x01;
        assert_eq!(
            key(1).unseal(&tampered),
            Err(SecretError::Unsealing),
            "byte {at}"
        );
    }
    assert_eq!(key(1).unseal(&sealed[..40]), Err(SecretError::Unsealing));
    assert_eq!(key(1).unseal(b""), Err(SecretError::Unsealing));
}

#[test]
fn a_seal_key_is_base64_of_exactly_32_bytes() {
    let text = STANDARD.encode([9u8; 32]);
    assert!(SealKey::from_base64(&text).is_some());
    assert!(SealKey::from_base64(text.trim_end_matches('=')).is_some());
    let hex = "09".repeat(32);
    assert_eq!(
        SealKey::from_base64(&hex).unwrap().0,
        [9u8; 32],
        "64 hex digits"
    );
    assert!(SealKey::from_base64(&"0g".repeat(32)).is_none());
    for bad in [
        String::new(),
        STANDARD.encode([9u8; 31]),
        STANDARD.encode([9u8; 33]),
        "not base64!".into(),
    ] {
        assert!(SealKey::from_base64(&bad).is_none(), "{bad:?}");
    }
}

#[test]
fn no_secret_or_key_shows_in_debug_or_an_error() {
    let secret = WebhookSecret::generate().unwrap();
    let shown = secret.expose();
    let body = &shown[6..];
    let key_text = STANDARD.encode([3u8; 32]);
    let key = SealKey::from_base64(&key_text).unwrap();
    let printed = format!(
        "{secret:?} {key:?} {:?} {}",
        key.unseal(b"x"),
        SecretError::Unsealing
    );
    assert!(!printed.contains(body), "{printed}");
    assert!(!printed.contains(&key_text), "{printed}");
    assert!(printed.contains("WebhookSecret(***)") && printed.contains("SealKey(***)"));
}

#[test]
fn the_key_is_read_from_its_variable_and_a_bad_one_is_refused_without_being_echoed() {
    let with = |value: Option<&str>| {
        let value = value.map(str::to_string);
        SealKey::from_lookup(move |name| {
            assert_eq!(name, KEY_VARIABLE);
            value.clone()
        })
    };
    assert!(with(None).unwrap().is_none(), "unset: no key");
    assert!(with(Some("  ")).unwrap().is_none(), "empty: no key");
    let good = STANDARD.encode([1u8; 32]);
    assert!(with(Some(&good)).unwrap().is_some());
    let bad = "c2hvcnQ=";
    let err = with(Some(bad)).unwrap_err();
    assert_eq!(err.key, KEY_VARIABLE);
    assert!(!err.to_string().contains(bad), "{err}");
}
