use super::*;
use std::time::Duration;

#[test]
fn the_proxy_url_carries_no_password_and_verifies_the_certificate() {
    let url = ProxyDatabase {
        host: "sb.proxy-abc.eu-west-1.rds.amazonaws.com".into(),
        port: 3306,
        name: "slot_booking".into(),
        user: "slot admin".into(),
        secret_arn: "arn:aws:secretsmanager:eu-west-1:1:secret:x".into(),
    }
    .url();
    assert_eq!(
        url,
        "mysql://slot%20admin@sb.proxy-abc.eu-west-1.rds.amazonaws.com:3306/slot_booking\
         ?ssl-mode=VERIFY_IDENTITY"
    );
}
use std::collections::HashMap;

pub(super) fn settings(vars: &[(&str, &str)]) -> Result<Settings, ConfigError> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Settings::from_lookup(|key| vars.get(key).cloned())
}

/// What the template's Globals give every function.
const AWS: &[(&str, &str)] = &[
    ("DB_HOST", "sb.proxy-abc.eu-west-1.rds.amazonaws.com"),
    ("DB_PORT", "3306"),
    ("DB_NAME", "slot_booking"),
    ("DB_USER", "slotadmin"),
    (
        "DB_SECRET_ARN",
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sb-db-AbCdEf",
    ),
    ("DATABASE_URL", ""),
    ("REDIS_URL", ""),
    ("CACHE_NAME", "sb-cache"),
    ("SLOT_AVAILABILITY_CACHE_TTL", "10"),
    ("HOLD_TTL_SECONDS", "300"),
];

fn aws_without(key: &str) -> Vec<(&'static str, &'static str)> {
    AWS.iter().copied().filter(|(k, _)| *k != key).collect()
}

fn aws_with(key: &'static str, value: &'static str) -> Vec<(&'static str, &'static str)> {
    let mut vars = aws_without(key);
    vars.push((key, value));
    vars
}

#[test]
fn defaults_match_the_local_services() {
    let settings = settings(&[]).unwrap();
    assert_eq!(
        settings.database,
        DatabaseSource::Url(DEFAULT_DATABASE_URL.into())
    );
    assert_eq!(settings.cache, CacheSource::Url(DEFAULT_REDIS_URL.into()));
    assert_eq!(settings.cache_ttl, Duration::from_secs(10));
    assert_eq!(settings.hold_ttl, Duration::from_secs(300));
    assert!(!settings.needs_aws());
}

#[test]
fn keys_are_required_unless_open_mode_is_asked_for_by_name() {
    let access = |vars: &[(&str, &str)]| settings(vars).map(|s| s.access);
    assert_eq!(access(&[]).unwrap(), Access::default());
    assert_eq!(Access::default().mode, AuthMode::ApiKey);
    assert_eq!(Access::default().rate_limit_per_second, 20);
    assert_eq!(
        access(&[("AUTH_MODE", "open")]).unwrap().mode,
        AuthMode::Open
    );
    assert_eq!(
        access(&[("AUTH_MODE", "api-key")]).unwrap().mode,
        AuthMode::ApiKey
    );
    for bad in ["Open", "none", "apikey", "off"] {
        assert_eq!(access(&[("AUTH_MODE", bad)]).unwrap_err().key, "AUTH_MODE");
    }
    let rate = |raw| access(&[("RATE_LIMIT_PER_SECOND", raw)]);
    assert_eq!(rate("0").unwrap().rate_limit_per_second, 0);
    assert_eq!(rate("5").unwrap().rate_limit_per_second, 5);
    for bad in ["-1", "2.5", "x", "1000001"] {
        assert_eq!(rate(bad).unwrap_err().key, "RATE_LIMIT_PER_SECOND");
    }
}

#[test]
fn cache_ttl_outside_five_to_fifteen_seconds_is_refused() {
    for bad in ["4", "16", "abc", "", "-5", "10.5"] {
        let err = settings(&[("SLOT_AVAILABILITY_CACHE_TTL", bad)]).unwrap_err();
        assert_eq!(err.key, "SLOT_AVAILABILITY_CACHE_TTL");
        assert!(err.to_string().contains("from 5 to 15"), "{err}");
        assert!(!err.to_string().contains('\n'), "one line: {err}");
    }
    for good in ["5", "15", " 12 "] {
        assert!(settings(&[("SLOT_AVAILABILITY_CACHE_TTL", good)]).is_ok());
    }
}

#[test]
fn a_zero_hold_ttl_is_refused() {
    assert!(settings(&[("HOLD_TTL_SECONDS", "0")]).is_err());
    assert_eq!(
        settings(&[("HOLD_TTL_SECONDS", "60")]).unwrap().hold_ttl,
        Duration::from_secs(60)
    );
}

