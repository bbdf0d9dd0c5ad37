//! Typed rows: every row the coordinator reads is decoded by column name into a typed
//! struct ([`FromRow`]), never by position. A bad row (a NULL where the type allows none, a
//! column of another type, an unknown state name) is a [`RowError`], never a default: the
//! caller decides whether that refuses the request or leaves one item out with a log line.

use tokio_postgres::types::FromSql;
use tokio_postgres::Row;

/// A row that could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum RowError {
    /// The column is missing, NULL where not allowed, or of another type.
    #[error("failed to read column `{column}`: {source}")]
    Column {
        /// The column's name.
        column: &'static str,
        /// What the driver said.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The column holds a value the coordinator does not know.
    #[error("failed to decode column `{column}`: {problem}")]
    Value {
        /// The column's name.
        column: &'static str,
        /// What is wrong with the value.
        problem: String,
    },
}

/// A struct decoded from one row by column names.
pub trait FromRow: Sized {
    /// Decodes `row`; a bad row is an error.
    fn from_row(row: &Row) -> Result<Self, RowError>;

    /// Decodes every row; the first bad one is the error.
    fn from_rows(rows: &[Row]) -> Result<Vec<Self>, RowError> {
        rows.iter().map(Self::from_row).collect()
    }
}

/// Column `column` of `row` as `T` (an `Option<T>` for a nullable column: a NULL into a
/// non-`Option` is an error).
pub fn col<'a, T: FromSql<'a>>(row: &'a Row, column: &'static str) -> Result<T, RowError> {
    row.try_get(column)
        .map_err(|source| RowError::Column { column, source })
}

/// Column `column` parsed by `parse` (a state name into its enum): an unknown name is an
/// error naming the value.
pub fn parsed<T>(
    row: &Row,
    column: &'static str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, RowError> {
    let s: &str = col(row, column)?;
    parse(s).ok_or_else(|| RowError::Value {
        column,
        problem: format!("`{s}` is not a known value"),
    })
}

/// Like [`parsed`] for a nullable column.
pub fn parsed_opt<T>(
    row: &Row,
    column: &'static str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, RowError> {
    let s: Option<&str> = col(row, column)?;
    s.map(|s| {
        parse(s).ok_or_else(|| RowError::Value {
            column,
            problem: format!("`{s}` is not a known value"),
        })
    })
    .transpose()
}

/// A count column (`bigint`), refusing a negative one.
pub fn count(row: &Row, column: &'static str) -> Result<u64, RowError> {
    let n: i64 = col(row, column)?;
    u64::try_from(n).map_err(|_| RowError::Value {
        column,
        problem: format!("{n} is not a count"),
    })
}
