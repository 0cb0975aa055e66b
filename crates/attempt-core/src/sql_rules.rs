//! The record format's rules as SQL, written once (`queries/rules/rules.sql`)
//! and rendered into each engine's SQL: DuckDB's derivation and lake dedup,
//! Spark's and ClickHouse's lake reports. A rule is an SQL expression in the
//! subset the three engines read alike, over parameters written `$name`; a
//! template calls it as `{{name(arg, ...)}}`, each argument an expression of
//! the caller's dialect. A rule's body may call other rules. A body lands
//! as it is written: one that is an expression is written to bind as one
//! (a CASE, a call, or parenthesised), and a list (an ORDER BY's) stays a
//! list.

use std::collections::BTreeMap;

/// Calls within calls, at most: a rule that calls itself fails, not loops.
const MAX_DEPTH: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("rules.sql line {line}: {what}")]
    Rules { line: usize, what: String },
    #[error("{{{{{call}}}}}: {what}")]
    Call { call: String, what: String },
}

/// One rule: its parameters in order, and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub params: Vec<String>,
    pub body: String,
}

/// The rules of a rules file: each begins at a line `-- rule: name(a, b)`
/// and runs to the next rule or the end; comment lines in a body are kept
/// out of it.
pub fn parse_rules(text: &str) -> Result<BTreeMap<String, Rule>, RenderError> {
    let mut rules = BTreeMap::new();
    let mut current: Option<(String, Rule)> = None;
    for (at, line) in text.lines().enumerate() {
        if let Some(signature) = line.strip_prefix("-- rule: ") {
            let (name, params) = signature_of(signature).ok_or_else(|| RenderError::Rules {
                line: at + 1,
                what: format!("not a rule signature: {signature}"),
            })?;
            if let Some((name, rule)) = current.take() {
                finish(&mut rules, name, rule, at)?;
            }
            current = Some((name, Rule { params, body: String::new() }));
        } else if let Some((_, rule)) = current.as_mut()
            && !line.trim_start().starts_with("--")
            && !line.trim().is_empty()
        {
            if !rule.body.is_empty() {
                rule.body.push('\n');
            }
            rule.body.push_str(line.trim_end());
        }
    }
    if let Some((name, rule)) = current {
        finish(&mut rules, name, rule, text.lines().count())?;
    }
    Ok(rules)
}

fn finish(
    rules: &mut BTreeMap<String, Rule>,
    name: String,
    rule: Rule,
    line: usize,
) -> Result<(), RenderError> {
    if rule.body.is_empty() {
        return Err(RenderError::Rules { line, what: format!("rule {name} has no body") });
    }
    for param in &rule.params {
        if !rule.body.contains(&format!("${param}")) {
            return Err(RenderError::Rules { line, what: format!("rule {name} never reads ${param}") });
        }
    }
    if rules.insert(name.clone(), rule).is_some() {
        return Err(RenderError::Rules { line, what: format!("rule {name} is defined twice") });
    }
    Ok(())
}

/// `name(a, b)` into its name and parameters.
fn signature_of(text: &str) -> Option<(String, Vec<String>)> {
    let (name, rest) = text.trim().split_once('(')?;
    let params = rest.strip_suffix(')')?;
    let identifier = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let params: Vec<String> =
        params.split(',').map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect();
    (identifier(name) && params.iter().all(|p| identifier(p))).then(|| (name.to_string(), params))
}

/// `template` with every `{{rule(args)}}` replaced by the rule's body, its
/// parameters bound to the arguments.
pub fn render(template: &str, rules: &BTreeMap<String, Rule>) -> Result<String, RenderError> {
    render_at(template, rules, 0)
}

fn render_at(text: &str, rules: &BTreeMap<String, Rule>, depth: usize) -> Result<String, RenderError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let close = closing(after).ok_or_else(|| RenderError::Call {
            call: after.chars().take(40).collect(),
            what: "no closing }}".into(),
        })?;
        let call = &after[..close];
        // A body of several lines keeps its shape under the call's column.
        let column = out.rsplit('\n').next().map_or(0, |line| line.chars().count());
        out.push_str(&expand(call, rules, depth)?.replace('\n', &format!("\n{}", " ".repeat(column))));
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Where the `}}` that closes a call starts: the first one outside the
/// call's parentheses.
fn closing(text: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (at, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '}' if depth == 0 && text[at..].starts_with("}}") => return Some(at),
            _ => {}
        }
    }
    None
}

