//! Typed rows: every row the coordinator reads is decoded by column name into a typed
//! struct ([`FromRow`]), never by position. A bad row (a NULL where the type allows none, a
//! column of another type, an unknown state name) is a [`RowError`], never a default: the
//! caller decides whether that refuses the request or leaves one item out with a log line.
//! Rows decoded through [`all`] or [`one`] name their query (its `.sql` file) as well as the
//! column. `coordinator/tests/typed_rows.rs` fails if a read by column position returns.

use tokio_postgres::types::{FromSql, Kind, Type};
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
    /// A row of a named query did not decode.
    #[error("failed to decode a row of `{query}`: {source}")]
    Query {
        /// The query (its `.sql` file).
        query: &'static str,
        /// What was wrong with the row.
        #[source]
        source: Box<RowError>,
    },
}

impl RowError {
    /// This error, naming the query whose row it is about.
    pub fn in_query(self, query: &'static str) -> RowError {
        match self {
            RowError::Query { .. } => self,
            other => RowError::Query {
                query,
                source: Box::new(other),
            },
        }
    }
}

/// Decodes every row of query `query` with `decode`; the first bad row is the error, naming
/// the query and the column.
pub fn all<'a, T>(
    query: &'static str,
    rows: &'a [Row],
    decode: impl FnMut(&'a Row) -> Result<T, RowError>,
) -> Result<Vec<T>, RowError> {
    rows.iter()
        .map(decode)
        .collect::<Result<_, _>>()
        .map_err(|e| e.in_query(query))
}

/// Decodes one row of query `query` with `decode` (a bad row names the query and column).
pub fn one<'a, T>(
    query: &'static str,
    row: &'a Row,
    decode: impl FnOnce(&'a Row) -> Result<T, RowError>,
) -> Result<T, RowError> {
    decode(row).map_err(|e| e.in_query(query))
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

/// The text of a column that holds a name: `text` (or another string type), or a label of
/// a PostgreSQL enum type (`run_state`, `item_state`: migration 0036), whose binary form is
/// the label's text. [`parsed`] reads through it, so a state reads the same whichever it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label<'a>(pub &'a str);

impl<'a> FromSql<'a> for Label<'a> {
    fn from_sql(
        _ty: &Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Label(std::str::from_utf8(raw)?))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(ty.kind(), Kind::Enum(_)) || <&str as FromSql>::accepts(ty)
    }
}

/// Column `column` parsed by `parse` (a state name into its enum): an unknown name is an
/// error naming the value.
pub fn parsed<T>(
    row: &Row,
    column: &'static str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, RowError> {
    let Label(s) = col(row, column)?;
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
    let s: Option<Label> = col(row, column)?;
    s.map(|Label(s)| {
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

/// A nullable count column (`bigint`: NULL where nothing was reported), refusing a negative
/// one.
pub fn count_opt(row: &Row, column: &'static str) -> Result<Option<u64>, RowError> {
    let n: Option<i64> = col(row, column)?;
    n.map(|n| {
        u64::try_from(n).map_err(|_| RowError::Value {
            column,
            problem: format!("{n} is not a count"),
        })
    })
    .transpose()
}

/// A small count or position column (`integer`: a seq, a number of failures), refusing a
/// negative one.
pub fn count32(row: &Row, column: &'static str) -> Result<u32, RowError> {
    let n: i32 = col(row, column)?;
    u32::try_from(n).map_err(|_| RowError::Value {
        column,
        problem: format!("{n} is not a count"),
    })
}

/// A JSON document column (`jsonb`, or `text`/`json` holding JSON) decoded as `T`: a document
/// that does not decode is an error naming the column and what serde said.
pub fn json<T: serde::de::DeserializeOwned>(
    row: &Row,
    column: &'static str,
) -> Result<T, RowError> {
    let value: serde_json::Value = col(row, column)?;
    serde_json::from_value(value).map_err(|e| RowError::Value {
        column,
        problem: e.to_string(),
    })
}
