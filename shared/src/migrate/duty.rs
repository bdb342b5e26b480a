//! What each of the application's database users is for, and so exactly
//! which privileges it holds (`users.rs` keeps them, `grants.rs` reads
//! what an account holds against them).

use sqlx::MySqlConnection;

/// What a user is for, and so what it may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duty {
    Booking,
    ClientAdmin,
}

/// Privileges on one object of the application's database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub object: Object,
    pub privileges: &'static [&'static str],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Object {
    Table(&'static str),
    Procedure(&'static str),
}

const ROWS: &[&str] = &["SELECT", "INSERT", "UPDATE", "DELETE"];

/// Every statement of the booking functions, the sweeper and the publisher
/// reads or writes these, and no other.
const BOOKING: &[Grant] = &[
    // Slot administration, holds, the sweeper's repairs and retention.
    Grant {
        object: Object::Table("slots"),
        privileges: ROWS,
    },
    Grant {
        object: Object::Table("holds"),
        privileges: ROWS,
    },
    // The key gate, and a capped hold's lock on its client's row when it
    // counts.
    Grant {
        object: Object::Table("api_clients"),
        privileges: &["SELECT"],
    },
    // The waiting list (SPEC §18): joined, offered, ended; its entries go
    // with their slot (the foreign key's cascade), never deleted one by one.
    Grant {
        object: Object::Table("waitlist_entries"),
        privileges: &["SELECT", "INSERT", "UPDATE"],
    },
    // The capped clients' allowances (a missing one made by a hold).
    Grant {
        object: Object::Table("client_allowances"),
        privileges: &["SELECT", "INSERT", "UPDATE"],
    },
    // Written by events_commit (SQL SECURITY INVOKER: with these
    // privileges), sequenced, published, read as feeds, purged.
    Grant {
        object: Object::Table("events"),
        privileges: ROWS,
    },
    Grant {
        object: Object::Table("event_feed"),
        privileges: &["SELECT", "UPDATE"],
    },
    Grant {
        object: Object::Table("sweep_reports"),
        privileges: &["SELECT", "UPDATE"],
    },
    Grant {
        object: Object::Procedure("events_commit"),
        privileges: &["EXECUTE"],
    },
    // A capped hold's claim: its allowance, then the slot's (SQL SECURITY
    // INVOKER, with the grants above).
    Grant {
        object: Object::Procedure("hold_claim_capped"),
        privileges: &["EXECUTE"],
    },
    // The capped claim with the waiting list's guard (SPEC §18); the one
    // above stays for the release before it, during a deploy.
    Grant {
        object: Object::Procedure("hold_claim_waiting"),
        privileges: &["EXECUTE"],
    },
    // A hold's and a confirm's common paths, each in one CALL that
    // commits (SQL SECURITY INVOKER, with the grants above).
    Grant {
        object: Object::Procedure("hold_place"),
        privileges: &["EXECUTE"],
    },
    // The hold's common path with a simple INSERT; `hold_place` stays for
    // the release before it, during a deploy.
    Grant {
        object: Object::Procedure("hold_place_simple"),
        privileges: &["EXECUTE"],
    },
    Grant {
        object: Object::Procedure("hold_confirm"),
        privileges: &["EXECUTE"],
    },
    // The hold's two claims with the projection's floor
    // (…_hold_place_floor.sql); `hold_place_simple` and
    // `hold_claim_waiting` stay for the release before them, during a
    // deploy.
    Grant {
        object: Object::Procedure("hold_place_floor"),
        privileges: &["EXECUTE"],
    },
    Grant {
        object: Object::Procedure("hold_claim_floor"),
        privileges: &["EXECUTE"],
    },
    // Webhooks (SPEC §20): the subscriptions API, the dispatcher's
    // deliveries and the signer's attempts; a subscription's deliveries go
    // with it (the foreign key's cascade) and with their events.
    Grant {
        object: Object::Table("webhook_subscriptions"),
        privileges: ROWS,
    },
    Grant {
        object: Object::Table("webhook_deliveries"),
        privileges: ROWS,
    },
];

/// Creating, listing, changing and revoking clients (a revocation is an
/// UPDATE: a client's row is never deleted); a changed cap marks the
/// client's allowance for a count (made if missing; MariaDB reads the
/// row for the `VALUES()` of its `ON DUPLICATE KEY UPDATE`).
const CLIENT_ADMIN: &[Grant] = &[
    Grant {
        object: Object::Table("api_clients"),
        privileges: &["SELECT", "INSERT", "UPDATE"],
    },
    Grant {
        object: Object::Table("client_allowances"),
        privileges: &["SELECT", "INSERT", "UPDATE"],
    },
    // A revocation gives the client's seats back (SPEC §23.9): under each
    // slot's lock (`FOR UPDATE`: on MySQL 8 with UPDATE), the reclaim and
    // the release, its holds cancelled, its entries ended, the line's
    // offers (holds made for other clients), and their events. Nothing
    // deleted.
    Grant {
        object: Object::Table("slots"),
        privileges: &["SELECT", "UPDATE"],
    },
    Grant {
        object: Object::Table("holds"),
        privileges: &["SELECT", "INSERT", "UPDATE"],
    },
    Grant {
        object: Object::Table("waitlist_entries"),
        privileges: &["SELECT", "UPDATE"],
    },
    Grant {
        object: Object::Table("events"),
        privileges: &["INSERT"],
    },
];

impl Duty {
    pub fn grants(self) -> &'static [Grant] {
        match self {
            Duty::Booking => BOOKING,
            Duty::ClientAdmin => CLIENT_ADMIN,
        }
    }

    /// Schema-wide privileges the duty needs on this server beyond its
    /// table grants. MySQL 8 lets `SELECT … FOR UPDATE` lock a row only
    /// with one of DELETE, UPDATE or LOCK TABLES on its table besides
    /// SELECT; a capped hold that counts locks its client's `api_clients`
    /// row, and of the three only LOCK TABLES (schema-wide, and only on tables the user
    /// may SELECT) writes nothing. MariaDB needs SELECT alone.
    pub fn schema_privileges(self, server: Server) -> &'static [&'static str] {
        match (self, server) {
            (Duty::Booking, Server::MySql) => &["LOCK TABLES"],
            _ => &[],
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Duty::Booking => "booking user",
            Duty::ClientAdmin => "client administration user",
        }
    }
}

/// The server family: their grant tables, and a duty's privileges, differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    MariaDb,
    MySql,
}

impl Server {
    pub async fn of(conn: &mut MySqlConnection) -> Result<Self, sqlx::Error> {
        let version: String = sqlx::query_scalar("SELECT CAST(VERSION() AS CHAR)")
            .fetch_one(&mut *conn)
            .await?;
        Ok(if version.contains("MariaDB") {
            Server::MariaDb
        } else {
            Server::MySql
        })
    }
}
