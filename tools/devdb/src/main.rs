//! `devdb`: prepares the local database for `make dev`.
//!
//! Creates the database named in `DATABASE_URL` if it is missing, runs the
//! migrations, seeds a few demo slots when none is still to start, and makes sure
//! the dev admin and dev booker clients exist (their keys: `keys`).

mod keys;

use sqlx::mysql::MySqlConnectOptions;
use sqlx::{ConnectOptions, Connection, Executor};
use std::str::FromStr;

#[tokio::main]
async fn main() {
    if let Err(err) = run().await {
        eprintln!("devdb: {err}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let config = shared::Config::from_env()?;
    let options = MySqlConnectOptions::from_str(&config.database_url)?;
    let name = options
        .get_database()
        .ok_or("DATABASE_URL names no database")?
        .to_string();
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("database name {name:?} must be letters, digits and _").into());
    }

    let mut server = options.clone().database("").connect().await?;
    // The name was checked above: it is safe to splice.
    let create = format!("CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4");
    server.execute(sqlx::AssertSqlSafe(create)).await?;
    server.close().await?;

    let mut conn = options.connect().await?;
    // The deployed runner: a half-applied migration is resumed, not Dirty.
    let migrator = shared::migrate::migrator();
    shared::migrate::runner::run(&mut conn, &migrator, std::time::Duration::from_secs(30)).await?;
    // A slot that has started takes no holds (SPEC §9): a dev database
    // from an earlier day gets tomorrow's windows again.
    let open: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM slots WHERE starts_at > UTC_TIMESTAMP()")
            .fetch_one(&mut conn)
            .await?;
    if open == 0 {
        // Tomorrow's dock windows, one hour each, with varied capacity,
        // made by the admin API's own code path (`POST /slots`).
        let app = shared::App::new(config.clone())?;
        let day = (chrono::Utc::now().date_naive() + chrono::Days::new(1))
            .and_time(chrono::NaiveTime::MIN)
            .and_utc();
        let windows: Vec<shared::slots::NewSlot> = [(8, 10), (9, 5), (10, 1), (11, 3), (12, 20)]
            .into_iter()
            .map(|(hour, capacity)| shared::slots::NewSlot {
                starts_at: day + chrono::Duration::hours(hour),
                ends_at: day + chrono::Duration::hours(hour + 1),
                capacity,
                max_seats_per_client: None,
            })
            .collect();
        app.slots.create(&windows).await?;
        app.slots.pool().close().await;
        println!("devdb: seeded 5 demo slots in {name}");
    }
    let pool = sqlx::MySqlPool::connect_with(options).await?;
    keys::ensure(&pool).await?;
    pool.close().await;
    println!("devdb: database {name} is migrated and ready");
    Ok(())
}
