//! `make dev`'s clients: an admin and a booker, with keys kept for the
//! developer in a git-ignored file (`DEV_KEYS_FILE`, default
//! `.dev-keys.env`), so that they survive restarts and can be sourced by a
//! shell: `. ./.dev-keys.env && curl -H "Authorization: Bearer $BOOKER_KEY" …`.

use shared::clients::install::install_key;
use shared::clients::{ApiKey, Role};
use sqlx::MySqlPool;
use std::path::PathBuf;

const CLIENTS: [(&str, &str, Role); 2] = [
    ("ADMIN_KEY", "dev-admin", Role::Admin),
    ("BOOKER_KEY", "dev-booker", Role::Booker),
];

pub fn file() -> PathBuf {
    std::env::var_os("DEV_KEYS_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".dev-keys.env"))
}

/// Makes sure both clients exist, active, with the file's keys, and writes
/// the file and prints the keys. A file without a key, or with one its
/// client no longer answers to (the client revoked, say by a fuzzer's
/// `DELETE /clients/{id}`, or missing, or keyed otherwise), gets a new
/// one: the keys printed always work.
pub async fn ensure(pool: &MySqlPool) -> Result<(), Box<dyn std::error::Error>> {
    let path = file();
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    let mut lines =
        vec!["# make dev's API keys (git-ignored). Source it: . ./.dev-keys.env".to_string()];
    for (variable, name, role) in CLIENTS {
        let key = kept
            .lines()
            .filter_map(|line| line.strip_prefix(variable)?.strip_prefix('='))
            .find_map(ApiKey::parse);
        let key = match key {
            Some(key) if works(pool, name, role, &key).await? => key,
            _ => ApiKey::generate()?,
        };
        // A new key re-keys the client, which lifts a revocation.
        install_key(pool, name, role, &key).await?;
        lines.push(format!("{variable}={}", key.expose()));
    }
    let text = lines.join("\n") + "\n";
    write_private(&path, &text)?;
    println!("devdb: API keys (kept in {}):", path.display());
    for line in &lines[1..] {
        println!("devdb:   {line}");
    }
    Ok(())
}

/// Whether `name` is an active client with `role` whose key is `key`.
async fn works(pool: &MySqlPool, name: &str, role: Role, key: &ApiKey) -> sqlx::Result<bool> {
    let found: Option<bool> = sqlx::query_scalar(
        "SELECT key_hash = ? AND role = ? AND revoked_at IS NULL FROM api_clients WHERE name = ?",
    )
    .bind(key.hash().as_str())
    .bind(role.as_str())
    .bind(name)
    .fetch_optional(pool)
    .await?;
    Ok(found == Some(true))
}

/// Only the developer may read the keys.
fn write_private(path: &PathBuf, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())
}