fn expand(call: &str, rules: &BTreeMap<String, Rule>, depth: usize) -> Result<String, RenderError> {
    let fail = |what: String| RenderError::Call { call: call.to_string(), what };
    if depth >= MAX_DEPTH {
        return Err(fail(format!("rules nested deeper than {MAX_DEPTH}")));
    }
    let (name, rest) = call.trim().split_once('(').ok_or_else(|| fail("not a call: name(args)".into()))?;
    let args = rest.strip_suffix(')').ok_or_else(|| fail("not a call: name(args)".into()))?;
    let rule = rules.get(name.trim()).ok_or_else(|| fail(format!("no rule named {}", name.trim())))?;
    let args = arguments(args);
    if args.len() != rule.params.len() {
        return Err(fail(format!(
            "{} arguments for the {} of {}",
            args.len(),
            rule.params.len(),
            name.trim()
        )));
    }
    // Longer names first, so `$group_b` is not read as `$group` and `_b`.
    let mut bound: Vec<(&String, &str)> = rule.params.iter().zip(args).collect();
    bound.sort_by_key(|(param, _)| std::cmp::Reverse(param.len()));
    let mut body = rule.body.clone();
    for (param, arg) in bound {
        body = body.replace(&format!("${param}"), arg);
    }
    if let Some(at) = body.find('$') {
        return Err(fail(format!("an unbound parameter in {}: {}", name.trim(), &body[at..])));
    }
    render_at(&body, rules, depth + 1)
}

/// A call's arguments, split at the commas outside parentheses and quotes.
fn arguments(text: &str) -> Vec<&str> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    let (mut parts, mut start, mut depth, mut quoted) = (Vec::new(), 0, 0i32, false);
    for (at, c) in text.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                parts.push(text[start..at].trim());
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: &str = "\
-- rules.sql: a header
-- rule: same(a_group, a, b_group, b)
-- Why: a comment kept out of the body.
CASE WHEN $a_group IS NOT NULL THEN $a_group = $b_group
     ELSE $a = $b END

-- rule: route(route, a_group, a, b_group, b)
coalesce($route, CASE WHEN {{same($a_group, $a, $b_group, $b)}} THEN 'primary' ELSE 'fallback' END)
-- rule: order_of_copies()
ingested_at, ingest_node
";

    #[test]
    fn a_rule_is_its_body_with_its_arguments_and_the_rules_it_calls() {
        let rules = parse_rules(RULES).unwrap();
        assert_eq!(rules.len(), 3);
        assert_eq!(rules["same"].params, ["a_group", "a", "b_group", "b"]);
        let out =
            render("SELECT {{route(o.route, o.g, o.p, w.g, coalesce(w.p, 'x,y'))}} AS r", &rules).unwrap();
        // The inner body's second line, under its call (column 28 of the
        // outer body, itself at column 7), keeps its own 5 spaces.
        let expected = format!(
            "SELECT coalesce(o.route, CASE WHEN CASE WHEN o.g IS NOT NULL THEN o.g = w.g\n{}ELSE o.p = \
             coalesce(w.p, 'x,y') END THEN 'primary' ELSE 'fallback' END) AS r",
            " ".repeat(7 + 28 + 5)
        );
        assert_eq!(out, expected);
        assert_eq!(
            render("ORDER BY {{order_of_copies()}}", &rules).unwrap(),
            "ORDER BY ingested_at, ingest_node"
        );
        assert_eq!(render("no calls", &rules).unwrap(), "no calls");
    }

    #[test]
    fn a_bad_call_is_named() {
        let rules = parse_rules(RULES).unwrap();
        let err = |t: &str| render(t, &rules).unwrap_err().to_string();
        assert!(err("{{nothing(a)}}").contains("no rule named nothing"), "{}", err("{{nothing(a)}}"));
        assert!(err("{{same(a, b)}}").contains("2 arguments for the 4 of same"));
        assert!(err("{{same(a, b, c, d)").contains("no closing }}"));
        assert!(err("{{same}}").contains("not a call"));
    }

    #[test]
    fn a_bad_rules_file_is_named_by_line() {
        let err = |t: &str| parse_rules(t).unwrap_err().to_string();
        assert!(err("-- rule: a(x)\n$x\n-- rule: a(y)\n$y\n").contains("defined twice"));
        assert!(err("-- rule: a(x, y)\n$x\n").contains("never reads $y"));
        assert!(err("-- rule: a(x)\n-- only a comment\n").contains("has no body"));
        assert!(err("-- rule: a x\n1\n").starts_with("rules.sql line 1"));
    }

    #[test]
    fn a_rule_that_calls_itself_fails_instead_of_looping() {
        let rules = parse_rules("-- rule: me(x)\n{{me($x)}} + 1\n").unwrap();
        assert!(render("{{me(1)}}", &rules).unwrap_err().to_string().contains("nested deeper"));
    }
}
