//! The shape of the code, as ARCHITECTURE.md states it: which folder may
//! use which, and no circle of imports between files or between folders.
//! Read from the source: every `crate::…` and `super::…` path of every file
//! under `src/` (tests modules left out), resolved to the file it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// (folder, folders it never uses): the "never" rules of ARCHITECTURE.md.
/// The store is below everything that reads it; the dashboard draws what
/// it is handed; the read side answers without knowing who asks; the
/// telemetry is below everything that emits an event; the lake is a
/// reader and a writer of files beside the store, never a front door.
const NEVER: &[(&str, &[&str])] = &[
    (
        "store",
        &[
            "alerts",
            "metrics",
            "report",
            "read",
            "service",
            "cli",
            "dashboard",
            "pipeline",
            "simulate",
            "lake",
        ],
    ),
    ("lake", &["alerts", "service", "cli", "dashboard", "metrics"]),
    ("report", &["read", "alerts", "service", "cli", "dashboard", "metrics"]),
    ("read", &["alerts", "service", "cli", "dashboard", "metrics"]),
    ("dashboard", &["store", "read", "service", "cli", "alerts"]),
    ("metrics", &["report", "read", "alerts", "service", "cli", "dashboard"]),
    ("alerts", &["service", "cli", "dashboard"]),
    ("service", &["cli"]),
    (
        "telemetry",
        &[
            "store",
            "report",
            "read",
            "alerts",
            "metrics",
            "service",
            "cli",
            "dashboard",
            "pipeline",
            "simulate",
            "lake",
        ],
    ),
];

/// The module path of a file: `src/service/http.rs` -> `service::http`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without comments and without its tests module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path that starts with `crate::` or `super::`, with `use` groups
/// (`use super::{a, b::{c, d}}`) expanded.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word =
            i == 0 || !(bytes[i - 1].is_alphanumeric() || bytes[i - 1] == '_' || bytes[i - 1] == ':');
        let rest: String = bytes[i..bytes.len().min(i + 7)].iter().collect();
        if starts_word && (rest.starts_with("crate::") || rest.starts_with("super::")) {
            let (paths, end) = parse_path(&bytes, i, Vec::new());
            out.extend(paths);
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// Parses `a::b::{c, d::e}` from `at`, each path prefixed by `prefix`.
fn parse_path(chars: &[char], mut at: usize, prefix: Vec<String>) -> (Vec<Vec<String>>, usize) {
    let mut segments = prefix;
    loop {
        let start = at;
        while at < chars.len() && (chars[at].is_alphanumeric() || chars[at] == '_') {
            at += 1;
        }
        if at > start {
            segments.push(chars[start..at].iter().collect());
        }
        if chars.get(at) == Some(&':') && chars.get(at + 1) == Some(&':') {
            at += 2;
            if chars.get(at) == Some(&'{') {
                at += 1;
                let mut all = Vec::new();
                loop {
                    while chars.get(at).is_some_and(|c| c.is_whitespace() || *c == ',') {
                        at += 1;
                    }
                    if at >= chars.len() || chars[at] == '}' {
                        return (all, at + 1);
                    }
                    let (paths, end) = parse_path(chars, at, segments.clone());
                    all.extend(paths);
                    at = end;
                }
            }
            continue;
        }
        return (vec![segments], at);
    }
}

/// The file a path names: its longest prefix that is a module of ours.
fn resolve(modules: &BTreeMap<Vec<String>, String>, from: &[String], path: &[String]) -> Option<String> {
    let mut base: Vec<String> = Vec::new();
    let mut rest = path;
    if rest.first().map(String::as_str) == Some("crate") {
        rest = &rest[1..];
    } else {
        base = from.to_vec();
        while rest.first().map(String::as_str) == Some("super") {
            base.pop();
            rest = &rest[1..];
        }
    }
    let mut full = base;
    full.extend(rest.iter().cloned());
    (1..=full.len()).rev().find_map(|n| modules.get(&full[..n]).cloned())
}

/// A circle through `edges`, if any (depth-first search).
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|n| n == next).unwrap();
                    return Some(stack[at..].iter().cloned().chain([next.clone()]).collect());
                }
                Some(_) => {}
                None => {
                    if let Some(found) = visit(next, edges, state, stack) {
                        return Some(found);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in edges.keys() {
        if !state.contains_key(node.as_str())
            && let Some(found) = visit(node, edges, &mut state, &mut Vec::new())
        {
            return Some(found);
        }
    }
    None
}

fn folder_of(file: &str) -> String {
    let path = file.trim_start_matches("src/");
    path.split('/').next().unwrap().trim_end_matches(".rs").to_string()
}

#[test]
fn the_imports_have_no_circle_and_keep_the_never_rules() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let name = |file: &Path| format!("src/{}", file.strip_prefix(&src).unwrap().display());
    // main.rs is the binary's root, not a module of the library.
    let modules: BTreeMap<Vec<String>, String> =
        files.iter().filter(|f| !f.ends_with("main.rs")).map(|f| (module_of(&src, f), name(f))).collect();
    let mut file_edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let from = module_of(&src, file);
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for path in paths_in(&code) {
            if let Some(target) = resolve(&modules, &from, &path)
                && target != name(file)
            {
                file_edges.entry(name(file)).or_default().insert(target);
            }
        }
    }
    let edges: usize = file_edges.values().map(BTreeSet::len).sum();
    assert!(edges > 100, "the check reads the imports: {edges} edges found");
    assert!(file_edges["src/service/http.rs"].contains("src/service/state.rs"), "an edge it must see");
    assert!(file_edges["src/alerts/evaluate.rs"].contains("src/read/mod.rs"), "an edge it must see");

    if let Some(found) = circle(&file_edges) {
        panic!("a circle of imports between files: {}", found.join(" -> "));
    }
    let mut folder_edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut broken = Vec::new();
    for (from, targets) in &file_edges {
        for target in targets {
            let (a, b) = (folder_of(from), folder_of(target));
            if a == b || b == "lib" {
                continue;
            }
            folder_edges.entry(a.clone()).or_default().insert(b.clone());
            if NEVER.iter().any(|(folder, never)| *folder == a && never.contains(&b.as_str())) {
                broken.push(format!("{from} -> {target}"));
            }
        }
    }
    assert!(broken.is_empty(), "imports that break a never rule:\n{}", broken.join("\n"));
    if let Some(found) = circle(&folder_edges) {
        panic!("a circle of imports between folders: {}", found.join(" -> "));
    }
}

