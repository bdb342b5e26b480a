//! README's API section, command by command, against a fresh `make dev`
//! database (`devdb`: the demo slots and the dev keys) served by `cargo
//! lambda watch` in `api-key` mode, as `make dev` serves it. Each command
//! must answer the status and `reason` (and `id`) the README shows.

use serde_json::Value;
use slot_booking_tests::dev::dev_key;
use slot_booking_tests::watch::{Watch, WatchOptions, cargo_run_env, workspace_root};
use slot_booking_tests::*;

/// One `$ command` of the README and what the README says it answers.
struct Example {
    command: String,
    status: u16,
    reason: Option<String>,
    id: Option<u64>,
}

/// The commands between the README's test markers, with the status each
/// output shows (`# 201`, or an `HTTP/1.1 200` line).
fn examples(readme: &str) -> Vec<Example> {
    let start = readme
        .find("<!-- readme-test:start -->")
        .expect("start marker");
    let end = readme.find("<!-- readme-test:end -->").expect("end marker");
    let mut examples: Vec<Example> = Vec::new();
    let mut output: Option<String> = None;
    let mut flush = |command: Option<String>, output: &mut Option<String>| {
        if let (Some(command), Some(shown)) = (command, output.take()) {
            let status = shown
                .rsplit_once("# ")
                .and_then(|(_, tail)| tail.get(..3)?.parse().ok())
                .or_else(|| shown.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok())
                .unwrap_or_else(|| panic!("no status shown for {command}: {shown}"));
            let json = shown.split("   #").next().unwrap_or_default();
            let parsed: Option<Value> = serde_json::from_str(json).ok();
            let field = |name: &str| {
                let marker = format!("\"{name}\":");
                let at = json.find(&marker)? + marker.len();
                Some(
                    json[at..]
                        .split([',', '}'])
                        .next()?
                        .trim_matches('"')
                        .to_string(),
                )
            };
            examples.push(Example {
                command,
                status,
                reason: parsed
                    .as_ref()
                    .and_then(|v| v["reason"].as_str().map(str::to_string))
                    .or_else(|| field("reason")),
                id: json
                    .starts_with('{')
                    .then(|| field("id")?.parse().ok())
                    .flatten(),
            });
        }
    };
    let mut command: Option<String> = None;
    for line in readme[start..end].lines() {
        if let Some(next) = line.strip_prefix("$ ") {
            flush(command.take(), &mut output);
            if !next.starts_with(". ") {
                command = Some(next.to_string());
            }
        } else if command.is_some() && output.is_none() && !line.trim().is_empty() {
            output = Some(line.to_string());
        }
    }
    flush(command, &mut output);
    examples
}

/// `make db` (devdb) on `db`, its keys in `keys`; what it printed.
fn devdb(db: &TestDb, keys: &std::path::Path) -> String {
    let mut devdb = std::process::Command::new("cargo");
    for (name, _) in cargo_run_env() {
        devdb.env_remove(name);
    }
    let ran = devdb
        .args(["run", "--quiet", "-p", "devdb"])
        .current_dir(workspace_root())
        .env("DATABASE_URL", &db.url)
        .env("DEV_KEYS_FILE", keys)
        .output()
        .expect("devdb");
    let printed = String::from_utf8_lossy(&ran.stdout).to_string();
    assert!(
        ran.status.success(),
        "devdb: {printed}{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(
        printed.contains("ADMIN_KEY=sb_") && printed.contains("BOOKER_KEY=sb_"),
        "{printed}"
    );
    printed
}

/// The keys `make dev` prints always work: a dev client revoked (say by a
/// fuzzer's `DELETE /clients/{id}`) or gone gets a fresh key at the next
/// `make db`; a working key is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_or_missing_dev_client_gets_a_fresh_key_at_the_next_make_db() {
    let db = TestDb::new().await;
    let keys = workspace_root().join(format!("target/{}.keys.env", db.name));
    let key_of = |variable: &str| dev_key(&keys, variable).expect("a key in the file");
    devdb(&db, &keys);
    let (admin, booker) = (key_of("ADMIN_KEY"), key_of("BOOKER_KEY"));
    sqlx::query("UPDATE api_clients SET revoked_at = UTC_TIMESTAMP(6) WHERE name = 'dev-booker'")
        .execute(&db.admin)
        .await
        .unwrap();
    sqlx::query("DELETE FROM api_clients WHERE name = 'dev-admin'")
        .execute(&db.admin)
        .await
        .unwrap();
    devdb(&db, &keys);
    let (admin_after, booker_after) = (key_of("ADMIN_KEY"), key_of("BOOKER_KEY"));
    assert_ne!(booker_after, booker, "the revoked booker's key is replaced");
    assert_ne!(admin_after, admin, "the missing admin's key is replaced");
    for (name, key) in [("dev-admin", &admin_after), ("dev-booker", &booker_after)] {
        let hash = shared::clients::ApiKey::parse(key).expect("a key").hash();
        let works: Option<bool> = sqlx::query_scalar(
            "SELECT key_hash = ? AND revoked_at IS NULL FROM api_clients WHERE name = ?",
        )
        .bind(hash.as_str())
        .bind(name)
        .fetch_optional(&db.admin)
        .await
        .unwrap();
        assert_eq!(works, Some(true), "{name}'s new key works");
    }
    devdb(&db, &keys);
    assert_eq!(key_of("BOOKER_KEY"), booker_after, "a working key is kept");
    let _ = std::fs::remove_file(&keys);
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_readme_example_answers_as_shown_on_a_fresh_make_dev_database() {
    let root = workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let examples = examples(&readme);
    assert!(examples.len() >= 15, "{} examples found", examples.len());

    let db = TestDb::new().await;
    let keys = root.join(format!("target/{}.keys.env", db.name));
    devdb(&db, &keys);

    let watch = Watch::start(WatchOptions {
        database_url: &db.url,
        redis_url: &redis_url(),
        concurrency: 4,
        emulator_timeout_secs: None,
        release: false,
        log_prefix: "readme-watch",
        auth_mode: "api-key",
        application_log_level: None,
    })
    .await
    .expect("cargo lambda watch");

    for example in &examples {
        let command = example
            .command
            .replace("http://127.0.0.1:9000", &watch.base)
            .replacen("curl ", "curl -sS -w '\\n%{http_code}' ", 1);
        let out = tokio::process::Command::new("bash")
            .arg("-c")
            .arg(format!(". '{}' && {command}", keys.display()))
            .output()
            .await
            .expect("bash");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
        let status: u16 = status.trim().parse().unwrap_or(0);
        assert_eq!(status, example.status, "{}\n{text}", example.command);
        let body = body.rsplit("\r\n\r\n").next().unwrap_or(body);
        let answer: Value = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("{}: {e}: {body}", example.command));
        if let Some(reason) = &example.reason {
            assert_eq!(answer["reason"], reason.as_str(), "{}", example.command);
        }
        if let Some(id) = example.id {
            assert_eq!(answer["id"], id, "{}", example.command);
        }
    }
    watch.stop().await;
    let _ = std::fs::remove_file(&keys);
    db.drop().await;
}
