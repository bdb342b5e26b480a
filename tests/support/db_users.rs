//! The application's database users on the shared test server, as the
//! migrate function makes them: names of a test's own (dropped however it
//! ends), the migrate decision run with them, logins as them, and the
//! server's refusals told apart from other errors.

use crate::{TestDb, server_url};
use shared::config::{Access, AuthMode, Secret};
use shared::migrate::duty::Duty;
use shared::migrate::users::AppUser;
use shared::migrate::{self, Request, Status, Target};
use shared::{App, Config};
use sqlx::mysql::{MySqlConnectOptions, MySqlDatabaseError};
use sqlx::{ConnectOptions, Connection, Executor, MySqlConnection};
use std::str::FromStr;
use std::time::Duration;

/// A user of this test's own on the shared server, with its duty and
/// password, dropped however the test ends.
pub struct UniqueUser {
    pub name: String,
    pub duty: Duty,
    pub password: String,
    server: String,
}

impl UniqueUser {
    pub fn new(duty: Duty, password: &str) -> Self {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let prefix = match duty {
            Duty::Booking => "sb_book",
            Duty::ClientAdmin => "sb_clients",
        };
        Self {
            name: format!("{prefix}_{}", &suffix[..12]),
            duty,
            password: password.to_string(),
            server: server_url(),
        }
    }

    pub fn app_user(&self) -> AppUser {
        AppUser::new(&self.name, Secret::new(&self.password), self.duty).expect("user")
    }

    /// `mysql://user:password@host:port/database` on the test server.
    pub fn url(&self, db: &TestDb) -> String {
        self.url_with(db, &self.password)
    }

    fn url_with(&self, db: &TestDb, password: &str) -> String {
        let server = MySqlConnectOptions::from_str(&db.server).expect("server");
        format!(
            "mysql://{}:{}@{}:{}/{}",
            self.name,
            password,
            server.get_host(),
            server.get_port(),
            db.name
        )
    }

    pub async fn connect(&self, db: &TestDb) -> Result<MySqlConnection, sqlx::Error> {
        self.connect_with(db, &self.password).await
    }

    /// A login with another password than the user's (an old one).
    pub async fn connect_with(
        &self,
        db: &TestDb,
        password: &str,
    ) -> Result<MySqlConnection, sqlx::Error> {
        MySqlConnectOptions::from_str(&self.url_with(db, password))?
            .connect()
            .await
    }

    /// The service connected as this user: keys required, no cache.
    pub fn app(&self, db: &TestDb) -> App {
        App::new(Config {
            database_url: self.url(db),
            access: Access {
                mode: AuthMode::ApiKey,
                ..Access::default()
            },
            ..db.config(Duration::from_secs(300))
        })
        .expect("app")
    }

    /// `'name'@'%'`.
    pub fn account(&self) -> String {
        format!("'{}'@'%'", self.name)
    }
}

impl Drop for UniqueUser {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        // A runtime of its own: Drop may run inside the test's runtime.
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(async {
                    let mut conn = MySqlConnectOptions::from_str(&server)?.connect().await?;
                    conn.execute(sqlx::AssertSqlSafe(format!(
                        "DROP USER IF EXISTS '{name}'@'%'"
                    )))
                    .await?;
                    conn.close().await
                })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test user {}: {dropped:?}", self.name);
        }
    }
}

/// Runs the migrate function's decision (an Update, as on every deploy)
/// keeping `users`; the schema is already in place. The reason on SUCCESS,
/// which never shows a password.
pub async fn deploy(db: &TestDb, users: &[&UniqueUser]) -> String {
    let target = Target {
        options: shared::db::url_options(&db.url).expect("options"),
        users: users.iter().map(|user| user.app_user()).collect(),
        bootstrap_admin: None,
    };
    let reason = decide(target).await.expect("SUCCESS");
    for user in users {
        assert!(!reason.contains(&user.password), "{reason}");
    }
    reason
}

/// The migrate function's decision on an Update: `Ok(reason)` on SUCCESS.
pub async fn decide(target: Target) -> Result<String, String> {
    let request = Request::from_event(&serde_json::json!({
        "RequestType": "Update",
        "ResponseURL": "https://example.invalid/r",
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/sb/1",
        "RequestId": "req-users",
        "LogicalResourceId": "Migrations",
    }));
    let response =
        migrate::decide(&request, async move { Ok(target) }, Duration::from_secs(30)).await;
    match response.status {
        Status::Success => Ok(response.reason),
        Status::Failed => Err(response.reason),
    }
}

/// The server's error number when it refused, `None` when it ran the
/// statement or failed it for another reason than a privilege (a missing
/// default, a bad value: the privilege was there).
pub fn denied<T>(result: &Result<T, sqlx::Error>) -> Option<u16> {
    let number = result
        .as_ref()
        .err()?
        .as_database_error()?
        .try_downcast_ref::<MySqlDatabaseError>()?
        .number();
    // 1044/1045 database, 1142 table, 1143 column, 1370 routine, 1227
    // "you need (at least one of) the … privilege", 1095 another's thread,
    // 1410 GRANT to itself.
    matches!(
        number,
        1044 | 1045 | 1095 | 1142 | 1143 | 1227 | 1370 | 1410
    )
    .then_some(number)
}
