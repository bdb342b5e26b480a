//! The application's two database users, made what the template says on
//! every deploy by the migrate function (connected as the DDL user):
//! - the **booking** user: the API functions (but the client
//!   administration ones), the sweeper and the publisher;
//! - the **client administration** user: `POST`, `GET`, `PATCH` and
//!   `DELETE /clients`, the only ones that write `api_clients` (a booking
//!   function that could would mint itself an admin key).
//!
//! Each holds exactly [`Duty::grants`]: table by table, the privileges its
//! statements need, and nothing else (no DDL, no other table or schema, no
//! `GRANT`, no role, no proxy). Each run:
//! 1. `CREATE USER IF NOT EXISTS`, then `ALTER USER … IDENTIFIED BY` with the
//!    secret's current password (a rotated secret takes effect here);
//! 2. `GRANT` the duty's privileges (a no-op when held);
//! 3. anything else the account holds ([`super::grants`]: global, schema,
//!    table, column and routine privileges, `GRANT OPTION`, roles, proxy
//!    grants) is revoked one by one, then read again: the deploy fails if
//!    anything is left, or if the server grants anything to every account
//!    (MariaDB's `PUBLIC`, MySQL's `mandatory_roles`).
//!
//! A revoked schema-wide privilege reaches a session at its next
//! connection (table privileges at its next statement): MySQL and MariaDB
//! apply database privileges when a session selects its database.
//!
//! Revoking only what is extra, after the grants, means a deploy never
//! takes a needed privilege away from live traffic, not even for a moment
//! (the step from one schema-wide grant to table grants included). Works on
//! MySQL 8 (Aurora MySQL 3) and MariaDB 10.4+.
//!
//! The password can only be sent as a literal (`IDENTIFIED BY ?` is not
//! accepted), so the caller's connection must not log statements, and the
//! password is refused if it contains a quote or a backslash.

use super::duty::{Duty, Server};
use super::grants;
use crate::secret::Secret;
use sqlx::{AssertSqlSafe, Executor, MySqlConnection};

/// One of the application's users: `name@'%'` (RDS Proxy connects from its
/// own addresses in the VPC), with its password from Secrets Manager.
#[derive(Debug, Clone)]
pub struct AppUser {
    name: String,
    password: Secret,
    duty: Duty,
}

