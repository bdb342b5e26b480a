//! `make scenarios`: the seed's concurrency table over HTTP against a
//! running API (`make dev`). Creates its own slots in `DATABASE_URL`'s
//! database; prints one line per scenario; exits 1 if any fails.

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
    let outcomes = scenarios::seed_table(base.trim_end_matches('/'), &admin).await;
    for outcome in &outcomes {
        println!("{outcome}");
    }
    if !outcomes.iter().all(scenarios::Outcome::holds) {
        std::process::exit(1);
    }
}
