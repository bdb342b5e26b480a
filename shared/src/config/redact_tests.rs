//! A password never reaches a log line or an error: `redact_url` over
//! passwords as an operator may paste them.

use super::redact_url;
use super::tests::settings;

/// Passwords as an operator may paste them, unencoded: each holds one of
/// the characters that end a URL's parts elsewhere.
const AWKWARD_PASSWORDS: [&str; 7] = [
    "pa/ss",
    "p/a/s/s",
    "pa@ss",
    "pa:ss",
    "pa#ss",
    "pa?ss",
    "a/b@c:d#e?f",
];

#[test]
fn a_password_holding_any_of_slash_at_colon_hash_or_question_mark_is_hidden() {
    for password in AWKWARD_PASSWORDS {
        for (url, redacted) in [
            (
                format!("mysql://app:{password}@db:3306/x"),
                "mysql://app:***@db:3306/x",
            ),
            (
                format!("rediss://user:{password}@cache:6379"),
                "rediss://user:***@cache:6379",
            ),
            (
                format!("mysql://app:{password}@db/x?ssl-mode=VERIFY_IDENTITY"),
                "mysql://app:***@db/x?ssl-mode=VERIFY_IDENTITY",
            ),
        ] {
            assert_eq!(redact_url(&url), redacted, "{password}");
        }
        // A bad scheme's refusal shows the URL redacted.
        let url = format!("postgres://app:{password}@db/x");
        let err = settings(&[("DATABASE_URL", &url)]).unwrap_err();
        assert!(!err.to_string().contains(password), "{err}");
    }
    // Without a password nothing is hidden; an '@' after the host (a
    // query) with a port before it hides more than a password would.
    for url in [
        "mysql://app@db:3306/x",
        "mysql://db:3306/x",
        "redis://127.0.0.1:6379",
    ] {
        assert_eq!(redact_url(url), url);
    }
    assert_eq!(
        redact_url("mysql://db:3306/x?ssl-ca=/a@b"),
        "mysql://db:***@b"
    );
}

#[tokio::test]
async fn an_unparseable_database_url_is_refused_without_its_password() {
    for password in AWKWARD_PASSWORDS {
        let url = format!("mysql://app:{password}@db:3306/x");
        let config = settings(&[("DATABASE_URL", &url), ("REDIS_URL", "")])
            .unwrap()
            .local()
            .unwrap();
        // The URL parses or it does not (`/` makes `pa` a port); either
        // way no line about it may hold the password.
        if let Err(err) = crate::App::with_passwords(config, None, None) {
            assert!(!err.0.contains(password), "{}", err.0);
            assert!(err.0.contains("app:***@db:3306/x"), "{}", err.0);
        }
    }
}
