//! The names a served model is priced under (docs/prices.md, "Which entry
//! prices an attempt"): its own, then without the version and date a
//! provider appends to pin a release, then, only when the table has no
//! entry for the region-qualified name, without the region (an attempt
//! priced so is counted: a regional premium may be missing).

/// Inference-profile prefixes Bedrock puts before a model id that the
/// general shape below would not read (`global.` is longer).
const REGION_DOTS: [&str; 1] = ["global."];
/// Data-zone folders Azure (and LiteLLM's names for it) put before a model.
const REGION_FOLDERS: [&str; 3] = ["eu/", "us/", "global/"];

/// A name to look up, and whether it drops a region the served name had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub name: String,
    pub region_dropped: bool,
}

/// Every name `model` may be priced under, most specific first.
pub fn candidates(model: &str) -> Vec<Candidate> {
    let mut names: Vec<Candidate> = Vec::with_capacity(6);
    let mut push = |name: &str, region_dropped: bool| {
        if !name.is_empty() && !names.iter().any(|c| c.name == name) {
            names.push(Candidate { name: name.to_string(), region_dropped });
        }
    };
    for name in unpinned(model) {
        push(name, false);
    }
    if let Some(base) = without_region(model) {
        for name in unpinned(base) {
            push(name, true);
        }
    }
    names
}

/// `model`, then without a Bedrock version (`-v1:0`), then without a date
/// (`-2024-07-18`, `-20250929`, `@20250929`) too.
fn unpinned(model: &str) -> [&str; 3] {
    let unversioned = strip_version(model).unwrap_or(model);
    let undated = strip_date(unversioned).unwrap_or(unversioned);
    [model, unversioned, undated]
}

/// The name without its region: a Bedrock profile (`us.`), an Azure data
/// zone (`eu/`) or an AWS region folder (`us-gov-east-1/`).
pub fn without_region(model: &str) -> Option<&str> {
    if let Some(rest) = REGION_DOTS.iter().find_map(|prefix| model.strip_prefix(prefix)) {
        return Some(rest);
    }
    if let Some((prefix, rest)) = model.split_once('.')
        && is_profile_geography(prefix)
        && is_vendor_qualified(rest)
    {
        return Some(rest);
    }
    if let Some(rest) = REGION_FOLDERS.iter().find_map(|prefix| model.strip_prefix(prefix)) {
        return Some(rest);
    }
    let (folder, rest) = model.split_once('/')?;
    is_aws_region(folder).then_some(rest)
}

/// A Bedrock cross-region profile's geography: two to four letters, with
/// one more such part after a dash (`us`, `apac`, `us-gov`, `ca`). AWS adds
/// geographies over time; a fixed list would price the next one as no
/// model at all.
fn is_profile_geography(prefix: &str) -> bool {
    let letters = |part: &str| (2..=4).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_lowercase());
    match prefix.split_once('-') {
        Some((first, second)) => letters(first) && letters(second),
        None => letters(prefix),
    }
}

/// A Bedrock model id: `vendor.model`, the vendor's dot before any dash
/// (so `zai.glm-4.7` is a model, not `glm-4.7` in region `zai`).
fn is_vendor_qualified(rest: &str) -> bool {
    match (rest.find('.'), rest.find('-')) {
        (Some(dot), Some(dash)) => dot > 0 && dot < dash,
        (Some(dot), None) => dot > 0,
        (None, _) => false,
    }
}

/// `us-east-1`, `eu-central-2`, `us-gov-west-1`, `ap-northeast-3`: letters,
/// dashes, and a number at the end.
fn is_aws_region(folder: &str) -> bool {
    let parts: Vec<&str> = folder.split('-').collect();
    parts.len() >= 3
        && parts[0].len() == 2
        && parts[..parts.len() - 1].iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
        && !parts[parts.len() - 1].is_empty()
}

