use super::*;

const STRICT: Rules = Rules {
    allow_http: false,
    allow_private: false,
    max_per_client: 10,
};
const DEV: Rules = Rules {
    allow_http: true,
    allow_private: true,
    max_per_client: 10,
};

fn class(text: &str) -> Option<Class> {
    classify(text.parse().unwrap())
}

#[test]
fn every_class_of_address_that_is_not_public_is_named_in_v4_and_v6() {
    let cases: &[(&str, Option<Class>)] = &[
        // Public.
        ("93.184.215.14", None),
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        ("172.32.0.1", None),
        ("100.128.0.1", None),
        ("2606:4700:4700::1111", None),
        ("2a00:1450:4001:82a::200e", None),
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::808:808", None),
        ("2002:808:808::1", None),
        // Unspecified.
        ("0.0.0.0", Some(Class::Unspecified)),
        ("0.1.2.3", Some(Class::Unspecified)),
        ("::", Some(Class::Unspecified)),
        ("::ffff:0.0.0.0", Some(Class::Unspecified)),
        // Loopback.
        ("127.0.0.1", Some(Class::Loopback)),
        ("127.255.255.254", Some(Class::Loopback)),
        ("::1", Some(Class::Loopback)),
        ("::ffff:127.0.0.1", Some(Class::Loopback)),
        ("::127.0.0.1", Some(Class::Loopback)),
        ("64:ff9b::7f00:1", Some(Class::Loopback)),
        ("2002:7f00:1::", Some(Class::Loopback)),
        // Private.
        ("10.0.0.1", Some(Class::Private)),
        ("172.16.0.1", Some(Class::Private)),
        ("172.31.255.255", Some(Class::Private)),
        ("192.168.1.1", Some(Class::Private)),
        ("fc00::1", Some(Class::Private)),
        ("fd12:3456::1", Some(Class::Private)),
        ("::ffff:10.1.2.3", Some(Class::Private)),
        ("::ffff:192.168.0.1", Some(Class::Private)),
        // Link-local, the instance-metadata address included.
        ("169.254.169.254", Some(Class::LinkLocal)),
        ("169.254.0.1", Some(Class::LinkLocal)),
        ("fe80::1", Some(Class::LinkLocal)),
        ("febf::1", Some(Class::LinkLocal)),
        ("::ffff:169.254.169.254", Some(Class::LinkLocal)),
        ("::ffff:a9fe:a9fe", Some(Class::LinkLocal)),
        ("fd00:ec2::254", Some(Class::Private)),
        // Shared (carrier-grade NAT).
        ("100.64.0.1", Some(Class::Shared)),
        ("100.127.255.255", Some(Class::Shared)),
        ("::ffff:100.64.0.1", Some(Class::Shared)),
        // Multicast.
        ("224.0.0.1", Some(Class::Multicast)),
        ("239.255.255.250", Some(Class::Multicast)),
        ("ff02::1", Some(Class::Multicast)),
        ("::ffff:224.0.0.251", Some(Class::Multicast)),
        // Broadcast.
        ("255.255.255.255", Some(Class::Broadcast)),
        ("::ffff:255.255.255.255", Some(Class::Broadcast)),
        // Documentation.
        ("192.0.2.1", Some(Class::Documentation)),
        ("198.51.100.7", Some(Class::Documentation)),
        ("203.0.113.9", Some(Class::Documentation)),
        ("2001:db8::1", Some(Class::Documentation)),
        ("3fff::1", Some(Class::Documentation)),
        // Reserved.
        ("240.0.0.1", Some(Class::Reserved)),
        ("198.18.0.1", Some(Class::Reserved)),
        ("192.0.0.8", Some(Class::Reserved)),
        ("fec0::1", Some(Class::Reserved)),
        ("2001::1", Some(Class::Reserved)),
        ("100::1", Some(Class::Reserved)),
        ("64:ff9b:1::1", Some(Class::Reserved)),
        ("::ffff:240.0.0.1", Some(Class::Reserved)),
    ];
    for (text, expected) in cases {
        assert_eq!(class(text), *expected, "{text}");
        let address: IpAddr = text.parse().unwrap();
        assert_eq!(
            check_address(address, &STRICT).is_ok(),
            expected.is_none(),
            "{text}"
        );
        assert!(
            check_address(address, &DEV).is_ok(),
            "{text} under WEBHOOK_ALLOW_PRIVATE"
        );
    }
}