#[test]
fn the_check_finds_a_circle_and_expands_use_groups() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    assert_eq!(circle(&edges), None);
    edges.entry("c".into()).or_default().insert("a".into());
    assert_eq!(circle(&edges).unwrap(), ["a", "b", "c", "a"]);
    let paths = paths_in(&code_of("use super::{a::{self, B}, c};\nlet x = crate::d::e(); // crate::f\n"));
    let spelled: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(spelled, ["super::a::self", "super::a::B", "super::c", "crate::d::e"]);
    assert_eq!(code_of("x // crate::f\n#[cfg(test)]\nmod tests { crate::g }").trim(), "x");
}

/// The places that open a transaction by hand, and how many each may:
/// the store's one helper (`in_transaction`) and its probe write, the
/// writer's group commit, the migration. Every read goes through the
/// helper, so none can hide its own error behind a failed rollback.
const TRANSACTIONS: &[(&str, usize)] =
    &[("src/store/mod.rs", 2), ("src/store/writer.rs", 1), ("src/store/migrate.rs", 1)];

/// How many string literals of `code` open a transaction.
fn transactions_opened(code: &str) -> usize {
    code.matches("\"BEGIN").count()
}

#[test]
fn only_the_stores_helper_the_writer_and_the_migration_open_a_transaction() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut broken = Vec::new();
    for file in &files {
        let name = format!("src/{}", file.strip_prefix(&src).unwrap().display());
        let opened = transactions_opened(&code_of(&std::fs::read_to_string(file).unwrap()));
        let allowed = TRANSACTIONS.iter().find(|(f, _)| *f == name).map_or(0, |(_, n)| *n);
        if opened != allowed {
            broken.push(format!("{name}: {opened} (allowed {allowed})"));
        }
    }
    assert!(broken.is_empty(), "transactions opened by hand:\n{}", broken.join("\n"));
    // A planted break is found; a comment or a tests module is not code.
    let planted = "fn read(c: &C) { c.execute_batch(\"BEGIN TRANSACTION\")?; }\n// \"BEGIN\n#[cfg(test)]\nmod tests { \"BEGIN\" }";
    assert_eq!(transactions_opened(&code_of(planted)), 1);
}