#[test]
fn an_empty_redis_url_turns_the_cache_off() {
    assert_eq!(
        settings(&[("REDIS_URL", "")]).unwrap().cache,
        CacheSource::Off
    );
    assert_eq!(
        settings(&[("REDIS_URL", ""), ("CACHE_NAME", "")])
            .unwrap()
            .cache,
        CacheSource::Off
    );
    assert!(settings(&[("REDIS_URL", "http://x")]).is_err());
}

#[test]
fn the_template_environment_selects_rds_proxy_mode_and_discovery() {
    let settings = settings(AWS).unwrap();
    assert_eq!(
        settings.database,
        DatabaseSource::Proxy(ProxyDatabase {
            host: "sb.proxy-abc.eu-west-1.rds.amazonaws.com".into(),
            port: 3306,
            name: "slot_booking".into(),
            user: "slotadmin".into(),
            secret_arn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sb-db-AbCdEf".into(),
        })
    );
    assert_eq!(settings.cache, CacheSource::Discover("sb-cache".into()));
    assert!(settings.needs_aws());
}

#[test]
fn an_empty_database_url_counts_as_unset() {
    // Empty DATABASE_URL and no DB_HOST: the local default, not an error.
    assert_eq!(
        settings(&[("DATABASE_URL", "")]).unwrap().database,
        DatabaseSource::Url(DEFAULT_DATABASE_URL.into())
    );
    // Empty DATABASE_URL with DB_HOST: RDS Proxy mode.
    assert!(matches!(
        settings(AWS).unwrap().database,
        DatabaseSource::Proxy(_)
    ));
    // A non-empty DATABASE_URL wins over DB_* (sam local, tests).
    let url = "mysql://app@127.0.0.1:3306/local";
    assert_eq!(
        settings(&aws_with("DATABASE_URL", url)).unwrap().database,
        DatabaseSource::Url(url.into())
    );
    // An empty DB_HOST is no DB_HOST.
    assert_eq!(
        settings(&aws_with("DB_HOST", "")).unwrap().database,
        DatabaseSource::Url(DEFAULT_DATABASE_URL.into())
    );
}

#[test]
fn rds_proxy_mode_requires_its_variables() {
    for key in ["DB_NAME", "DB_USER", "DB_SECRET_ARN"] {
        for vars in [aws_without(key), aws_with(key, "")] {
            let err = settings(&vars).unwrap_err();
            assert_eq!(err.key, key);
            assert_eq!(
                err.to_string(),
                format!(
                    "invalid configuration: {key} is not set: \
                     required when DB_HOST is set and DATABASE_URL is not"
                )
            );
        }
    }
    // DB_PORT defaults to 3306, and must be a port when given.
    let Ok(Settings {
        database: DatabaseSource::Proxy(proxy),
        ..
    }) = settings(&aws_without("DB_PORT"))
    else {
        panic!("proxy mode without DB_PORT")
    };
    assert_eq!(proxy.port, 3306);
    for bad in ["0", "65536", "x", "-1"] {
        let err = settings(&aws_with("DB_PORT", bad)).unwrap_err();
        assert_eq!(err.key, "DB_PORT", "{bad}");
    }
    // Without DB_HOST, the other DB_* variables are not needed.
    assert!(settings(&[("DB_NAME", "x")]).is_ok());
}

#[test]
fn cache_name_is_used_only_when_redis_url_is_empty() {
    // REDIS_URL non-empty wins.
    let url = "rediss://cache.example:6379";
    assert_eq!(
        settings(&aws_with("REDIS_URL", url)).unwrap().cache,
        CacheSource::Url(url.into())
    );
    // REDIS_URL empty or unset: discovery.
    assert_eq!(
        settings(&aws_without("REDIS_URL")).unwrap().cache,
        CacheSource::Discover("sb-cache".into())
    );
    assert_eq!(
        settings(&[("CACHE_NAME", "c")]).unwrap().cache,
        CacheSource::Discover("c".into())
    );
    // REDIS_URL empty, CACHE_NAME empty: off (MigrateFunction).
    assert_eq!(
        settings(&aws_with("CACHE_NAME", "")).unwrap().cache,
        CacheSource::Off
    );
    // Discovery alone needs AWS.
    assert!(settings(&[("CACHE_NAME", "c")]).unwrap().needs_aws());
}

#[test]
fn a_database_password_never_reaches_the_error_line() {
    let err = settings(&[("DATABASE_URL", "postgres://app:s3cret@db/x")]).unwrap_err();
    assert!(!err.to_string().contains("s3cret"), "{err}");
    let err = settings(&[("REDIS_URL", "http://u:s3cret@cache:6379")]).unwrap_err();
    assert!(!err.to_string().contains("s3cret"), "{err}");
    assert_eq!(
        redact_url("mysql://app:s3cret@db:3306/x"),
        "mysql://app:***@db:3306/x"
    );
    assert_eq!(
        redact_url("mysql://app:s3@cr@t@db:3306/x"),
        "mysql://app:***@db:3306/x"
    );
    assert_eq!(
        redact_url("mysql://app@db:3306/x?ssl-mode=VERIFY_IDENTITY"),
        "mysql://app@db:3306/x?ssl-mode=VERIFY_IDENTITY"
    );
    assert_eq!(format!("{:?}", Secret::new("s3cret")), "Secret(***)");
}

