//! `make smoke` against `make dev`: the real `make dev` (a free port, a
//! database of its own, its dev admin's key) and the real smoke binary,
//! which must pass every route and leave nothing behind.

use slot_booking_tests::TestDb;
use slot_booking_tests::dev::{dev_key, ready, start_dev, stop};
use slot_booking_tests::private_server::free_port;
use slot_booking_tests::watch::workspace_root;
use yaml_rust2::YamlLoader;

/// `"METHOD /path "` of every operation of openapi.yaml.
fn documented_routes() -> Vec<String> {
    let file = workspace_root().join("openapi.yaml");
    let text = std::fs::read_to_string(&file).expect("openapi.yaml");
    let docs = YamlLoader::load_from_str(&text).expect("openapi.yaml is YAML");
    let paths = docs[0]["paths"].as_hash().expect("paths");
    let mut routes = Vec::new();
    for (path, item) in paths {
        for (method, _) in item.as_hash().expect("a path item") {
            let method = method.as_str().unwrap_or_default();
            if ["get", "post", "put", "patch", "delete"].contains(&method) {
                let path = path.as_str().unwrap_or_default();
                routes.push(format!("{} {path} ", method.to_uppercase()));
            }
        }
    }
    assert!(routes.len() >= 15, "{routes:?}");
    routes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_smoke_passes_every_route_of_make_dev_and_cleans_up() {
    let db = TestDb::new().await;
    let port = free_port();
    let root = workspace_root();
    let log = root.join(format!("target/smoke-dev-{port}.log"));
    let keys = root.join(format!("target/smoke-dev-{port}.keys.env"));
    let mut dev = start_dev(port, &db.url, &log, &keys, &[]);
    let base = format!("http://127.0.0.1:{port}");
    let served = ready(&base, &mut dev).await;
    let smoke = match (&served, dev_key(&keys, "ADMIN_KEY")) {
        (Ok(()), Some(admin)) => tokio::process::Command::new(env!("CARGO_BIN_EXE_smoke"))
            .args([&base, &admin])
            .output()
            .await
            .ok(),
        _ => None,
    };
    stop(&mut dev).await;
    let _ = std::fs::remove_file(&keys);
    served.unwrap_or_else(|e| panic!("{e}; see {}", log.display()));
    let smoke = smoke.expect("make dev wrote an ADMIN_KEY and the smoke ran");
    let out = String::from_utf8_lossy(&smoke.stdout);
    let err = String::from_utf8_lossy(&smoke.stderr);
    assert!(smoke.status.success(), "smoke failed:\n{out}\n{err}");
    // Every route of openapi.yaml, and the $default route (404 and 405).
    for route in documented_routes()
        .iter()
        .map(String::as_str)
        .chain(["GET $default ", "PUT $default "])
    {
        assert!(
            out.contains(&format!("ok  {route}")),
            "no step {route}:\n{out}"
        );
    }
    // What it made is gone: no slot, and its client revoked.
    let slots: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM slots")
        .fetch_one(&db.admin)
        .await
        .expect("slots");
    let live: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM api_clients WHERE name LIKE 'smoke-%' AND revoked_at IS NULL",
    )
    .fetch_one(&db.admin)
    .await
    .expect("clients");
    // devdb seeds its five demo slots; the smoke's is gone.
    assert_eq!((slots, live), (5, 0), "left behind:\n{out}");
    db.drop().await;
}
