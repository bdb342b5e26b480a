//! What an account may do, read from every place the server keeps it, and
//! what to grant and revoke to make it one [`Duty`]'s.
//!
//! `information_schema` shows global, schema, table and column privileges;
//! the rest is read from the grant tables themselves: routine privileges
//! (`mysql.procs_priv`), a `GRANT OPTION` kept on a table without any
//! privilege (`mysql.tables_priv`, which `information_schema` does not
//! show), roles (`mysql.roles_mapping` on MariaDB, `mysql.role_edges` on
//! MySQL 8) and proxy grants (`mysql.proxies_priv`). A role or a proxy
//! grant lends the account another's privileges, so both are extra
//! whatever they hold.

use super::duty::{Duty, Object, Server};
use sqlx::{AssertSqlSafe, MySqlConnection};
use std::fmt;

/// One thing an account holds beyond its duty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// `SELECT`, `EXECUTE`, …; `USAGE` for a `GRANT OPTION` alone.
    pub privilege: String,
    pub grantable: bool,
    /// The duty needs the privilege: only its `GRANT OPTION` is extra.
    pub needed: bool,
    pub on: On,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum On {
    Global,
    Schema(String),
    Table(String, String),
    Column(String, String, String),
    /// Schema, `PROCEDURE` or `FUNCTION`, name.
    Routine(String, String, String),
    /// A role granted to the account: its name, and its host on MySQL.
    Role(String, String),
    /// `PROXY ON user@host`.
    Proxy(String, String),
}

/// `` `name` `` with backticks doubled.
fn quoted(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

impl On {
    fn object(&self) -> String {
        match self {
            On::Global => "*.*".into(),
            On::Schema(db) => format!("{}.*", quoted(db)),
            On::Table(db, table) | On::Column(db, table, _) => {
                format!("{}.{}", quoted(db), quoted(table))
            }
            On::Routine(db, kind, name) => format!("{kind} {}.{}", quoted(db), quoted(name)),
            On::Role(name, host) if host.is_empty() => quoted(name),
            On::Role(name, host) | On::Proxy(name, host) => {
                format!("{}@{}", quoted(name), quoted(host))
            }
        }
    }
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let grant = if self.grantable {
            " WITH GRANT OPTION"
        } else {
            ""
        };
        let object = self.on.object();
        match &self.on {
            On::Role(..) => write!(f, "ROLE {object}"),
            On::Proxy(..) => write!(f, "PROXY ON {object}{grant}"),
            On::Column(.., column) => write!(f, "{} ({column}){grant} ON {object}", self.privilege),
            _ => write!(f, "{}{grant} ON {object}", self.privilege),
        }
    }
}

impl Held {
    /// The statement that takes exactly this away from `account`: the
    /// privilege unless the duty needs it, and its `GRANT OPTION`.
    pub fn revoke_statement(&self, account: &str) -> String {
        let object = self.on.object();
        let mut what = Vec::new();
        match &self.on {
            On::Role(..) => return format!("REVOKE {object} FROM {account}"),
            On::Proxy(..) => return format!("REVOKE PROXY ON {object} FROM {account}"),
            On::Column(.., column) => what.push(format!("{} ({})", self.privilege, quoted(column))),
            _ if self.needed || self.privilege == "USAGE" => {}
            _ => what.push(self.privilege.clone()),
        }
        if self.grantable {
            what.push("GRANT OPTION".into());
        }
        format!("REVOKE {} ON {object} FROM {account}", what.join(", "))
    }
}

/// Whether `duty` needs `privilege` on `on`, in `database` of `server`.
fn needed(duty: Duty, server: Server, database: &str, privilege: &str, on: &On) -> bool {
    let granted = |is: &dyn Fn(&Object) -> bool| {
        duty.grants()
            .iter()
            .any(|grant| is(&grant.object) && grant.privileges.contains(&privilege))
    };
    match on {
        On::Global => privilege == "USAGE",
        On::Schema(db) => db == database && duty.schema_privileges(server).contains(&privilege),
        On::Table(db, table) => {
            db == database && granted(&|object| matches!(object, Object::Table(t) if t == table))
        }
        On::Routine(db, kind, name) => {
            db == database
                && kind == "PROCEDURE"
                && granted(&|object| matches!(object, Object::Procedure(p) if p == name))
        }
        On::Column(..) | On::Role(..) | On::Proxy(..) => false,
    }
}

