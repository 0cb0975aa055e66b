//! Dimensions: a few attributes of a user's own (team, customer, API key
//! alias) that reports group cost and outcomes by. Each is read from a
//! record field or a key of a record's `extra` object; a workflow takes the
//! first value its attempts carry, in attempt order, as it takes its name.

use std::fmt;
use std::str::FromStr;

/// At most this many dimensions: each is a key column of the rollups, and
/// every distinct combination of keys is a rollup row per minute.
pub const MAX_DIMENSIONS: usize = 3;

/// Record fields a dimension may be read from (the string fields of the
/// record that are not already a report's own grouping).
pub const FIELDS: [&str; 7] =
    ["workflow", "route_group", "provider", "model", "served_provider", "served_model", "layer"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A record field, by its stored column name (one of `FIELDS`).
    Field(&'static str),
    /// A key of `extra` (the fields the record format does not define).
    Extra(String),
}

impl Source {
    /// The SQL expression over a row of `attempts` that yields the value:
    /// the inputs were checked against `FIELDS` and `is_key`, so nothing a
    /// user typed reaches SQL unchecked.
    pub fn sql(&self) -> String {
        match self {
            Source::Field(column) => format!("{column}::VARCHAR"),
            Source::Extra(key) => format!("extra_value(extra, '{key}')"),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Field(column) => f.write_str(column),
            Source::Extra(key) => write!(f, "extra.{key}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dimension {
    pub name: String,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DimensionError {
    #[error("`{0}` is not NAME=SOURCE (say team=extra.team)")]
    Syntax(String),
    #[error("dimension name `{0}` must be 1-32 of a-z, 0-9 and _, starting with a letter")]
    Name(String),
    #[error(
        "dimension source `{0}` is neither a record field ({fields}) nor extra.KEY \
         (KEY: 1-128 of letters, digits and _ . : / -)",
        fields = FIELDS.join(", ")
    )]
    Source(String),
    #[error("at most {MAX_DIMENSIONS} dimensions, got {0}")]
    TooMany(usize),
    #[error("dimension `{0}` is named twice")]
    Repeated(String),
}

fn is_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn is_key(key: &str) -> bool {
    (1..=128).contains(&key.len())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '-'))
}

impl FromStr for Source {
    type Err = DimensionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Some(key) = text.strip_prefix("extra.") {
            return if is_key(key) {
                Ok(Source::Extra(key.to_string()))
            } else {
                Err(DimensionError::Source(text.to_string()))
            };
        }
        FIELDS
            .iter()
            .find(|f| **f == text)
            .map(|f| Source::Field(f))
            .ok_or_else(|| DimensionError::Source(text.to_string()))
    }
}

impl FromStr for Dimension {
    type Err = DimensionError;

    /// `team=extra.team`, `gateway_group=route_group`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (name, source) = text.split_once('=').ok_or_else(|| DimensionError::Syntax(text.to_string()))?;
        let name = name.trim();
        if !is_name(name) {
            return Err(DimensionError::Name(name.to_string()));
        }
        Ok(Dimension { name: name.to_string(), source: source.trim().parse()? })
    }
}

/// Checks a whole set: a bounded count, no name twice.
pub fn check(dimensions: &[Dimension]) -> Result<(), DimensionError> {
    if dimensions.len() > MAX_DIMENSIONS {
        return Err(DimensionError::TooMany(dimensions.len()));
    }
    for (i, d) in dimensions.iter().enumerate() {
        if dimensions[..i].iter().any(|e| e.name == d.name) {
            return Err(DimensionError::Repeated(d.name.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_fields_or_extra_keys_and_nothing_else_reaches_sql() {
        let d: Dimension = "team=extra.team".parse().unwrap();
        assert_eq!(d.source.sql(), "extra_value(extra, 'team')");
        let d: Dimension = "group = route_group".parse().unwrap();
        assert_eq!((d.name.as_str(), d.source.to_string().as_str()), ("group", "route_group"));
        for bad in ["team=extra.te'am", "team=extra.", "team=status; DROP TABLE attempts", "team=attempts"] {
            assert!(matches!(bad.parse::<Dimension>(), Err(DimensionError::Source(_))), "{bad}");
        }
        assert!(matches!("Team=extra.team".parse::<Dimension>(), Err(DimensionError::Name(_))));
        assert!(matches!("team".parse::<Dimension>(), Err(DimensionError::Syntax(_))));
    }

    #[test]
    fn a_set_is_small_and_names_are_unique() {
        let parse = |s: &str| s.parse::<Dimension>().unwrap();
        assert_eq!(
            check(&[parse("a=extra.a"), parse("a=extra.b")]),
            Err(DimensionError::Repeated("a".to_string()))
        );
        let four: Vec<_> = ["a", "b", "c", "d"].iter().map(|n| parse(&format!("{n}=extra.{n}"))).collect();
        assert_eq!(check(&four), Err(DimensionError::TooMany(4)));
        assert_eq!(check(&four[..3]), Ok(()));
    }
}