#[test]
fn local_tools_refuse_rds_proxy_mode() {
    let err = settings(AWS).unwrap().local().unwrap_err();
    assert_eq!(err.key, "DATABASE_URL");
    let local = settings(&[("DATABASE_URL", "mysql://root@h:3306/db")])
        .unwrap()
        .local()
        .unwrap();
    assert_eq!(local.database_url, "mysql://root@h:3306/db");
    assert_eq!(local.database_name(), "db");
    assert_eq!(local.redis_url.as_deref(), Some(DEFAULT_REDIS_URL));
}

#[test]
fn the_cache_namespace_puts_the_stack_in_front_of_the_database() {
    let namespace = |vars: &[(&str, &str)]| settings(vars).map(|s| s.cache_namespace);
    // Locally, and in every test: the database's name, as before.
    assert_eq!(namespace(&[]).unwrap(), "slot_booking");
    assert_eq!(
        namespace(&[("DATABASE_URL", "mysql://root@h:3306/sb_test_1?x=y")]).unwrap(),
        "sb_test_1"
    );
    assert_eq!(
        namespace(&[("CACHE_NAMESPACE", "")]).unwrap(),
        "slot_booking"
    );
    // The template: the stack's name, then DB_NAME (two stacks on one
    // cache, or two stages with one database name, never share a key).
    assert_eq!(
        namespace(&aws_with("CACHE_NAMESPACE", "sb-prod")).unwrap(),
        "sb-prod:slot_booking"
    );
    assert_eq!(
        namespace(&aws_with("CACHE_NAMESPACE", "Sb-Stage.2_x")).unwrap(),
        "Sb-Stage.2_x:slot_booking"
    );
    let long = "a".repeat(129);
    for bad in [
        "{sb}",
        "sb prod",
        "sb:prod",
        "-sb",
        "sb/x",
        "é",
        long.as_str(),
    ] {
        let err = settings(&[("CACHE_NAMESPACE", bad)]).unwrap_err();
        assert_eq!(err.key, "CACHE_NAMESPACE", "{bad}");
    }
    // It reaches the resolved configuration.
    let local = settings(&[("CACHE_NAMESPACE", "sb")])
        .unwrap()
        .local()
        .unwrap();
    assert_eq!(local.cache_namespace, "sb:slot_booking");
}

#[test]
fn a_cache_user_needs_its_secret_and_tls() {
    const ARN: &str = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sb-cache-AbCdEf";
    let url = "rediss://sb-cache.serverless.euw1.cache.amazonaws.com:6379";
    let with_user = settings(&[
        ("REDIS_URL", url),
        ("CACHE_USER", "sb-app"),
        ("CACHE_SECRET_ARN", ARN),
    ])
    .unwrap();
    assert_eq!(
        with_user.cache_user,
        Some(CacheUser {
            name: "sb-app".into(),
            secret_arn: ARN.into()
        })
    );
    // Its password is in Secrets Manager: resolving needs AWS, and a local
    // configuration has no cache rather than a cache without its password.
    assert!(with_user.needs_aws());
    let local = with_user.local().unwrap();
    assert_eq!((local.redis_url, local.cache_user), (None, None));

    // Both or neither.
    let err = settings(&[("CACHE_USER", "sb-app")]).unwrap_err();
    assert_eq!(err.key, "CACHE_SECRET_ARN");
    let err = settings(&[("CACHE_SECRET_ARN", ARN), ("CACHE_USER", "")]).unwrap_err();
    assert_eq!(err.key, "CACHE_USER");

    // Never a password over plaintext.
    let err = settings(&[
        ("REDIS_URL", "redis://sb-cache.example:6379"),
        ("CACHE_USER", "sb-app"),
        ("CACHE_SECRET_ARN", ARN),
    ])
    .unwrap_err();
    assert_eq!(err.key, "REDIS_URL");
    assert!(err.to_string().contains("rediss://"), "{err}");

    // Discovery (always rediss://) and an unused cache take a user too.
    let discover = settings(&aws_with("CACHE_USER", "sb-app"))
        .map(|_| ())
        .unwrap_err();
    assert_eq!(discover.key, "CACHE_SECRET_ARN");
    let mut vars = aws_with("CACHE_USER", "sb-app");
    vars.push(("CACHE_SECRET_ARN", ARN));
    assert!(settings(&vars).unwrap().cache_user.is_some());
    let off = settings(&[
        ("REDIS_URL", ""),
        ("CACHE_USER", "sb-app"),
        ("CACHE_SECRET_ARN", ARN),
    ])
    .unwrap();
    assert!(!off.needs_aws(), "no cache: no secret to read");
}
