//! `make scenarios`: the seed's concurrency table over HTTP against a
//! running API (`make dev`). Creates its own slots in `DATABASE_URL`'s
//! database, and its own booker client, `seed-scenarios`, with a new key
//! each run and no rate limit: the table is about concurrency, and 80
//! requests in a second would be over the default 20/s (SPEC §8). Prints
//! one line per scenario; exits 1 if any fails.

use shared::clients::Role;
use shared::clients::install::install_key;
use shared::clients::key::ApiKey;
use slot_booking_tests::scenarios;

#[tokio::main]
async fn main() {
    let base = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:9000".into());
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| shared::config::DEFAULT_DATABASE_URL.to_string());
    let admin = sqlx::MySqlPool::connect(&url).await.unwrap_or_else(|err| {
        eprintln!("seed-scenarios: cannot reach the database: {err}");
        std::process::exit(2);
    });
    let key = scenarios_client(&admin).await;
    let target = scenarios::Target {
        base: base.trim_end_matches('/'),
        key: Some(key.expose()),
    };
    let outcomes = scenarios::seed_table(&target, &admin).await;
    for outcome in &outcomes {
        println!("{outcome}");
    }
    if !outcomes.iter().all(scenarios::Outcome::holds) {
        std::process::exit(1);
    }
}

/// The `seed-scenarios` booker, with a fresh key (its hash replaces the
/// last run's) and no rate limit.
async fn scenarios_client(admin: &sqlx::MySqlPool) -> ApiKey {
    let key = ApiKey::generate().expect("randomness");
    let id = install_key(admin, "seed-scenarios", Role::Booker, &key)
        .await
        .unwrap_or_else(|err| {
            eprintln!("seed-scenarios: cannot create its client (migrated?): {err}");
            std::process::exit(2);
        });
    sqlx::query("UPDATE api_clients SET rate_limit_per_second = 0 WHERE id = ?")
        .bind(id.0)
        .execute(admin)
        .await
        .expect("unlimited");
    key
}