impl AppUser {
    /// A MySQL user name of 1–32 letters, digits or `_` starting with a
    /// letter, and a password of 16–128 printable ASCII characters without
    /// `'`, `"` or `\`. The error never quotes the password.
    pub fn new(name: &str, password: Secret, duty: Duty) -> Result<Self, String> {
        let label = duty.label();
        let name_ok = name.len() <= 32
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !name_ok {
            return Err(format!(
                "{label} {name:?}: 1 to 32 letters, digits or '_', starting with a letter"
            ));
        }
        let text = password.expose();
        let password_ok = (16..=128).contains(&text.len())
            && text
                .chars()
                .all(|c| c.is_ascii_graphic() && !matches!(c, '\'' | '"' | '\\'));
        if !password_ok {
            return Err(format!(
                "the password of {label} {name} must be 16 to 128 printable ASCII \
                 characters without quotes or backslashes"
            ));
        }
        Ok(Self {
            name: name.to_string(),
            password,
            duty,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn duty(&self) -> Duty {
        self.duty
    }

    /// `'name'@'%'`, as SQL and as `information_schema` writes a grantee.
    pub(super) fn account(&self) -> String {
        format!("'{}'@'%'", self.name)
    }
}

/// What [`ensure`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserOutcome {
    pub created: bool,
    /// What the account held beyond its duty (then revoked), as
    /// `"<privilege> ON <object>"`, `"ROLE <name>"` or `"PROXY ON <user>"`.
    pub revoked: Vec<String>,
}

/// Makes `user` exist with its current password and exactly its duty's
/// privileges on the connection's database. Idempotent. One line on
/// failure, without the password.
pub async fn ensure(conn: &mut MySqlConnection, user: &AppUser) -> Result<UserOutcome, String> {
    let label = user.duty.label();
    let failed =
        |what: &str, err: sqlx::Error| format!("{what} {label} {}: {}", user.name, cause(&err));
    let database: Option<String> = sqlx::query_scalar("SELECT DATABASE()")
        .fetch_one(&mut *conn)
        .await
        .map_err(|err| failed("cannot read the database name for the", err))?;
    let database = database.ok_or("the migration connection has no database selected")?;
    let server = Server::of(conn)
        .await
        .map_err(|err| failed("cannot read the server's version for the", err))?;
    let exists: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM mysql.user WHERE User = ? AND Host = '%'")
            .bind(&user.name)
            .fetch_one(&mut *conn)
            .await
            .map_err(|err| failed("cannot look up the", err))?;
    let account = user.account();
    let password = user.password.expose();
    // The checks in AppUser::new keep these literals well formed.
    conn.execute(AssertSqlSafe(format!(
        "CREATE USER IF NOT EXISTS {account} IDENTIFIED BY '{password}'"
    )))
    .await
    .map_err(|err| failed("cannot create the", err))?;
    conn.execute(AssertSqlSafe(format!(
        "ALTER USER {account} IDENTIFIED BY '{password}'"
    )))
    .await
    .map_err(|err| failed("cannot set the password of the", err))?;
    for statement in grants::grant_statements(user.duty, server, &database, &account) {
        conn.execute(AssertSqlSafe(statement))
            .await
            .map_err(|err| failed("cannot grant its privileges to the", err))?;
    }
    let extra = grants::extra(conn, user.duty, server, &database, &user.name)
        .await
        .map_err(|err| failed("cannot read the privileges of the", err))?;
    if !extra.is_empty() {
        let shown: Vec<String> = extra.iter().map(ToString::to_string).collect();
        tracing::warn!(user = %user.name, extra = ?shown, "revoking privileges beyond the user's duty");
        for held in &extra {
            match conn
                .execute(AssertSqlSafe(held.revoke_statement(&account)))
                .await
            {
                Ok(_) => {}
                // 1141/1147 "no such grant": an earlier REVOKE of this run
                // took it already (a table's GRANT OPTION goes with its
                // last privilege). The second read below decides.
                Err(err) if matches!(error_number(&err), Some(1141 | 1147)) => {}
                Err(err) => return Err(failed(&format!("cannot revoke {held} from the"), err)),
            }
        }
        let left = grants::extra(conn, user.duty, server, &database, &user.name)
            .await
            .map_err(|err| failed("cannot read the privileges of the", err))?;
        if let Some(held) = left.first() {
            return Err(format!(
                "the {label} {} still holds {held} after its revocation",
                user.name
            ));
        }
    }
    let everyone = grants::granted_to_everyone(conn, server)
        .await
        .map_err(|err| failed("cannot read what every account holds, for the", err))?;
    if !everyone.is_empty() {
        return Err(format!(
            "every account holds {}, and so would the {label} {}: revoke it from PUBLIC (MariaDB) \
             or empty mandatory_roles (MySQL)",
            everyone.join(", "),
            user.name
        ));
    }
    Ok(UserOutcome {
        created: exists == 0,
        revoked: extra.iter().map(ToString::to_string).collect(),
    })
}

fn error_number(err: &sqlx::Error) -> Option<u16> {
    err.as_database_error()?
        .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .map(sqlx::mysql::MySqlDatabaseError::number)
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
        let user = |name: &str| AppUser::new(name, password(), Duty::Booking);
        assert!(user("slotapp").is_ok());
        assert!(user("sb_app_1").is_ok());
        for bad in ["", "1app", "slot-app", "a'b", "a b", &"a".repeat(33)] {
            assert!(user(bad).is_err(), "{bad:?}");
        }
        for bad in [
            "short",
            "has'quote-and-long-enough",
            "back\\slash-and-long-enough",
            "has space and long enough",
        ] {
            let err = AppUser::new("slotapp", Secret::new(bad), Duty::ClientAdmin).unwrap_err();
            assert!(!err.contains(bad), "{err}");
            assert!(err.contains("client administration user"), "{err}");
        }
        assert_eq!(user("slotapp").unwrap().account(), "'slotapp'@'%'");
    }
}
