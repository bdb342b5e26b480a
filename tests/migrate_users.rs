//! What the migrate function keeps besides the schema, against the real
//! MariaDB: the application's two users, made on the first deploy and
//! checked on every other (the step is idempotent, takes a rotated
//! password, and takes back whatever was granted beyond the user's duty:
//! a privilege anywhere, a GRANT OPTION, a role, a routine privilege, a
//! proxy grant); and the first admin key from its secret. What each user
//! may then do is tests/privileges.rs.

use shared::clients::ApiKey;
use shared::config::Secret;
use shared::migrate::Target;
use shared::migrate::duty::Duty;
use shared::migrate::users;
use slot_booking_tests::db_users::{UniqueUser, decide, denied, deploy};
use slot_booking_tests::private_mariadb::PrivateMariaDb;
use slot_booking_tests::*;
use sqlx::{Connection, Executor};

/// `statement` as root, or the test fails.
async fn by_hand(db: &TestDb, statement: String) {
    db.admin
        .execute(sqlx::AssertSqlSafe(statement.clone()))
        .await
        .unwrap_or_else(|err| panic!("{statement}: {err}"));
}

#[tokio::test]
async fn a_rotated_password_and_every_kind_of_extra_grant_are_set_right_on_the_next_deploy() {
    let db = TestDb::new().await;
    let first = "First0Generated0Password0xY12345";
    let mut booking = UniqueUser::new(Duty::Booking, first);
    let clients = UniqueUser::new(Duty::ClientAdmin, "Clients0Generated0Password0q1w2e3");
    let reason = deploy(&db, &[&booking, &clients]).await;
    assert!(
        reason.ends_with(&format!(
            "; booking user {} created; client administration user {} created",
            booking.name, clients.name
        )),
        "{reason}"
    );
    let reason = deploy(&db, &[&booking, &clients]).await;
    assert!(
        reason.ends_with(&format!(
            "; booking user {} checked; client administration user {} checked",
            booking.name, clients.name
        )),
        "{reason}"
    );
    assert!(!reason.contains("revoked"), "{reason}");

    // Someone grants more by hand: the schema-wide DML an older release
    // gave, DDL, another schema, GRANT OPTION, a column, a role with
    // everything, a routine privilege and a proxy grant.
    let (account, database) = (booking.account(), db.name.clone());
    let role = format!("sb_role_{}", &booking.name[booking.name.len() - 8..]);
    let me: String = sqlx::query_scalar("SELECT CAST(CURRENT_USER() AS CHAR)")
        .fetch_one(&db.admin)
        .await
        .unwrap();
    let (me_user, me_host) = me.split_once('@').expect("user@host");
    for grant in [
        format!("GRANT SELECT, INSERT, UPDATE, DELETE, EXECUTE ON `{database}`.* TO {account}"),
        format!("GRANT CREATE, DROP, ALTER, INDEX ON `{database}`.* TO {account}"),
        format!("GRANT SELECT ON mysql.* TO {account}"),
        format!("GRANT SELECT ON `{database}`.`slots` TO {account} WITH GRANT OPTION"),
        format!("GRANT UPDATE (name) ON `{database}`.`api_clients` TO {account}"),
        format!("CREATE ROLE IF NOT EXISTS {role}"),
        format!("GRANT ALL ON `{database}`.* TO {role}"),
        format!("GRANT {role} TO {account}"),
        format!("SET DEFAULT ROLE {role} FOR {account}"),
        format!("GRANT ALTER ROUTINE ON PROCEDURE `{database}`.`events_commit` TO {account}"),
        format!("GRANT PROXY ON '{me_user}'@'{me_host}' TO {account}"),
        format!(
            "GRANT EXECUTE ON PROCEDURE `{database}`.`events_commit` TO {}",
            clients.account()
        ),
        // A table the duty does not use, with GRANT OPTION, and a bare
        // GRANT OPTION: the option goes with the table's last privilege.
        format!(
            "GRANT SELECT ON `{database}`.`sweep_reports` TO {} WITH GRANT OPTION",
            clients.account()
        ),
        format!(
            "GRANT USAGE ON `{database}`.`event_feed` TO {} WITH GRANT OPTION",
            clients.account()
        ),
    ] {
        by_hand(&db, grant).await;
    }
    let mut conn = booking.connect(&db).await.expect("login");
    conn.execute("CREATE TABLE intruder (id INT)")
        .await
        .expect("the extra grant works before the deploy");
    conn.execute("DROP TABLE intruder").await.expect("drop it");
    conn.execute("UPDATE api_clients SET name = name WHERE FALSE")
        .await
        .expect("so does the column");
    conn.close().await.ok();

    // The secret was rotated; the deploy sets the new password and takes
    // every extra back, and the needed grants stay. (Its step for each
    // user, called as the deploy calls it: the deploy's reason is cut to
    // CloudFormation's length.)
    booking.password = "Second0Generated0Password0zW6789".into();
    let mut root = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let outcome = users::ensure(&mut root, &booking.app_user())
        .await
        .expect("ensure");
    let revoked = format!("{:?}", outcome.revoked);
    let (db_all, slots) = (format!("`{database}`.*"), format!("`{database}`.`slots`"));
    for extra in [
        format!("\"SELECT ON {db_all}\""),
        format!("\"EXECUTE ON {db_all}\""),
        format!("\"CREATE ON {db_all}\""),
        format!("\"DROP ON {db_all}\""),
        "\"SELECT ON `mysql`.*\"".to_string(),
        format!("\"SELECT WITH GRANT OPTION ON {slots}\""),
        format!("\"UPDATE (name) ON `{database}`.`api_clients`\""),
        format!("\"ROLE `{role}`\""),
        format!("\"ALTER ROUTINE ON PROCEDURE `{database}`.`events_commit`\""),
        format!("\"PROXY ON `{me_user}`@`{me_host}`\""),
    ] {
        assert!(revoked.contains(&extra), "{extra} not revoked: {revoked}");
    }
    let outcome = users::ensure(&mut root, &clients.app_user())
        .await
        .expect("ensure");
    let revoked = format!("{:?}", outcome.revoked);
    for extra in [
        format!("\"EXECUTE ON PROCEDURE `{database}`.`events_commit`\""),
        format!("\"SELECT WITH GRANT OPTION ON `{database}`.`sweep_reports`\""),
        format!("\"USAGE WITH GRANT OPTION ON `{database}`.`event_feed`\""),
    ] {
        assert!(revoked.contains(&extra), "{extra} not revoked: {revoked}");
    }
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM mysql.tables_priv WHERE User = ?")
        .bind(&clients.name)
        .fetch_one(&mut root)
        .await
        .unwrap();
    assert_eq!(
        left, 6,
        "the grants of its duty alone (api_clients, client_allowances, and a revocation's \
         slots, holds, waitlist_entries, events)"
    );
    root.close().await.ok();
    let old = booking.connect_with(&db, first).await;
    let err = old.expect_err("the old password is refused");
    assert!(err.to_string().contains("Access denied"), "{err}");
    let mut conn = booking.connect(&db).await.expect("new password");
    for statement in [
        "CREATE TABLE intruder (id INT)".to_string(),
        format!("SET ROLE {role}"),
        "UPDATE api_clients SET name = name WHERE FALSE".to_string(),
        "ALTER PROCEDURE events_commit COMMENT 'intruder'".to_string(),
        "SELECT * FROM mysql.user".to_string(),
    ] {
        let result = conn.execute(sqlx::AssertSqlSafe(statement.clone())).await;
        assert!(
            denied(&result).is_some() || is_role_refused(&result),
            "{statement}: {result:?}"
        );
    }
    sqlx::query("SELECT COUNT(*) FROM slots")
        .fetch_one(&mut conn)
        .await
        .expect("the table grant stayed");
    conn.close().await.ok();
    let proxies: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM mysql.proxies_priv WHERE User = ?")
        .bind(&booking.name)
        .fetch_one(&db.admin)
        .await
        .unwrap();
    assert_eq!(proxies, 0);
    by_hand(&db, format!("DROP ROLE {role}")).await;

    // And the next deploy finds nothing to take back.
    let reason = deploy(&db, &[&booking, &clients]).await;
    assert!(!reason.contains("revoked"), "{reason}");
}

