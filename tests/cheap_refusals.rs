//! Refusals are cheap (SPEC §16): a key refused as unknown is refused again
//! without a database round trip for 10 s, and a client refused with 429 is
//! refused again without a cache round trip until its `Retry-After` has
//! passed. Each is shown with the round trip made impossible: the table
//! locked, the cache cut off.

use shared::clients::{Needs, Role};
use shared::config::AuthMode;
use shared::error::{Error, Unauthenticated};
use shared::http;
use slot_booking_tests::keys::authorized;
use slot_booking_tests::proxy::{Mode, Proxy};
use slot_booking_tests::*;
use sqlx::Executor;
use std::time::Duration;

#[tokio::test]
async fn an_unknown_key_is_refused_again_without_the_database() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let known = db.client("shop", Role::Booker, None).await;
    let unknown = "Bearer sb_no_client_has_this_key_00000000000000";
    let other = "Bearer sb_nor_this_one_000000000000000000000000000";
    let soon = || tokio::time::Instant::now() + Duration::from_millis(800);
    let first = app
        .gate
        .identify(Some(unknown), Needs::Booker, soon())
        .await;
    assert!(
        matches!(
            first,
            Err(Error::Unauthenticated(Unauthenticated::Rejected))
        ),
        "{first:?}"
    );
    let revoked = db.client("gone", Role::Booker, None).await;
    sqlx::query("UPDATE api_clients SET revoked_at = UTC_TIMESTAMP(6) WHERE id = ?")
        .bind(revoked.id.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let gone = app
        .gate
        .identify(Some(&revoked.bearer()), Needs::Booker, soon())
        .await;
    assert!(matches!(gone, Err(Error::Unauthenticated(_))), "{gone:?}");

    // Every look-up now waits behind a table lock.
    let mut blocker = db.admin.acquire().await.expect("connection");
    blocker
        .execute("LOCK TABLES api_clients WRITE")
        .await
        .expect("lock");
    let again = app
        .gate
        .identify(Some(unknown), Needs::Booker, soon())
        .await;
    let gone_again = app
        .gate
        .identify(Some(&revoked.bearer()), Needs::Booker, soon())
        .await;
    let fresh = app.gate.identify(Some(other), Needs::Booker, soon()).await;
    let known_key = app
        .gate
        .identify(Some(&known.bearer()), Needs::Booker, soon())
        .await;
    blocker.execute("UNLOCK TABLES").await.expect("unlock");
    drop(blocker);
    assert!(
        matches!(
            again,
            Err(Error::Unauthenticated(Unauthenticated::Rejected))
        ),
        "the same unknown key, no look-up: {again:?}"
    );
    assert!(
        matches!(gone_again, Err(Error::Unauthenticated(_))),
        "{gone_again:?}"
    );
    assert!(
        matches!(fresh, Err(Error::Unavailable(_))),
        "another key needs the database, which is locked: {fresh:?}"
    );
    assert!(
        matches!(known_key, Err(Error::Unavailable(_))),
        "a good key is never refused from memory: {known_key:?}"
    );
    db.drop().await;
}

#[tokio::test]
async fn a_client_refused_with_429_is_refused_again_without_the_cache() {
    let db = TestDb::new().await;
    let redis = redis::Client::open(redis_url()).unwrap();
    let info = redis.get_connection_info().addr().to_string();
    let (host, port) = info.rsplit_once(':').expect("host:port");
    let proxy = Proxy::start_to(host, port.parse().unwrap()).await;
    // One request a second, a burst of two.
    let app = db.keyed_cached_app(&format!("redis://{}", proxy.addr()), 1);
    let client = db.client("eager", Role::Booker, None).await;
    let send = || async {
        let request = authorized(availability_request(), Some(&client.bearer()));
        let response = http::availability(&app, request).await.unwrap();
        let retry_after = response.headers().get("retry-after").cloned();
        (response.status().as_u16(), retry_after)
    };
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(send().await.0);
    }
    assert_eq!(statuses, [200, 200, 429], "the burst, then the limit");
    // The cache cut off: asking it would fail open and admit.
    proxy.set(Mode::Refuse).await;
    let (status, retry_after) = send().await;
    assert_eq!(
        status, 429,
        "refused from memory, not admitted by a cache it cannot ask"
    );
    assert!(retry_after.is_some());
    proxy.set(Mode::Up).await;
    db.drop().await;
}