/// The `GRANT` statements that give `account` `duty`'s privileges on
/// `database`.
pub fn grant_statements(duty: Duty, server: Server, database: &str, account: &str) -> Vec<String> {
    let db = quoted(database);
    let mut statements: Vec<String> = duty
        .grants()
        .iter()
        .map(|grant| {
            let object = match grant.object {
                Object::Table(table) => format!("{db}.{}", quoted(table)),
                Object::Procedure(name) => format!("PROCEDURE {db}.{}", quoted(name)),
            };
            format!(
                "GRANT {} ON {object} TO {account}",
                grant.privileges.join(", ")
            )
        })
        .collect();
    let schema = duty.schema_privileges(server);
    if !schema.is_empty() {
        statements.push(format!(
            "GRANT {} ON {db}.* TO {account}",
            schema.join(", ")
        ));
    }
    statements
}

type Row = (String, String, String, String, String, String);

/// Everything the account `user@'%'` holds beyond `duty` on `database`.
pub async fn extra(
    conn: &mut MySqlConnection,
    duty: Duty,
    server: Server,
    database: &str,
    user: &str,
) -> Result<Vec<Held>, sqlx::Error> {
    let mut extra = Vec::new();
    for (privilege, grantable, on) in holdings(conn, server, user, "%").await? {
        let needed = needed(duty, server, database, &privilege, &on);
        if grantable || !needed {
            extra.push(Held {
                privilege,
                grantable,
                needed,
                on,
            });
        }
    }
    Ok(extra)
}

/// What every account holds without a grant of its own: MariaDB's grants
/// to `PUBLIC`, MySQL's `mandatory_roles`. No user can be held to its duty
/// while there is any, and they are the server's, not this deploy's, to
/// take back.
pub async fn granted_to_everyone(
    conn: &mut MySqlConnection,
    server: Server,
) -> Result<Vec<String>, sqlx::Error> {
    match server {
        Server::MariaDb => Ok(holdings(conn, server, "PUBLIC", "")
            .await?
            .into_iter()
            .filter(|(privilege, grantable, on)| {
                !(privilege == "USAGE" && !grantable && *on == On::Global)
            })
            .map(|(privilege, grantable, on)| {
                Held {
                    privilege,
                    grantable,
                    needed: false,
                    on,
                }
                .to_string()
            })
            .collect()),
        Server::MySql => {
            let roles: Option<String> =
                sqlx::query_scalar("SELECT CAST(@@mandatory_roles AS CHAR)")
                    .fetch_one(&mut *conn)
                    .await?;
            Ok(roles
                .filter(|roles| !roles.trim().is_empty())
                .map(|roles| format!("mandatory_roles = {roles}"))
                .into_iter()
                .collect())
        }
    }
}

