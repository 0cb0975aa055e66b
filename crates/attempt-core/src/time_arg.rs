//! `--since` / `--until` values: RFC 3339, a date, or an age such as `24h`.

use chrono::{DateTime, Duration, NaiveDate, Utc};

/// Parses an instant relative to `now`: `2026-11-28T02:00:00Z`,
/// `2026-11-28` (midnight UTC), or `90s` / `30m` / `24h` / `7d` ago.
pub fn parse_time(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(date.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc());
    }
    let (digits, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let amount: i64 = digits.parse().map_err(|_| invalid(text))?;
    let age = match unit {
        "s" => Duration::try_seconds(amount),
        "m" => Duration::try_minutes(amount),
        "h" => Duration::try_hours(amount),
        "d" => Duration::try_days(amount),
        _ => None,
    };
    age.and_then(|age| now.checked_sub_signed(age)).ok_or_else(|| invalid(text))
}

fn invalid(text: &str) -> String {
    format!(
        "`{text}` is not a time: use RFC 3339 (2026-11-28T02:00:00Z), a date (2026-11-28) or an age (30m, 24h, 7d)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_instants_dates_and_ages() {
        let now = DateTime::parse_from_rfc3339("2026-11-29T12:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(
            parse_time("2026-11-28T02:00:00+01:00", now).unwrap().to_rfc3339(),
            "2026-11-28T01:00:00+00:00"
        );
        assert_eq!(parse_time("2026-11-28", now).unwrap().to_rfc3339(), "2026-11-28T00:00:00+00:00");
        assert_eq!(parse_time("24h", now).unwrap().to_rfc3339(), "2026-11-28T12:00:00+00:00");
        assert_eq!(parse_time("30m", now).unwrap().to_rfc3339(), "2026-11-29T11:30:00+00:00");
        assert!(parse_time("yesterday", now).unwrap_err().contains("`yesterday` is not a time"));
        assert!(parse_time("5w", now).is_err());
    }
}
