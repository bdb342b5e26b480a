//! The `migrate` function as CloudFormation drives it: a custom resource
//! event in, a response PUT to the pre-signed `ResponseURL` (here a local
//! HTTP server standing in for S3), against a real, initially empty
//! database.

use serde_json::{Value, json};
use shared::migrate::{self, PHYSICAL_RESOURCE_ID, Status};
use slot_booking_tests::server_url;
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor, MySqlPool};
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// A request the stand-in for S3 received.
#[derive(Debug, Clone)]
struct Put {
    method: String,
    target: String,
    headers: HashMap<String, String>,
    body: Value,
}

/// Answers every request 200 and keeps it.
struct ResponseUrl {
    url: String,
    received: Arc<Mutex<Vec<Put>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ResponseUrl {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ResponseUrl {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        // A path and query shaped like a pre-signed S3 URL.
        let url = format!(
            "http://{}/cfn-response/arn%3Aaws%3Acloudformation/req-1\
             ?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=7200&X-Amz-Signature=abc123",
            listener.local_addr().expect("addr")
        );
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut reader = BufReader::new(read);
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let mut headers = HashMap::new();
                    loop {
                        let mut line = String::new();
                        reader.read_line(&mut line).await.expect("header");
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        let (name, value) = line.split_once(':').expect("header line");
                        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
                    }
                    let length: usize = headers["content-length"].parse().expect("length");
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).await.expect("body");
                    let mut parts = request_line.split_whitespace();
                    log.lock().unwrap().push(Put {
                        method: parts.next().unwrap_or_default().to_string(),
                        target: parts.next().unwrap_or_default().to_string(),
                        headers,
                        body: serde_json::from_slice(&body).expect("JSON body"),
                    });
                    let _ = write
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                });
            }
        });
        Self {
            url,
            received,
            task,
        }
    }

    fn received(&self) -> Vec<Put> {
        self.received.lock().unwrap().clone()
    }
}

fn event(request_type: &str, response_url: &str) -> Value {
    json!({
        "RequestType": request_type,
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:sb-MigrateFunction:live",
        "ResponseURL": response_url,
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/sb/0a1b2c3d",
        "RequestId": format!("req-{request_type}"),
        "LogicalResourceId": "Migrations",
        "ResourceType": "Custom::Migrations",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:sb-MigrateFunction:live",
            "FunctionVersion": "7"
        }
    })
}

/// A new database with nothing in it: not even the migrations table.
struct EmptyDb {
    name: String,
    url: String,
}

impl EmptyDb {
    async fn new() -> Self {
        let name = format!("sb_migrate_{}", uuid::Uuid::new_v4().simple());
        let mut conn = MySqlConnectOptions::from_str(&server_url())
            .expect("TEST_DATABASE_URL")
            .connect()
            .await
            .expect("connect to the test database server");
        conn.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .await
            .expect("create database");
        conn.close().await.ok();
        let url = format!("{}/{name}", server_url().trim_end_matches('/'));
        Self { name, url }
    }

    async fn pool(&self) -> MySqlPool {
        MySqlPoolOptions::new()
            .max_connections(1)
            .connect(&self.url)
            .await
            .expect("connect")
    }

    async fn tables(&self) -> Vec<String> {
        let pool = self.pool().await;
        let tables = sqlx::query_scalar::<_, String>(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
             WHERE table_schema = ? ORDER BY table_name",
        )
        .bind(&self.name)
        .fetch_all(&pool)
        .await
        .expect("tables");
        pool.close().await;
        tables
    }

    async fn drop(self) {
        let mut conn = MySqlConnectOptions::from_str(&server_url())
            .expect("url")
            .connect()
            .await
            .expect("connect");
        let _ = conn
            .execute(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE `{}`",
                self.name
            )))
            .await;
    }
}

/// The database as `migrate::handle` receives it.
fn options(url: &str) -> impl Future<Output = Result<MySqlConnectOptions, String>> + use<> {
    let options = shared::db::url_options(url).map_err(|e| e.to_string());
    async move { options }
}

fn assert_echoes_the_request(body: &Value, request_type: &str) {
    assert_eq!(body["PhysicalResourceId"], PHYSICAL_RESOURCE_ID);
    assert_eq!(
        body["StackId"],
        "arn:aws:cloudformation:us-east-1:123456789012:stack/sb/0a1b2c3d"
    );
    assert_eq!(body["RequestId"], format!("req-{request_type}"));
    assert_eq!(body["LogicalResourceId"], "Migrations");
    let reason = body["Reason"].as_str().expect("Reason");
    assert!(!reason.is_empty() && !reason.contains('\n'), "{reason:?}");
}