/// A Bedrock version at the end (`-v1:0`, `-v2`).
fn strip_version(name: &str) -> Option<&str> {
    let (base, version) = name.rsplit_once("-v")?;
    (!base.is_empty() && version.split(':').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
        .then_some(base)
}

/// `-YYYY-MM-DD`, `-YYYYMMDD` or `@YYYYMMDD` at the end of a name.
fn strip_date(name: &str) -> Option<&str> {
    let bytes = name.as_bytes();
    let all_digits = |b: &[u8]| b.iter().all(u8::is_ascii_digit);
    // Each cut lands on an ASCII separator, so it is a char boundary.
    if let Some(cut) = name.len().checked_sub(11) {
        let d = &bytes[cut..];
        if d[0] == b'-'
            && d[5] == b'-'
            && d[8] == b'-'
            && all_digits(&d[1..5])
            && all_digits(&d[6..8])
            && all_digits(&d[9..])
        {
            return Some(&name[..cut]);
        }
    }
    let cut = name.len().checked_sub(9)?;
    let d = &bytes[cut..];
    ((d[0] == b'-' || d[0] == b'@') && all_digits(&d[1..])).then(|| &name[..cut])
}

/// The name a reconciliation cell gives a model without an entry: without
/// its release date.
pub fn undated(model: &str) -> &str {
    let unversioned = strip_version(model).unwrap_or(model);
    strip_date(unversioned).unwrap_or(unversioned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(model: &str) -> Vec<(String, bool)> {
        candidates(model).into_iter().map(|c| (c.name, c.region_dropped)).collect()
    }

    #[test]
    fn dated_and_versioned_names_fall_back_to_their_base() {
        assert_eq!(
            names("gpt-4o-mini-2024-07-18"),
            [("gpt-4o-mini-2024-07-18".into(), false), ("gpt-4o-mini".into(), false)]
        );
        assert_eq!(
            names("claude-sonnet-4-5@20250929"),
            [("claude-sonnet-4-5@20250929".into(), false), ("claude-sonnet-4-5".into(), false)]
        );
        assert_eq!(
            names("anthropic.claude-sonnet-4-5-20250929-v1:0"),
            [
                ("anthropic.claude-sonnet-4-5-20250929-v1:0".into(), false),
                ("anthropic.claude-sonnet-4-5-20250929".into(), false),
                ("anthropic.claude-sonnet-4-5".into(), false)
            ]
        );
        assert_eq!(names("gpt-5"), [("gpt-5".into(), false)]);
    }

    #[test]
    fn regions_are_dropped_last_and_said_so() {
        let got = names("us.anthropic.claude-sonnet-4-5-20250929-v1:0");
        assert_eq!(got[0], ("us.anthropic.claude-sonnet-4-5-20250929-v1:0".into(), false));
        assert_eq!(got[2], ("us.anthropic.claude-sonnet-4-5".into(), false));
        assert_eq!(got[3], ("anthropic.claude-sonnet-4-5-20250929-v1:0".into(), true));
        assert_eq!(got.last().unwrap(), &("anthropic.claude-sonnet-4-5".into(), true));
        for (model, base) in [
            ("eu/gpt-4o-2024-08-06", "gpt-4o-2024-08-06"),
            ("us-gov-east-1/anthropic.claude-3-haiku", "anthropic.claude-3-haiku"),
            ("apac.amazon.nova-pro-v1:0", "amazon.nova-pro-v1:0"),
            ("us-gov.anthropic.x", "anthropic.x"),
            ("global.anthropic.claude-x", "anthropic.claude-x"),
            // Geographies the code does not list: the shape, not a list.
            ("ca.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-sonnet-4-5-20250929-v1:0"),
            ("sa-east.meta.llama3-1-8b-instruct-v1:0", "meta.llama3-1-8b-instruct-v1:0"),
        ] {
            assert_eq!(without_region(model), Some(base), "{model}");
        }
        for model in [
            "meta-llama/Llama-3-8b",
            "accounts/fireworks/models/x",
            "usual-model",
            "u-s-1/x",
            // Vendor-qualified ids that start like a geography.
            "zai.glm-4.7",
            "qwen.qwen3-coder-30b-a3b-v1:0",
            "deepseek.v3.2",
            "gpt-4.1",
            "o3.mini",
        ] {
            assert_eq!(without_region(model), None, "{model}");
        }
    }
}
