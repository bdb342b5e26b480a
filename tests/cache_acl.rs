//! The cache user's access string, as template.yaml gives it to
//! ElastiCache, on a Redis of the test's own: the availability cache works
//! through it in full (hit, miss, invalidation: GET, SET, DEL, INCR, Lua
//! scripts, MULTI/EXEC) and so do rate limits (TIME in a script), anything
//! else is refused, and a connection that has
//! not authenticated as that user (the disabled `default` user) gets
//! nothing.

use redis::aio::MultiplexedConnection;
use shared::cache::{self, Admission, AvailabilityCache, CacheSettings, Limit};
use shared::clients::ClientId;
use shared::config::Secret;
use shared::{App, Booking, Config, http};
use slot_booking_tests::private_redis::PrivateRedis;
use slot_booking_tests::*;
use std::time::Duration;

const USER: &str = "app-1-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
const PASSWORD: &str = "CacheUserPassword0123456789abcd";

/// The `AccessString` of `CacheAppUser` in template.yaml.
fn template_access_string() -> String {
    let template =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml"))
            .expect("template.yaml");
    let user = template
        .split_once("\n  CacheAppUser:\n")
        .expect("CacheAppUser in template.yaml")
        .1;
    let block = user.split("\n\n").next().unwrap_or_default();
    block
        .lines()
        .find_map(|line| line.trim().strip_prefix("AccessString:"))
        .expect("CacheAppUser has an AccessString")
        .trim()
        .to_string()
}

async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

/// An admin user for the test, then the template's users: the app user
/// with its rules and password, `default` off (as the Valkey user group
/// leaves it).
async fn configure(server: &PrivateRedis) {
    let mut conn = connect(&server.url()).await;
    let () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "admin",
            "on",
            ">admin-password-0123",
            "~*",
            "&*",
            "+@all",
        ])
        .query_async(&mut conn)
        .await
        .expect("admin user");
    let mut rules = vec!["SETUSER".to_string(), USER.to_string(), "reset".into()];
    rules.extend(
        template_access_string()
            .split_whitespace()
            .map(String::from),
    );
    rules.push(format!(">{PASSWORD}"));
    let () = redis::cmd("ACL")
        .arg(&rules)
        .query_async(&mut conn)
        .await
        .unwrap_or_else(|err| panic!("the template's access string {rules:?}: {err}"));
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "off", "resetkeys", "-@all"])
        .query_async(&mut conn)
        .await
        .expect("default off");
}

fn admin_url(server: &PrivateRedis) -> String {
    server
        .url()
        .replacen("redis://", "redis://admin:admin-password-0123@", 1)
}

#[tokio::test]
async fn the_cache_works_in_full_as_the_template_user_and_nothing_else_does() {
    let access = template_access_string();
    assert!(access.starts_with("on ~slot-booking:* -@all "), "{access}");
    let server = PrivateRedis::start().await;
    configure(&server).await;
    let db = TestDb::new().await;

    // The app's client, authenticating as the template's user.
    let password = Secret::new(PASSWORD);
    let client = cache::client(&server.url(), Some((USER, &password))).expect("client");
    let settings = CacheSettings {
        // Room for a loaded machine: a slow answer must not pass for a
        // refused command here.
        timeout: Duration::from_secs(2),
        ..CacheSettings::new(Duration::from_secs(10))
    };
    let cache = AvailabilityCache::with_client(client, &db.name, settings);
    assert!(cache.ping().await, "PING as the app user");
    let config = Config {
        redis_url: Some(server.url()),
        cache_user: Some(USER.into()),
        ..db.config(Duration::from_secs(300))
    };
    let pool = shared::db::connect_lazy(&db.url, 1).expect("pool");
    let booking = Booking::new(pool, config.hold_ttl, Some(cache));
    let app = App::assemble(config, booking);
    let slot = db.insert_slot(3).await;
    let x_cache = |response: lambda_http::Response<lambda_http::Body>| {
        let value = response.headers()["x-cache"].to_str().unwrap().to_string();
        assert_eq!(read(response).0, 200);
        value
    };
    let availability = || async {
        http::availability(&app, availability_request())
            .await
            .unwrap()
    };
    // Miss (lock, recompute, store script), then hit; a confirm invalidates
    // (MULTI: INCR + DEL) and the next read recomputes.
    assert_eq!(x_cache(availability().await), "miss");
    assert_eq!(x_cache(availability().await), "hit");
    hold_and_confirm(&app, slot).await;
    assert_eq!(x_cache(availability().await), "miss");
    assert_eq!(x_cache(availability().await), "hit");
    // The rate limiter's script (TIME, GET, SET PX): one client at 1/s
    // has a burst of 2, then waits; refused only because it really is over.
    let cache = app.booking.cache().expect("cache");
    let limit = Limit {
        client: ClientId(7),
        rate: 1,
    };
    assert_eq!(cache.admit(limit).await, Admission::Admitted);
    assert_eq!(cache.admit(limit).await, Admission::Admitted);
    assert!(
        matches!(cache.admit(limit).await, Admission::Refused(_)),
        "over the burst"
    );
    // The keys are where the template lets them be.
    let mut admin = connect(&admin_url(&server)).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut admin)
        .await
        .expect("KEYS as admin");
    assert!(!keys.is_empty());
    assert!(
        keys.iter().all(|k| k.starts_with("slot-booking:")),
        "{keys:?}"
    );

    // As the app user, nothing beyond that.
    let app_url = server
        .url()
        .replacen("redis://", &format!("redis://{USER}:{PASSWORD}@"), 1);
    let mut conn = connect(&app_url).await;
    for refused in [
        redis::cmd("SET").arg("elsewhere").arg("1").clone(),
        redis::cmd("GET").arg("elsewhere").clone(),
        redis::cmd("KEYS").arg("*").clone(),
        redis::cmd("FLUSHALL").clone(),
        redis::cmd("CONFIG").arg("GET").arg("*").clone(),
        redis::cmd("ACL").arg("LIST").clone(),
        // +@connection, but dangerous: removed again.
        redis::cmd("CLIENT").arg("LIST").clone(),
        redis::cmd("CLIENT").arg("KILL").arg("ID").arg("1").clone(),
    ] {
        let err = refused
            .query_async::<redis::Value>(&mut conn)
            .await
            .expect_err("refused");
        assert!(err.to_string().to_uppercase().contains("NOPERM"), "{err}");
    }

    // Without AUTH as that user: nothing at all.
    let mut anonymous = connect(&server.url()).await;
    let err = redis::cmd("PING")
        .query_async::<String>(&mut anonymous)
        .await
        .expect_err("default is off");
    assert!(err.to_string().contains("NOAUTH"), "{err}");
    let err = redis::Client::open(server.url().replacen(
        "redis://",
        &format!("redis://default:{PASSWORD}@"),
        1,
    ))
    .unwrap()
    .get_multiplexed_async_connection()
    .await
    .expect_err("default cannot log in");
    assert!(
        err.to_string().to_lowercase().contains("auth") || err.to_string().contains("WRONGPASS"),
        "{err}"
    );
}
