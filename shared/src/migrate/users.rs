//! The application's database user, made what the template says on every
//! deploy, by the migrate function (connected as the DDL user).
//!
//! The API functions and the sweeper connect as this user: it may read and
//! write rows of the application's database, and call its procedure, and
//! nothing else (no DDL, no other schema, no `GRANT`). Each run:
//! 1. `CREATE USER IF NOT EXISTS`, then `ALTER USER … IDENTIFIED BY` with the
//!    secret's current password (a rotated secret takes effect here);
//! 2. any privilege beyond [`PRIVILEGES`] on this database (global, other
//!    schemas, tables, columns, `GRANT OPTION`) is revoked, all at once;
//! 3. `GRANT` [`PRIVILEGES`] on this database (a no-op when held).
//!
//! Step 2 runs only when something extra is found, so a normal deploy never
//! takes a privilege away from live traffic, not even for a moment. Works on
//! MySQL 8 (Aurora MySQL 3) and MariaDB 10.4+.
//!
//! The password can only be sent as a literal (`IDENTIFIED BY ?` is not
//! accepted), so the caller's connection must not log statements, and the
//! password is refused if it contains a quote or a backslash.

use crate::secret::Secret;
use sqlx::{AssertSqlSafe, Executor, MySqlConnection};

/// What the application user holds, on the application's database only:
/// DML, and EXECUTE for `events_commit`, the procedure a booking commits
/// by (an SQL SECURITY INVOKER one: it inserts with these privileges).
pub const PRIVILEGES: [&str; 5] = ["SELECT", "INSERT", "UPDATE", "DELETE", "EXECUTE"];

/// The application's user: `name@'%'` (RDS Proxy connects from its own
/// addresses in the VPC), with its password from Secrets Manager.
#[derive(Debug, Clone)]
pub struct AppUser {
    name: String,
    password: Secret,
}

