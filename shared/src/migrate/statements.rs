//! Splits a migration's SQL into its statements, for completing a migration
//! that an earlier run left half applied (see [`super::runner`]).
//!
//! Semicolons end a statement except inside quotes (`'`, `"`, `` ` ``) and
//! comments (`-- `, `#`, `/* */`), and inside the `BEGIN … END` body of a
//! stored program (`CREATE … PROCEDURE | FUNCTION | TRIGGER | EVENT`);
//! comments are dropped. Enough for what migrations/ holds: plain DDL and
//! DML, and a stored procedure written without `DELIMITER` (a client
//! command, never sent to the server).

/// The statements of `sql`, trimmed, without comments, empty ones left out.
pub fn split(sql: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut current = String::new();
    let mut block = Block::default();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if !(c.is_ascii_alphanumeric() || c == '_') {
            block.end_word();
        }
        match c {
            '\'' | '"' | '`' => {
                current.push(c);
                while let Some(inner) = chars.next() {
                    current.push(inner);
                    if inner == '\\' && c != '`' {
                        if let Some(escaped) = chars.next() {
                            current.push(escaped);
                        }
                    } else if inner == c {
                        // A doubled quote is an escaped quote.
                        if chars.peek() == Some(&c) {
                            current.push(chars.next().unwrap_or(c));
                        } else {
                            break;
                        }
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                let mut ahead = chars.clone();
                ahead.next();
                if ahead.peek().is_none_or(|next| next.is_whitespace()) {
                    skip_line(&mut chars);
                    current.push('\n');
                } else {
                    current.push(c);
                }
            }
            '#' => {
                skip_line(&mut chars);
                current.push('\n');
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = '\0';
                for inner in chars.by_ref() {
                    if last == '*' && inner == '/' {
                        break;
                    }
                    last = inner;
                }
                current.push(' ');
            }
            ';' => {
                if block.inside_at_semicolon() && is_stored_program(&current) {
                    current.push(c);
                } else {
                    push(&mut statements, &mut current);
                    block = Block::default();
                }
            }
            _ => {
                if c.is_ascii_alphanumeric() || c == '_' {
                    block.word.push(c);
                }
                current.push(c);
            }
        }
    }
    push(&mut statements, &mut current);
    statements
}

/// The `BEGIN … END` nesting of a statement, from its words outside quotes
/// and comments. `END IF`, `END LOOP` and the like close no `BEGIN`; nor
/// does the `END` of a `CASE`, the statement's (`END CASE`) or the
/// expression's (a bare `END`, inside a body's SELECT or SET).
#[derive(Default)]
struct Block {
    depth: usize,
    /// `CASE`s open, statement or expression: the next bare `END` is theirs.
    cases: usize,
    word: String,
    /// An `END` whose next word says what it closes.
    end: bool,
}

impl Block {
    fn end_word(&mut self) {
        if self.word.is_empty() {
            return;
        }
        let word = std::mem::take(&mut self.word).to_ascii_uppercase();
        if std::mem::take(&mut self.end) {
            match word.as_str() {
                "IF" | "LOOP" | "WHILE" | "REPEAT" | "FOR" => {}
                "CASE" => self.cases = self.cases.saturating_sub(1),
                _ => self.close(),
            }
            // The word after `END` opens nothing, even `CASE`.
            return;
        }
        match word.as_str() {
            "BEGIN" => self.depth += 1,
            "CASE" => self.cases += 1,
            "END" => self.end = true,
            _ => {}
        }
    }

    /// A bare `END`: an open `CASE` expression's, else the body's.
    fn close(&mut self) {
        if self.cases > 0 {
            self.cases -= 1;
        } else {
            self.depth = self.depth.saturating_sub(1);
        }
    }

    /// At a `;`: whether it is inside a body (an `END` just before it
    /// closes what it closes first).
    fn inside_at_semicolon(&mut self) -> bool {
        self.end_word();
        if std::mem::take(&mut self.end) {
            self.close();
        }
        self.depth > 0
    }
}

/// `CREATE [OR REPLACE] [DEFINER = …] PROCEDURE | FUNCTION | TRIGGER | EVENT`.
fn is_stored_program(statement: &str) -> bool {
    let mut words = statement.split_whitespace().map(str::to_ascii_uppercase);
    words.next().as_deref() == Some("CREATE")
        && words
            .take(6)
            .any(|w| matches!(w.as_str(), "PROCEDURE" | "FUNCTION" | "TRIGGER" | "EVENT"))
}

fn skip_line(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for inner in chars.by_ref() {
        if inner == '\n' {
            break;
        }
    }
}

fn push(statements: &mut Vec<String>, current: &mut String) {
    let statement = current.trim();
    if !statement.is_empty() {
        statements.push(statement.to_string());
    }
    current.clear();
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn statements_split_on_top_level_semicolons_only() {
        let sql = "-- a comment; not a statement\n\
                   CREATE TABLE t (a TEXT DEFAULT 'x;y', `b;` INT); # trailing; comment\n\
                   /* block; */ UPDATE t SET a = 'it''s;' WHERE a = \"q\\\";\";\n\
                   SELECT 1 --not-a-comment\n;\n  -- only a comment\n";
        assert_eq!(
            split(sql),
            vec![
                "CREATE TABLE t (a TEXT DEFAULT 'x;y', `b;` INT)".to_string(),
                "UPDATE t SET a = 'it''s;' WHERE a = \"q\\\";\"".to_string(),
                "SELECT 1 --not-a-comment".to_string(),
            ]
        );
    }

    #[test]
    fn the_embedded_migrations_split_as_written() {
        let counts: Vec<usize> = crate::db::MIGRATOR
            .iter()
            .map(|m| split(m.sql.as_str()).len())
            .collect();
        // create_slots_and_holds: 2 tables; held_seats_counter: ALTER,
        // UPDATE, CREATE INDEX; sweeper_checked_at: one ALTER; api_clients:
        // CREATE TABLE, INSERT anonymous, ALTER holds; hold_quantity: one
        // ALTER; availability_indexes: one ALTER; events: 2 tables and the
        // feed's row; events_commit: one procedure; client_held_seats and
        // slot_client_share: two ALTERs each; hoarding_report: its table
        // and row; client_allowances: its table and every client's row;
        // hold_claim_capped: one procedure; waitlist: its table, two
        // ALTERs; hold_claim_waiting: one procedure; hold_requests: one
        // ALTER; hold_place, hold_confirm and hold_place_simple: one
        // procedure each; holds_ended_at: an ALTER and an index;
        // client_allowances_checked_at and client_cancellations: one ALTER
        // each; webhooks: two tables; held_expires_min: one ALTER;
        // hold_place_floor: two procedures; webhook_last_delivered and
        // webhook_deleted_at: one ALTER each.
        assert_eq!(
            counts,
            vec![
                2, 3, 1, 3, 1, 1, 3, 1, 2, 2, 2, 2, 1, 3, 1, 1, 1, 1, 1, 2, 1, 1, 2, 1, 2, 1, 1
            ]
        );
    }

    #[test]
    fn a_stored_program_is_one_statement() {
        let sql = "CREATE PROCEDURE p(x INT)\nBEGIN\n  IF x > 0 THEN\n    INSERT INTO t VALUES ('end;');\n  \
                   END IF;\n  lbl: BEGIN SELECT 1; END lbl;\n  COMMIT; -- begin; end;\nEND;\n\
                   BEGIN; UPDATE t SET a = 1; COMMIT;\nSELECT 'BEGIN'; SELECT 2";
        let statements = split(sql);
        assert_eq!(statements.len(), 6, "{statements:#?}");
        assert!(statements[0].starts_with("CREATE PROCEDURE p(x INT)"));
        assert!(
            statements[0].ends_with("COMMIT; \nEND"),
            "{:?}",
            statements[0]
        );
        assert_eq!(
            statements[1..],
            [
                "BEGIN",
                "UPDATE t SET a = 1",
                "COMMIT",
                "SELECT 'BEGIN'",
                "SELECT 2"
            ]
        );
    }

    #[test]
    fn a_case_inside_a_body_closes_no_begin() {
        let sql = "CREATE PROCEDURE p(x INT)\nBEGIN\n  CASE x WHEN 1 THEN SELECT 1; ELSE SELECT 2; END CASE;\n  \
                   SELECT CASE WHEN x > 0 THEN 'a' ELSE 'b' END;\n  \
                   SET @y = CASE x WHEN 1 THEN 2 END + 1;\n  COMMIT;\nEND;\nSELECT CASE WHEN 1 THEN 2 END; SELECT 3";
        let statements = split(sql);
        assert_eq!(statements.len(), 3, "{statements:#?}");
        assert!(
            statements[0].ends_with("COMMIT;\nEND"),
            "{:?}",
            statements[0]
        );
        assert_eq!(
            statements[1..],
            ["SELECT CASE WHEN 1 THEN 2 END", "SELECT 3"]
        );
    }
}