/// Whether `code` opens a read snapshot of the store itself.
fn opens_a_snapshot(code: &str) -> bool {
    code.contains(".snapshot(") || code.contains(".tune_read(")
}

/// The read side is the one front of the store's reads: only `read/` (and
/// the store, for its own one-read helpers) opens a snapshot, so what one
/// answer reads is decided in one place and read in one transaction.
#[test]
fn only_the_read_side_opens_a_snapshot() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let broken: Vec<String> = files
        .iter()
        .map(|file| format!("src/{}", file.strip_prefix(&src).unwrap().display()))
        .filter(|name| !name.starts_with("src/read/") && !name.starts_with("src/store/"))
        .filter(|name| {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
            opens_a_snapshot(&code_of(&std::fs::read_to_string(path).unwrap()))
        })
        .collect();
    assert!(broken.is_empty(), "files outside read/ that open a snapshot:\n{}", broken.join("\n"));
    let planted = "fn page(s: &Store) { s.snapshot(&prices, |s| s.series_rows(&range)) }";
    assert!(opens_a_snapshot(&code_of(planted)));
    assert!(!opens_a_snapshot(&code_of("// s.snapshot(\n#[cfg(test)]\nmod tests { s.snapshot( }")));
}

/// Whether `code` re-exports something of the core crate, which would give
/// one type two paths.
fn reexports_core(code: &str) -> bool {
    code.lines().map(str::trim_start).any(|line| {
        line.starts_with("pub use attempt_core") || line.starts_with("pub(crate) use attempt_core")
    })
}

#[test]
fn the_root_crate_names_core_types_where_they_live() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let broken: Vec<String> = files
        .iter()
        .filter(|file| reexports_core(&code_of(&std::fs::read_to_string(file).unwrap())))
        .map(|file| format!("src/{}", file.strip_prefix(&src).unwrap().display()))
        .collect();
    assert!(broken.is_empty(), "files that re-export attempt_core items:\n{}", broken.join("\n"));
    assert!(reexports_core(&code_of("pub mod a;\npub use attempt_core::{model, request};\n")));
    assert!(reexports_core(&code_of("fn f() {}\npub use attempt_core::request::RouteKey;")));
    assert!(!reexports_core(&code_of("use attempt_core::request::RouteKey;\n// pub use attempt_core::x;")));
}

/// The test-name filters `scripts/test.sh --fast` skips.
fn fast_skips(script: &str) -> Vec<String> {
    let start = script.find("FAST_SKIPS=(").expect("FAST_SKIPS in scripts/test.sh") + "FAST_SKIPS=(".len();
    let body = &script[start..start + script[start..].find("\n)").unwrap()];
    body.lines()
        .filter_map(|l| l.split('#').next())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// Each filter of the slow tier names a test of this binary, and only the
/// tests that drive an outside runtime: a renamed test would otherwise
/// slip into the fast tier unseen, or a filter skip more than it says.
#[test]
fn the_fast_tier_skips_exactly_the_tests_it_names() {
    let script =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test.sh")).unwrap();
    let skips = fast_skips(&script);
    assert!(skips.len() >= 5, "{skips:?}");
    let listed = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--list", "--format", "terse"])
        .output()
        .unwrap();
    let tests: Vec<String> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(String::from)
        .collect();
    assert!(tests.len() > 100, "{} tests listed", tests.len());
    for skip in &skips {
        let matched: Vec<&String> = tests.iter().filter(|t| t.contains(skip.as_str())).collect();
        assert!(!matched.is_empty(), "`{skip}` skips no test");
        let module = skip.split("::").next().unwrap();
        assert!(matched.iter().all(|t| t.starts_with(&format!("{module}::"))), "`{skip}` skips {matched:?}");
    }
    let planted = "FAST_SKIPS=(\n  lake::three # Spark\n  ai_sdk::\n)\n";
    assert_eq!(fast_skips(planted), ["lake::three", "ai_sdk::"]);
}
