//! The alert state machine, fed one evaluation at a time and free of I/O so
//! the live service and `alerts --check` run the very same transitions:
//!
//! inactive -> pending (breaching) -> firing (breaching for `for`) ->
//! resolved (first evaluation not breaching) -> inactive.
//!
//! Exactly one `Firing` and one `Resolved` per episode; `Repeat` every
//! `repeat_interval` while firing. A pending alert that stops breaching
//! vanishes without a word, as in Prometheus.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::evaluate::RuleResult;
use attempt_core::alert_event::{AlertEvent, AlertState};
use attempt_core::alert_rules::Rule;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Fired: notify and record.
    Firing,
    /// Still firing after `repeat_interval`: notify again, record nothing.
    Repeat,
    /// Stopped breaching: notify and record.
    Resolved,
}

#[derive(Debug, Clone)]
struct Active {
    event: AlertEvent,
    firing: bool,
    last_notified: DateTime<Utc>,
}

#[derive(Debug, Default)]
pub struct Tracker {
    active: BTreeMap<String, Active>,
}

impl Tracker {
    /// Resumes alerts that were firing when the service last stopped, so a
    /// restart neither repeats their firing notification nor forgets to
    /// resolve them.
    pub fn resume(open: Vec<AlertEvent>) -> Tracker {
        let active = open
            .into_iter()
            .filter(|e| e.state == AlertState::Firing)
            .map(|e| (e.key.clone(), Active { last_notified: e.at, firing: true, event: e }))
            .collect();
        Tracker { active }
    }

    /// Alerts pending or firing now.
    pub fn active(&self) -> impl Iterator<Item = (&AlertEvent, bool)> {
        self.active.values().map(|a| (&a.event, a.firing))
    }