/// `SET ROLE` of a role the account does not hold: 1959 "Invalid role
/// specification" on MariaDB, 3530 on MySQL.
fn is_role_refused<T>(result: &Result<T, sqlx::Error>) -> bool {
    matches!(result, Err(err) if err.to_string().contains("1959") || err.to_string().contains("Invalid role") || err.to_string().contains("3530"))
}

#[tokio::test]
async fn the_first_admin_key_is_installed_as_bootstrap_admin_and_a_bad_one_fails_the_deploy() {
    let db = TestDb::new().await;
    let key = "K3yFromSecretsManager0123456789abcdefABCDEFghijk";
    assert_eq!(key.len(), 48);
    let target = |key: &str| Target {
        options: shared::db::url_options(&db.url).expect("options"),
        users: Vec::new(),
        bootstrap_admin: Some(Secret::new(key)),
    };
    let expected = ApiKey::parse(key).expect("a valid key").hash();
    for deploy in 0..2 {
        // Every deploy installs it again: one client, the same hash.
        let reason = decide(target(key)).await.expect("SUCCESS");
        assert!(reason.ends_with("; first admin key installed"), "{reason}");
        assert!(!reason.contains(key), "{reason}");
        let rows: Vec<(String, String, Option<chrono::NaiveDateTime>)> = sqlx::query_as(
            "SELECT CAST(role AS CHAR), key_hash, revoked_at FROM api_clients \
             WHERE name = 'bootstrap-admin'",
        )
        .fetch_all(&db.admin)
        .await
        .expect("api_clients");
        assert_eq!(rows, [("admin".into(), expected.as_str().into(), None)]);
        // Every client that was there before a deploy has its allowance
        // marked for a count after it (the first made it new: no holds).
        if deploy == 0 {
            continue;
        }
        let unmarked: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM api_clients c LEFT JOIN client_allowances a \
             ON a.client_id = c.id WHERE a.recount_after IS NULL \
             OR a.recount_after < UTC_TIMESTAMP(6) + INTERVAL 10 MINUTE",
        )
        .fetch_one(&db.admin)
        .await
        .expect("allowances");
        assert_eq!(unmarked, 0, "every client counted again after the deploy");
    }
    // A secret that is no API key fails the deploy, without showing it.
    let bad = "not a key: s3cret";
    let reason = decide(target(bad)).await.expect_err("FAILED");
    assert!(
        reason.starts_with("cannot install the first admin key"),
        "{reason}"
    );
    assert!(!reason.contains("s3cret"), "{reason}");
}

/// On a server of its own: a grant to PUBLIC reaches every account of the
/// server, the other tests' users too.
#[tokio::test]
async fn a_grant_to_every_account_fails_the_deploy() {
    let server = PrivateMariaDb::start().await;
    let db = TestDb::on(&server.url()).await;
    let booking = UniqueUser::new(Duty::Booking, "Booking0Generated0Password0pQ7rS8");
    deploy(&db, &[&booking]).await;
    let on = format!("`{}`.`api_clients`", db.name);
    by_hand(&db, format!("GRANT INSERT ON {on} TO PUBLIC")).await;
    let target = Target {
        options: shared::db::url_options(&db.url).expect("options"),
        users: vec![booking.app_user()],
        bootstrap_admin: None,
    };
    let reason = decide(target).await.expect_err("FAILED");
    assert!(
        reason.contains(&format!("every account holds INSERT ON {on}")),
        "{reason}"
    );
    assert!(reason.contains("revoke it from PUBLIC"), "{reason}");
}
