//! Every Rust package the build links is under a licence that lets the
//! project ship under Apache-2.0: read from `cargo metadata` (the licence
//! each crate declares, as an SPDX expression) for this machine's platform.
//! A new dependency under another licence fails here until someone reads
//! it and adds it to `PERMITTED` with the reason.

use std::process::Command;

/// Permissive licences (and Unicode's and the CDLA's data licences, for
/// the tables and certificates some crates embed). No copyleft licence is
/// here: one would need a decision, not a line.
const PERMITTED: [&str; 14] = [
    "MIT",
    "Apache-2.0",
    "Apache-2.0 WITH LLVM-exception",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "ISC",
    "Zlib",
    "0BSD",
    "Unlicense",
    "CC0-1.0",
    "BSL-1.0",
    "Unicode-3.0",
    "Unicode-DFS-2016",
    "CDLA-Permissive-2.0",
];

/// Whether an SPDX expression is satisfied by the permitted licences: an
/// `OR` needs one side, an `AND` both. The old `/` separator means `OR`.
fn permitted(expression: &str) -> Result<bool, String> {
    let spaced = expression.replace('(', " ( ").replace(')', " ) ").replace('/', " OR ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let (value, rest) = any_of(&tokens)?;
    if rest.is_empty() { Ok(value) } else { Err(format!("unexpected {:?} in {expression:?}", rest[0])) }
}

fn any_of<'a>(tokens: &'a [&'a str]) -> Result<(bool, &'a [&'a str]), String> {
    let (mut value, mut rest) = all_of(tokens)?;
    while rest.first() == Some(&"OR") {
        let (next, after) = all_of(&rest[1..])?;
        (value, rest) = (value || next, after);
    }
    Ok((value, rest))
}

fn all_of<'a>(tokens: &'a [&'a str]) -> Result<(bool, &'a [&'a str]), String> {
    let (mut value, mut rest) = one(tokens)?;
    while rest.first() == Some(&"AND") {
        let (next, after) = one(&rest[1..])?;
        (value, rest) = (value && next, after);
    }
    Ok((value, rest))
}

fn one<'a>(tokens: &'a [&'a str]) -> Result<(bool, &'a [&'a str]), String> {
    match tokens {
        ["(", rest @ ..] => match any_of(rest)? {
            (value, [")", after @ ..]) => Ok((value, after)),
            _ => Err("an unclosed parenthesis".into()),
        },
        [id, "WITH", exception, rest @ ..] => {
            Ok((PERMITTED.contains(&format!("{id} WITH {exception}").as_str()), rest))
        }
        [id, rest @ ..] if !matches!(*id, "OR" | "AND" | ")") => Ok((PERMITTED.contains(id), rest)),
        _ => Err(format!("a licence expected at {tokens:?}")),
    }
}

#[test]
fn every_linked_package_has_a_permitted_licence() {
    let rustc = Command::new("rustc").arg("-vV").output().unwrap();
    let host = String::from_utf8(rustc.stdout).unwrap();
    let host = host.lines().find_map(|l| l.strip_prefix("host: ")).unwrap().to_string();
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--filter-platform", &host])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let linked: Vec<&str> =
        metadata["resolve"]["nodes"].as_array().unwrap().iter().map(|n| n["id"].as_str().unwrap()).collect();
    let mut refused = Vec::new();
    let packages = metadata["packages"].as_array().unwrap();
    for package in packages.iter().filter(|p| linked.contains(&p["id"].as_str().unwrap())) {
        let name = format!("{} {}", package["name"].as_str().unwrap(), package["version"].as_str().unwrap());
        match package["license"].as_str().map(permitted) {
            Some(Ok(true)) => {}
            Some(Ok(false)) => refused.push(format!("{name}: {}", package["license"])),
            Some(Err(why)) => refused.push(format!("{name}: {why}")),
            None => refused.push(format!("{name}: no licence declared")),
        }
    }
    assert!(linked.len() > 100, "{} packages: the metadata was not read", linked.len());
    assert!(refused.is_empty(), "packages under licences not permitted:\n{}", refused.join("\n"));
}

#[test]
fn licence_expressions_are_read_as_spdx_says() {
    assert_eq!(permitted("MIT OR Apache-2.0"), Ok(true));
    assert_eq!(permitted("MIT/Apache-2.0"), Ok(true));
    assert_eq!(permitted("(MIT OR Apache-2.0) AND Unicode-3.0"), Ok(true));
    assert_eq!(permitted("Apache-2.0 WITH LLVM-exception OR GPL-3.0"), Ok(true));
    assert_eq!(permitted("GPL-3.0-only"), Ok(false));
    assert_eq!(permitted("MIT AND GPL-2.0"), Ok(false));
    assert_eq!(permitted("GPL-2.0 OR MPL-2.0"), Ok(false));
    assert_eq!(permitted("GPL-2.0 WITH Classpath-exception-2.0"), Ok(false));
    assert!(permitted("(MIT OR").is_err());
    assert!(permitted("MIT OR OR").is_err());
}