/// Everything `user@host` holds, wherever the server keeps it.
async fn holdings(
    conn: &mut MySqlConnection,
    server: Server,
    user: &str,
    host: &str,
) -> Result<Vec<(String, bool, On)>, sqlx::Error> {
    let grantee = format!("'{user}'@'{host}'");
    // Every row: (level, schema, table or routine type, name or column,
    // privilege, grantable). CAST: information_schema's and the grant
    // tables' columns come back as binary strings on some servers.
    let privileges = "SELECT 'global', '', '', '', CAST(PRIVILEGE_TYPE AS CHAR), CAST(IS_GRANTABLE AS CHAR) \
           FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = ? \
         UNION ALL SELECT 'schema', CAST(TABLE_SCHEMA AS CHAR), '', '', CAST(PRIVILEGE_TYPE AS CHAR), \
           CAST(IS_GRANTABLE AS CHAR) FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = ? \
         UNION ALL SELECT 'table', CAST(TABLE_SCHEMA AS CHAR), CAST(TABLE_NAME AS CHAR), '', \
           CAST(PRIVILEGE_TYPE AS CHAR), CAST(IS_GRANTABLE AS CHAR) \
           FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE = ? \
         UNION ALL SELECT 'column', CAST(TABLE_SCHEMA AS CHAR), CAST(TABLE_NAME AS CHAR), \
           CAST(COLUMN_NAME AS CHAR), CAST(PRIVILEGE_TYPE AS CHAR), CAST(IS_GRANTABLE AS CHAR) \
           FROM information_schema.COLUMN_PRIVILEGES WHERE GRANTEE = ? \
         UNION ALL SELECT 'table grant option', CAST(Db AS CHAR), CAST(Table_name AS CHAR), '', \
           'USAGE', 'YES' FROM mysql.tables_priv \
           WHERE User = ? AND Host = ? AND FIND_IN_SET('Grant', Table_priv) > 0 \
         UNION ALL SELECT 'routine', CAST(Db AS CHAR), CAST(Routine_type AS CHAR), \
           CAST(Routine_name AS CHAR), CAST(Proc_priv AS CHAR), '' FROM mysql.procs_priv \
           WHERE User = ? AND Host = ? \
         UNION ALL SELECT 'proxy', '', CAST(Proxied_host AS CHAR), CAST(Proxied_user AS CHAR), 'PROXY', \
           IF(With_grant, 'YES', 'NO') FROM mysql.proxies_priv WHERE User = ? AND Host = ?";
    let roles = match server {
        Server::MariaDb => {
            " UNION ALL SELECT 'role', '', '', CAST(Role AS CHAR), 'ROLE', '' \
               FROM mysql.roles_mapping WHERE User = ? AND Host = ?"
        }
        Server::MySql => {
            " UNION ALL SELECT 'role', '', CAST(FROM_HOST AS CHAR), CAST(FROM_USER AS CHAR), 'ROLE', '' \
               FROM mysql.role_edges WHERE TO_USER = ? AND TO_HOST = ?"
        }
    };
    let mut query = sqlx::query_as::<_, Row>(AssertSqlSafe(format!("{privileges}{roles}")));
    for _ in 0..4 {
        query = query.bind(grantee.clone());
    }
    for _ in 0..4 {
        query = query.bind(user.to_string()).bind(host.to_string());
    }
    let rows = query.fetch_all(&mut *conn).await?;
    let mut held_rows: Vec<(String, bool, On)> = Vec::new();
    for (level, schema, table, name, privilege, grantable) in rows {
        for row in held(&level, schema, table, name, privilege, grantable) {
            // information_schema may show a bare table GRANT OPTION that
            // tables_priv shows too: once is enough.
            if !held_rows.contains(&row) {
                held_rows.push(row);
            }
        }
    }
    Ok(held_rows)
}

/// One row of [`extra`]'s query as what it grants: a routine's row holds a
/// set (`Execute,Alter Routine,Grant`).
fn held(
    level: &str,
    schema: String,
    table: String,
    name: String,
    privilege: String,
    grantable: String,
) -> Vec<(String, bool, On)> {
    let grantable = grantable == "YES";
    match level {
        "global" => vec![(privilege, grantable, On::Global)],
        "schema" => vec![(privilege, grantable, On::Schema(schema))],
        "table" | "table grant option" => vec![(privilege, grantable, On::Table(schema, table))],
        "column" => vec![(privilege, grantable, On::Column(schema, table, name))],
        "routine" => {
            let set: Vec<&str> = privilege.split(',').filter(|p| !p.is_empty()).collect();
            let grantable = set.contains(&"Grant");
            let on = On::Routine(schema, table, name);
            let mut held: Vec<(String, bool, On)> = set
                .iter()
                .filter(|p| **p != "Grant")
                .map(|p| (p.to_ascii_uppercase(), grantable, on.clone()))
                .collect();
            if held.is_empty() && grantable {
                held.push(("USAGE".into(), true, on));
            }
            held
        }
        "proxy" => vec![(privilege, grantable, On::Proxy(name, table))],
        _ => vec![(privilege, false, On::Role(name, table))],
    }
}
