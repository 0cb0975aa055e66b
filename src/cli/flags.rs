//! Range checks for numeric and duration flags, applied by clap when the
//! command line is read: a value that would start a broken service (a body
//! limit of 0, a refresh loop with no pause) is refused at start with the
//! rule it broke, never discovered by the first client.

use std::time::Duration;

/// A duration in `[min, max]`, written as humantime reads it ("15s", "2m").
fn duration_within(text: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let value = humantime::parse_duration(text).map_err(|e| format!("`{text}` is not a duration ({e})"))?;
    if value < min || value > max {
        return Err(format!(
            "must be between {} and {}, got {}",
            humantime::format_duration(min),
            humantime::format_duration(max),
            humantime::format_duration(value)
        ));
    }
    Ok(value)
}

/// Periods of background loops (metrics refresh, alert evaluation steps,
/// simulated spans): at least 100 ms, so an idle service stays idle.
pub fn period(text: &str) -> Result<Duration, String> {
    duration_within(text, Duration::from_millis(100), Duration::from_secs(86_400))
}

/// Deadlines on a client (headers, bodies): long enough to be met, short
/// enough that a stalled client gives its slot back.
pub fn deadline(text: &str) -> Result<Duration, String> {
    duration_within(text, Duration::from_millis(100), Duration::from_secs(3_600))
}

/// `serve --lake-interval`: from a second (tests, demos) to a day.
pub fn lake_interval(text: &str) -> Result<Duration, String> {
    duration_within(text, Duration::from_secs(1), Duration::from_secs(86_400))
}

/// `report --horizon`: from none at all to a year around the window.
pub fn horizon(text: &str) -> Result<Duration, String> {
    duration_within(text, Duration::ZERO, Duration::from_secs(366 * 86_400))
}

/// `serve --reconcile-every`: from a minute to a week (the admin APIs
/// are rate-limited; their data moves by the hour).
pub fn reconcile_every(text: &str) -> Result<Duration, String> {
    duration_within(text, Duration::from_secs(60), Duration::from_secs(7 * 86_400))
}

/// `serve --reconcile-look-back`: from an hour to 31 days.
pub fn look_back(text: &str) -> Result<Duration, String> {
    duration_within(text, Duration::from_secs(3_600), Duration::from_secs(31 * 86_400))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_outside_their_range_name_the_range() {
        assert_eq!(period("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(period("0s").unwrap_err(), "must be between 100ms and 1day, got 0s");
        assert!(deadline("2h").unwrap_err().starts_with("must be between 100ms and 1h"));
        assert!(period("soon").unwrap_err().starts_with("`soon` is not a duration"));
    }
}