#[test]
fn a_url_is_https_without_credentials_with_a_host() {
    let url = check_url("https://hooks.example.com/in?x=1", &STRICT).unwrap();
    assert_eq!(url.as_str(), "https://hooks.example.com/in?x=1");
    assert_eq!(
        check_url("HTTPS://Hooks.Example.COM", &STRICT)
            .unwrap()
            .as_str(),
        "https://hooks.example.com/",
        "stored as normalised"
    );
    let refused: &[(&str, UrlError)] = &[
        ("http://hooks.example.com/", UrlError::HttpsOnly),
        ("ftp://hooks.example.com/", UrlError::HttpsOnly),
        ("https://user@hooks.example.com/", UrlError::Credentials),
        ("https://user:pw@hooks.example.com/", UrlError::Credentials),
        ("https://:pw@hooks.example.com/", UrlError::Credentials),
        ("hooks.example.com/in", UrlError::Malformed),
        ("", UrlError::Malformed),
        ("https://", UrlError::Malformed),
        ("https://exa mple.com/", UrlError::Malformed),
    ];
    for (raw, error) in refused {
        assert_eq!(check_url(raw, &STRICT).as_ref().err(), Some(error), "{raw}");
    }
    let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
    assert_eq!(check_url(&long, &STRICT).err(), Some(UrlError::Malformed));
    let fits = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN - 20));
    assert!(check_url(&fits, &STRICT).is_ok());
    // Under `make dev`: http too, still no other scheme and no credentials.
    assert!(check_url("http://127.0.0.1:9999/hook", &DEV).is_ok());
    assert_eq!(check_url("ftp://x/", &DEV).err(), Some(UrlError::Scheme));
    assert_eq!(
        check_url("http://a:b@x/", &DEV).err(),
        Some(UrlError::Credentials)
    );
    assert_eq!(
        check_url("data:text/plain,x", &DEV).err(),
        Some(UrlError::Scheme)
    );
}

#[tokio::test]
async fn a_literal_is_checked_as_written_and_a_name_by_every_address_it_resolves_to() {
    let resolve = |raw: &str, rules: Rules| {
        let url = check_url(raw, &rules).unwrap();
        async move { resolve_checked(&url, &rules).await }
    };
    let https_private = Rules {
        allow_http: false,
        ..DEV
    };
    // Literals, in their odd spellings too (the URL parser reads them).
    for raw in [
        "https://127.0.0.1/",
        "https://2130706433/",
        "https://0x7f.1/",
        "https://[::1]/",
        "https://[::ffff:127.0.0.1]/",
        "https://169.254.169.254/latest/meta-data/",
        "https://[fe80::1]/",
        "https://10.0.0.1:8443/",
    ] {
        let err = resolve(raw, STRICT).await.unwrap_err();
        assert!(
            matches!(err, AddressError::NotAllowed { .. }),
            "{raw}: {err}"
        );
        assert_eq!(err.code(), "address_not_allowed");
    }
    assert_eq!(
        resolve("https://10.0.0.1:8443/", https_private)
            .await
            .unwrap(),
        ["10.0.0.1:8443".parse().unwrap()]
    );
    assert_eq!(
        resolve("https://[2606:4700:4700::1111]/", STRICT)
            .await
            .unwrap(),
        ["[2606:4700:4700::1111]:443".parse().unwrap()]
    );
    // A name: `localhost` resolves from the hosts file, to loopback only.
    let err = resolve("https://localhost:9/", STRICT).await.unwrap_err();
    assert!(
        matches!(
            err,
            AddressError::NotAllowed {
                class: Class::Loopback,
                ..
            }
        ),
        "{err}"
    );
    let all = resolve("https://localhost:9/", https_private)
        .await
        .unwrap();
    assert!(!all.is_empty() && all.iter().all(|a| a.ip().is_loopback() && a.port() == 9));
    // A name that does not resolve (`.invalid` never does, RFC 6761).
    let err = resolve("https://no-such-host.invalid/", STRICT)
        .await
        .unwrap_err();
    assert!(matches!(err, AddressError::Unresolved(_)), "{err}");
}
