//! The names a lake writer gives itself and its partitions, checked where a
//! flag, a file name or a manifest states them.

/// Bounds of `--lake-buckets`: a partition per bucket and day, so a few
/// hundred at most keep files from getting tiny.
pub const MAX_LAKE_BUCKETS: u32 = 1024;

/// A node id as `--node-id` takes it: it names files that Spark must not
/// skip (no leading `.` or `_`) and that every file system accepts.
pub fn node_id(id: &str) -> Result<String, String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let first_ok = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if (1..=64).contains(&id.len()) && first_ok && id.chars().all(ok_char) {
        Ok(id.to_string())
    } else {
        Err(format!(
            "`{id}` is not a node id: 1 to 64 letters, digits, `.`, `_` or `-`, starting with a letter or digit"
        ))
    }
}

/// `--lake-buckets`: 1 to [`MAX_LAKE_BUCKETS`].
pub fn lake_buckets(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if (1..=MAX_LAKE_BUCKETS).contains(&n) => Ok(n),
        _ => Err(format!("`{text}` is not a bucket count: a whole number from 1 to {MAX_LAKE_BUCKETS}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_are_file_names_spark_reads() {
        assert_eq!(node_id("ingest-1.eu_west").as_deref(), Ok("ingest-1.eu_west"));
        for bad in ["", "_hidden", ".hidden", "a/b", "a b", "né", &"x".repeat(65)] {
            assert!(node_id(bad).unwrap_err().starts_with(&format!("`{bad}` is not a node id")), "{bad}");
        }
    }

    #[test]
    fn bucket_counts_are_bounded() {
        assert_eq!(lake_buckets("16"), Ok(16));
        assert_eq!(lake_buckets("1024"), Ok(1024));
        for bad in ["0", "1025", "-1", "x", ""] {
            assert_eq!(
                lake_buckets(bad).unwrap_err(),
                format!("`{bad}` is not a bucket count: a whole number from 1 to 1024")
            );
        }
    }
}
