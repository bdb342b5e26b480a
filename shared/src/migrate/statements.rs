//! Splits a migration's SQL into its statements, for completing a migration
//! that an earlier run left half applied (see [`super::runner`]).
//!
//! Semicolons end a statement except inside quotes (`'`, `"`, `` ` ``) and
//! comments (`-- `, `#`, `/* */`); comments are dropped. Enough for the
//! plain DDL and DML that migrations/ holds (no stored programs, no
//! `DELIMITER`).

/// The statements of `sql`, trimmed, without comments, empty ones left out.
pub fn split(sql: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut current = String::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
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
            ';' => push(&mut statements, &mut current),
            _ => current.push(c),
        }
    }
    push(&mut statements, &mut current);
    statements
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
        // ALTER; availability_indexes: one ALTER; events: CREATE TABLE
        // events and event_feed, INSERT its one row.
        assert_eq!(counts, vec![2, 3, 1, 3, 1, 1, 3]);
    }
}
