//! The files users hand the commands (policies, alert rules, price and
//! alias tables, tokens): read whole, within a bound, so a path that names
//! a device, a huge file or a folder is an error naming it, never a read
//! without end.

use std::io::{self, Read};
use std::path::Path;

/// The largest such file: a policy or a price table of thousands of
/// entries takes a few hundred KiB.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// The text of the file at `path`.
pub fn read_config(path: &Path) -> io::Result<String> {
    read_bounded(path, MAX_CONFIG_BYTES as usize)
}

/// The text of the file at `path`, refused past `limit` bytes.
pub fn read_bounded(path: &Path, limit: usize) -> io::Result<String> {
    let file = std::fs::File::open(path)?;
    if file.metadata()?.is_dir() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "it is a folder, not a file"));
    }
    let mut text = String::new();
    file.take(limit as u64 + 1).read_to_string(&mut text)?;
    if text.len() > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it holds more than {} MiB, more than any file of this kind", limit >> 20),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_folders_and_huge_files_are_refused_by_name() {
        let zero = read_config(Path::new("/dev/zero")).unwrap_err();
        assert!(zero.to_string().contains("more than 16 MiB"), "{zero}");
        let folder = read_config(Path::new("/")).unwrap_err();
        assert!(folder.to_string().contains("folder"), "{folder}");
        let missing = read_config(Path::new("/nonexistent/policy.toml")).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }
}
