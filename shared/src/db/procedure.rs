//! Tests' view of the stored procedures: the text in force, to compare word
//! for word with the Rust constants whose statements a procedure repeats.

/// The SQL of the last migration that defines procedure `name` (the one in
/// force), its whitespace folded as `words` folds it.
pub(crate) fn procedure_sql(name: &str) -> String {
    let defines = format!("CREATE PROCEDURE {name}(");
    let migration = super::MIGRATOR
        .iter()
        .rev()
        .find(|m| m.sql.as_str().contains(&defines))
        .unwrap_or_else(|| panic!("no migration defines {name}"));
    words(migration.sql.as_str())
}

/// `sql` with every run of whitespace one space: a statement laid out on
/// several lines compares equal to its one-line form.
pub(crate) fn words(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}
