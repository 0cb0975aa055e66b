//! Numbers in the JSON of gateway logs (LiteLLM payloads, OpenRouter
//! generations), read by the lenient-values rule: a value is read as the
//! number it must be, or ignored with a warning that names the field; never
//! read as 0 and never dropped without a word.

use serde_json::Value;

/// A count (tokens, a status): a non-negative integer, or a float that is
/// one (`12.0`). `null`, an absent field and `""` are absent.
pub fn count(value: Option<&Value>, field: &str, warnings: &mut Vec<String>) -> Option<i64> {
    let value = present(value)?;
    let read = match value {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| f as i64)),
        _ => None,
    }
    .filter(|n| *n >= 0);
    if read.is_none() {
        warnings.push(format!("field `{field}`: {} is not a count (an integer >= 0), ignored", shown(value)));
    }
    read
}

/// A finite non-negative amount (a latency, a price in dollars).
pub fn amount(value: Option<&Value>, field: &str, warnings: &mut Vec<String>) -> Option<f64> {
    let value = present(value)?;
    let read = value.as_f64().filter(|f| f.is_finite() && *f >= 0.0);
    if read.is_none() {
        warnings.push(format!("field `{field}`: {} is not a number >= 0, ignored", shown(value)));
    }
    read
}

fn present(value: Option<&Value>) -> Option<&Value> {
    match value? {
        Value::Null => None,
        Value::String(s) if s.trim().is_empty() => None,
        other => Some(other),
    }
}

/// A value as a warning shows it, cut to 40 characters.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    let cut: String = text.chars().take(40).collect();
    if cut.len() < text.len() { format!("{cut}...") } else { cut }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_are_read_exactly_or_ignored_with_a_warning() {
        let mut warnings = Vec::new();
        let read = |v: Value, w: &mut Vec<String>| count(Some(&v), "tokens", w);
        assert_eq!(read(json!(12), &mut warnings), Some(12));
        assert_eq!(read(json!(12.0), &mut warnings), Some(12));
        assert_eq!(read(json!(null), &mut warnings), None);
        assert_eq!(read(json!(""), &mut warnings), None);
        assert!(warnings.is_empty());
        for bad in [
            json!("abc"),
            json!("12"),
            json!(12.5),
            json!(-1),
            serde_json::from_str::<Value>("99999999999999999999").unwrap(),
            json!([1]),
        ] {
            assert_eq!(read(bad.clone(), &mut warnings), None, "{bad}");
        }
        assert_eq!(warnings.len(), 6, "{warnings:?}");
        assert!(warnings[0].starts_with("field `tokens`: \"abc\""), "{}", warnings[0]);
    }

    #[test]
    fn amounts_must_be_finite_and_not_negative() {
        let mut warnings = Vec::new();
        assert_eq!(amount(Some(&json!(0.25)), "cost", &mut warnings), Some(0.25));
        assert_eq!(amount(Some(&json!("0.25")), "cost", &mut warnings), None);
        assert_eq!(amount(Some(&json!(-1.0)), "cost", &mut warnings), None);
        assert_eq!(warnings.len(), 2);
    }
}