    /// Applies one evaluation at `now`; returns the transitions to notify,
    /// each with the alert as it stands.
    pub fn observe(
        &mut self,
        rules: &[Rule],
        results: &[RuleResult],
        now: DateTime<Utc>,
        repeat_interval: Duration,
    ) -> Vec<(Transition, AlertEvent)> {
        let mut out = Vec::new();
        let mut evaluated = Vec::new();
        let mut breaching = Vec::new();
        let mut calm = BTreeMap::new();
        for result in results {
            let Ok(observations) = &result.outcome else { continue };
            let rule = &rules[result.rule];
            evaluated.push(rule.name.as_str());
            for o in observations.iter().filter(|o| !o.breaching) {
                calm.insert(AlertEvent::key_of(&rule.name, &o.labels), o);
            }
            for o in observations.iter().filter(|o| o.breaching) {
                let key = AlertEvent::key_of(&rule.name, &o.labels);
                breaching.push(key.clone());
                let entry = self.active.entry(key.clone()).or_insert_with(|| Active {
                    event: AlertEvent {
                        at: now,
                        key,
                        rule: rule.name.clone(),
                        kind: rule.kind.name().to_string(),
                        severity: rule.severity.clone(),
                        labels: o.labels.clone(),
                        state: AlertState::Pending,
                        active_since: now,
                        value: o.value,
                        threshold: rule.threshold,
                        summary: String::new(),
                        details: serde_json::Value::Null,
                    },
                    firing: false,
                    last_notified: now,
                });
                entry.event.value = o.value;
                entry.event.summary = o.summary.clone();
                entry.event.details = o.details.clone();
                let held = (now - entry.event.active_since).to_std().unwrap_or_default();
                if !entry.firing && held >= rule.for_ {
                    entry.firing = true;
                    entry.last_notified = now;
                    entry.event.state = AlertState::Firing;
                    entry.event.at = now;
                    out.push((Transition::Firing, entry.event.clone()));
                } else if entry.firing
                    && (now - entry.last_notified).to_std().unwrap_or_default() >= repeat_interval
                {
                    entry.last_notified = now;
                    out.push((Transition::Repeat, entry.event.clone()));
                }
            }
        }
        // Alerts of rules evaluated this time that did not breach. Rules
        // that failed to evaluate, or were removed from the file, keep
        // their alerts until they are evaluated again.
        let ended: Vec<String> = self
            .active
            .iter()
            .filter(|(key, a)| evaluated.contains(&a.event.rule.as_str()) && !breaching.contains(key))
            .map(|(key, _)| key.clone())
            .collect();
        for key in ended {
            if let Some(mut a) = self.active.remove(&key)
                && a.firing
            {
                a.event.state = AlertState::Resolved;
                a.event.at = now;
                // The resolved notification says how long the episode
                // lasted (from its first breaching evaluation) and what the
                // value is now.
                let lasted = (now - a.event.active_since).to_std().unwrap_or_default();
                let lasted = humantime::format_duration(Duration::from_secs(lasted.as_secs()));
                let now_text = match calm.get(&key) {
                    Some(o) => {
                        a.event.value = o.value;
                        a.event.details = o.details.clone();
                        o.summary.clone()
                    }
                    None => {
                        a.event.value = None;
                        a.event.details = serde_json::Value::Null;
                        "no data in the window".into()
                    }
                };
                a.event.summary = format!("resolved after {lasted}: {now_text}");
                out.push((Transition::Resolved, a.event));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::evaluate::Observation;
    use attempt_core::alert_rules::RuleSet;

    fn rules(for_: &str) -> Vec<Rule> {
        let text = format!("[[rule]]\nname = \"r\"\nkind = \"retry_ratio\"\nfor = \"{for_}\"\n");
        RuleSet::parse(&text, "t").unwrap().rules
    }

    fn reading(value: f64) -> Vec<RuleResult> {
        vec![RuleResult {
            rule: 0,
            outcome: Ok(vec![Observation {
                rule: 0,
                labels: BTreeMap::new(),
                value: Some(value),
                breaching: value > 0.10,
                summary: String::new(),
                details: serde_json::Value::Null,
            }]),
        }]
    }

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    /// Feeds (second, value) readings; returns (second, transition).
    fn run(for_: &str, repeat: u64, readings: &[(i64, f64)]) -> Vec<(i64, Transition)> {
        let rules = rules(for_);
        let mut tracker = Tracker::default();
        let mut out = Vec::new();
        for (s, v) in readings {
            for (t, _) in tracker.observe(&rules, &reading(*v), at(*s), Duration::from_secs(repeat)) {
                out.push((*s, t));
            }
        }
        out
    }

    #[test]
    fn fires_once_after_for_and_resolves_once() {
        let readings = [(0, 0.5), (10, 0.5), (20, 0.5), (30, 0.5), (40, 0.0), (50, 0.0), (60, 0.0)];
        assert_eq!(run("20s", 3600, &readings), vec![(20, Transition::Firing), (40, Transition::Resolved)]);
    }

    #[test]
    fn a_breach_shorter_than_for_says_nothing() {
        let readings = [(0, 0.5), (10, 0.5), (20, 0.0), (30, 0.5), (40, 0.0)];
        assert!(run("20s", 3600, &readings).is_empty());
    }

    #[test]
    fn repeats_while_firing_at_the_repeat_interval() {
        let readings = [(0, 0.5), (30, 0.5), (60, 0.5), (90, 0.5), (120, 0.5), (130, 0.0)];
        assert_eq!(
            run("0s", 60, &readings),
            vec![
                (0, Transition::Firing),
                (60, Transition::Repeat),
                (120, Transition::Repeat),
                (130, Transition::Resolved)
            ]
        );
    }

    #[test]
    fn a_failed_evaluation_keeps_the_alert_as_it_was() {
        let rules = rules("0s");
        let mut tracker = Tracker::default();
        let hour = Duration::from_secs(3600);
        assert_eq!(tracker.observe(&rules, &reading(0.5), at(0), hour).len(), 1);
        let failed = vec![RuleResult { rule: 0, outcome: Err("database locked".into()) }];
        assert!(tracker.observe(&rules, &failed, at(10), hour).is_empty());
        let resolved = tracker.observe(&rules, &reading(0.0), at(20), hour);
        assert_eq!(resolved.len(), 1);
        assert_eq!(resolved[0].1.active_since, at(0));
        assert!(resolved[0].1.summary.starts_with("resolved after 20s: "), "{}", resolved[0].1.summary);
    }

    #[test]
    fn a_resumed_firing_alert_is_not_fired_again_but_is_resolved() {
        let rules = rules("0s");
        let hour = Duration::from_secs(3600);
        let mut first = Tracker::default();
        let fired = first.observe(&rules, &reading(0.5), at(0), hour).remove(0).1;
        let mut resumed = Tracker::resume(vec![fired]);
        assert!(resumed.observe(&rules, &reading(0.5), at(10), hour).is_empty());
        let out = resumed.observe(&rules, &reading(0.0), at(20), hour);
        assert_eq!(out.iter().map(|o| o.0).collect::<Vec<_>>(), vec![Transition::Resolved]);
    }
}