impl AppUser {
    /// A MySQL user name of 1–32 letters, digits or `_` starting with a
    /// letter, and a password of 16–128 printable ASCII characters without
    /// `'`, `"` or `\`. The error never quotes the password.
    pub fn new(name: &str, password: Secret) -> Result<Self, String> {
        let name_ok = name.len() <= 32
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !name_ok {
            return Err(format!(
                "application user {name:?}: 1 to 32 letters, digits or '_', starting with a letter"
            ));
        }
        let text = password.expose();
        let password_ok = (16..=128).contains(&text.len())
            && text
                .chars()
                .all(|c| c.is_ascii_graphic() && !matches!(c, '\'' | '"' | '\\'));
        if !password_ok {
            return Err(format!(
                "the password of application user {name} must be 16 to 128 printable ASCII \
                 characters without quotes or backslashes"
            ));
        }
        Ok(Self {
            name: name.to_string(),
            password,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `'name'@'%'`, as SQL and as `information_schema` writes a grantee.
    fn account(&self) -> String {
        format!("'{}'@'%'", self.name)
    }
}

/// What [`ensure`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserOutcome {
    pub created: bool,
    /// The privileges found beyond [`PRIVILEGES`] (then all revoked).
    pub revoked: Vec<String>,
}

/// Makes `user` exist with its current password and exactly [`PRIVILEGES`]
/// on the connection's database. Idempotent. One line on failure, without
/// the password.
pub async fn ensure(conn: &mut MySqlConnection, user: &AppUser) -> Result<UserOutcome, String> {
    let failed = |what: &str, err: sqlx::Error| format!("{what} {}: {}", user.name, cause(&err));
    let database: Option<String> = sqlx::query_scalar("SELECT DATABASE()")
        .fetch_one(&mut *conn)
        .await
        .map_err(|err| failed("cannot read the database name for", err))?;
    let database = database.ok_or("the migration connection has no database selected")?;
    let exists: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM mysql.user WHERE User = ? AND Host = '%'")
            .bind(&user.name)
            .fetch_one(&mut *conn)
            .await
            .map_err(|err| failed("cannot look up the application user", err))?;
    let account = user.account();
    let password = user.password.expose();
    // The checks in AppUser::new keep these literals well formed.
    conn.execute(AssertSqlSafe(format!(
        "CREATE USER IF NOT EXISTS {account} IDENTIFIED BY '{password}'"
    )))
    .await
    .map_err(|err| failed("cannot create the application user", err))?;
    conn.execute(AssertSqlSafe(format!(
        "ALTER USER {account} IDENTIFIED BY '{password}'"
    )))
    .await
    .map_err(|err| failed("cannot set the password of the application user", err))?;
    let revoked = extra_privileges(conn, &account, &database)
        .await
        .map_err(|err| failed("cannot read the privileges of the application user", err))?;
    if !revoked.is_empty() {
        tracing::warn!(user = %user.name, extra = ?revoked, "revoking privileges beyond DML on the application database");
        conn.execute(AssertSqlSafe(format!(
            "REVOKE ALL PRIVILEGES, GRANT OPTION FROM {account}"
        )))
        .await
        .map_err(|err| failed("cannot revoke the extra privileges of", err))?;
    }
    conn.execute(AssertSqlSafe(format!(
        "GRANT {} ON `{}`.* TO {account}",
        PRIVILEGES.join(", "),
        database.replace('`', "``")
    )))
    .await
    .map_err(|err| failed("cannot grant DML to the application user", err))?;
    Ok(UserOutcome {
        created: exists == 0,
        revoked,
    })
}

/// Every privilege `account` holds beyond [`PRIVILEGES`] on `database`, as
/// `"<privilege> ON <object>"`.
async fn extra_privileges(
    conn: &mut MySqlConnection,
    account: &str,
    database: &str,
) -> Result<Vec<String>, sqlx::Error> {
    let allowed = PRIVILEGES
        .iter()
        .map(|p| format!("'{p}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let grantable = "IF(IS_GRANTABLE = 'YES', ' WITH GRANT OPTION', '')";
    // CAST: information_schema's columns come back as binary strings on
    // some servers.
    let sql = format!(
        "SELECT CAST(CONCAT(PRIVILEGE_TYPE, {grantable}, ' ON *.*') AS CHAR) \
           FROM information_schema.USER_PRIVILEGES \
           WHERE GRANTEE = ? AND (PRIVILEGE_TYPE <> 'USAGE' OR IS_GRANTABLE = 'YES') \
         UNION ALL SELECT CAST(CONCAT(PRIVILEGE_TYPE, {grantable}, ' ON ', TABLE_SCHEMA, '.*') AS CHAR) \
           FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = ? \
           AND (TABLE_SCHEMA <> ? OR PRIVILEGE_TYPE NOT IN ({allowed}) OR IS_GRANTABLE = 'YES') \
         UNION ALL SELECT CAST(CONCAT(PRIVILEGE_TYPE, {grantable}, ' ON ', TABLE_SCHEMA, '.', TABLE_NAME) AS CHAR) \
           FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE = ? \
         UNION ALL SELECT CAST(CONCAT(PRIVILEGE_TYPE, {grantable}, ' ON ', TABLE_SCHEMA, '.', TABLE_NAME, \
           '.', COLUMN_NAME) AS CHAR) FROM information_schema.COLUMN_PRIVILEGES WHERE GRANTEE = ?"
    );
    sqlx::query_scalar(AssertSqlSafe(sql))
        .bind(account)
        .bind(account)
        .bind(database)
        .bind(account)
        .bind(account)
        .fetch_all(&mut *conn)
        .await
}

fn cause(err: &sqlx::Error) -> String {
    match err.as_database_error() {
        Some(db) => db.message().to_string(),
        None => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_and_quote_free_passwords_are_accepted() {
        let password = || Secret::new("Abcdefghij0123456789xyz");
        assert!(AppUser::new("slotapp", password()).is_ok());
        assert!(AppUser::new("sb_app_1", password()).is_ok());
        for bad in ["", "1app", "slot-app", "a'b", "a b", &"a".repeat(33)] {
            assert!(AppUser::new(bad, password()).is_err(), "{bad:?}");
        }
        for bad in [
            "short",
            "has'quote-and-long-enough",
            "back\\slash-and-long-enough",
            "has space and long enough",
        ] {
            let err = AppUser::new("slotapp", Secret::new(bad)).unwrap_err();
            assert!(!err.contains(bad), "{err}");
        }
        assert_eq!(
            AppUser::new("slotapp", password()).unwrap().account(),
            "'slotapp'@'%'"
        );
    }
}