#[tokio::test]
async fn create_migrates_an_empty_database_and_reports_success() {
    let db = EmptyDb::new().await;
    assert!(db.tables().await.is_empty());
    let s3 = ResponseUrl::start().await;
    let http = migrate::http_client();

    let response = migrate::handle(
        &event("Create", &s3.url),
        options(&db.url),
        Duration::from_secs(30),
        &http,
    )
    .await
    .expect("delivered");
    assert_eq!(response.status, Status::Success, "{}", response.reason);

    let tables = db.tables().await;
    for table in ["_sqlx_migrations", "holds", "slots"] {
        assert!(
            tables.iter().any(|t| t == table),
            "{table} missing: {tables:?}"
        );
    }

    // The PUT, as CloudFormation's pre-signed S3 URL wants it.
    let received = s3.received();
    assert_eq!(received.len(), 1, "{received:?}");
    let put = &received[0];
    assert_eq!(put.method, "PUT");
    assert!(
        put.target.ends_with("&X-Amz-Signature=abc123"),
        "{}",
        put.target
    );
    assert_eq!(
        put.headers.get("content-type").map(String::as_str),
        Some("")
    );
    assert_eq!(put.body["Status"], "SUCCESS");
    assert_echoes_the_request(&put.body, "Create");
    let migrations = shared::db::MIGRATOR.iter().count();
    assert_eq!(put.body["Data"]["Applied"], migrations.to_string());
    let latest = shared::db::MIGRATOR
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap();
    assert_eq!(put.body["Data"]["SchemaVersion"], latest.to_string());

    // Update: idempotent, nothing new to apply.
    let response = migrate::handle(
        &event("Update", &s3.url),
        options(&db.url),
        Duration::from_secs(30),
        &http,
    )
    .await
    .expect("delivered");
    assert_eq!(response.status, Status::Success, "{}", response.reason);
    assert_eq!(s3.received()[1].body["Data"]["Applied"], "0");

    // A rollback brings back an older binary: the database knows a
    // migration this binary does not. ignore_missing keeps it a SUCCESS.
    let pool = db.pool().await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations \
         (version, description, success, checksum, execution_time) \
         VALUES (29991231000000, 'from a newer release', TRUE, x'00', 1)",
    )
    .execute(&pool)
    .await
    .expect("record a newer migration");
    pool.close().await;
    let response = migrate::handle(
        &event("Update", &s3.url),
        options(&db.url),
        Duration::from_secs(30),
        &http,
    )
    .await
    .expect("delivered");
    assert_eq!(response.status, Status::Success, "{}", response.reason);
    assert_eq!(s3.received()[2].body["Status"], "SUCCESS");

    db.drop().await;
}

#[tokio::test]
async fn an_unreachable_database_reports_failed_with_a_readable_reason() {
    // A port nobody listens on, and a password that must not show.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("mysql://slotadmin:hunter2-s3cret@127.0.0.1:{port}/slot_booking");
    let s3 = ResponseUrl::start().await;

    let started = Instant::now();
    let response = migrate::handle(
        &event("Create", &s3.url),
        options(&url),
        Duration::from_secs(2),
        &migrate::http_client(),
    )
    .await
    .expect("delivered");
    let elapsed = started.elapsed();
    assert_eq!(response.status, Status::Failed);
    // It retried for the budget, then gave up.
    assert!(
        elapsed >= Duration::from_millis(1500) && elapsed < Duration::from_secs(10),
        "{elapsed:?}"
    );

    let put = &s3.received()[0];
    assert_eq!(put.body["Status"], "FAILED");
    assert_echoes_the_request(&put.body, "Create");
    let reason = put.body["Reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!(
            "cannot connect to the database at 127.0.0.1:{port}"
        )),
        "{reason}"
    );
    assert!(reason.to_ascii_lowercase().contains("refused"), "{reason}");
    assert!(!reason.contains("hunter2"), "{reason}");
    assert!(!reason.contains("mysql://"), "{reason}");
}

#[tokio::test]
async fn wrong_credentials_fail_at_once_without_showing_the_password() {
    let server = MySqlConnectOptions::from_str(&server_url()).expect("url");
    let url = format!(
        "mysql://no_such_user_sb:hunter2-s3cret@{}:{}/slot_booking",
        server.get_host(),
        server.get_port()
    );
    let s3 = ResponseUrl::start().await;
    let started = Instant::now();
    let response = migrate::handle(
        &event("Update", &s3.url),
        options(&url),
        // Waiting cannot fix a wrong password: it must not use this.
        Duration::from_secs(60),
        &migrate::http_client(),
    )
    .await
    .expect("delivered");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(response.status, Status::Failed);
    let reason = s3.received()[0].body["Reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("Access denied"), "{reason}");
    assert!(!reason.contains("hunter2"), "{reason}");
}

#[tokio::test]
async fn a_failing_migration_names_itself_in_the_reason() {
    let db = EmptyDb::new().await;
    // Something already in the way of the first migration.
    let pool = db.pool().await;
    pool.execute("CREATE TABLE slots (id INT PRIMARY KEY)")
        .await
        .expect("create a conflicting table");
    pool.close().await;
    let s3 = ResponseUrl::start().await;

    let response = migrate::handle(
        &event("Create", &s3.url),
        options(&db.url),
        Duration::from_secs(30),
        &migrate::http_client(),
    )
    .await
    .expect("delivered");
    assert_eq!(response.status, Status::Failed);
    let first = shared::db::MIGRATOR.iter().next().unwrap();
    let reason = s3.received()[0].body["Reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        reason.starts_with(&format!(
            "migration {} {} failed: ",
            first.version, first.description
        )),
        "{reason}"
    );
    assert!(reason.contains("'slots' already exists"), "{reason}");
    db.drop().await;
}

#[tokio::test]
async fn delete_touches_nothing_and_reports_success() {
    let s3 = ResponseUrl::start().await;
    let touched = Arc::new(AtomicBool::new(false));
    let flag = touched.clone();
    let database = async move {
        flag.store(true, Ordering::SeqCst);
        Err::<MySqlConnectOptions, _>("a Delete must not look at the database".to_string())
    };
    let response = migrate::handle(
        &event("Delete", &s3.url),
        database,
        Duration::from_secs(30),
        &migrate::http_client(),
    )
    .await
    .expect("delivered");
    assert_eq!(response.status, Status::Success);
    assert!(
        !touched.load(Ordering::SeqCst),
        "Delete resolved the database"
    );
    let put = &s3.received()[0];
    assert_eq!(put.body["Status"], "SUCCESS");
    assert_eq!(put.body["PhysicalResourceId"], PHYSICAL_RESOURCE_ID);
    assert_echoes_the_request(&put.body, "Delete");
}
