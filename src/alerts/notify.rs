//! Delivery of alert notifications. Each receiver has its own thread and
//! bounded queue: a receiver that is down or slow retries with exponential
//! backoff on its own thread, and neither ingest, evaluation nor the other
//! receivers wait for it. A full queue drops the notification (counted)
//! rather than grow without bound.

use std::sync::mpsc::{Receiver as Queue, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::telemetry::events::{Delivery, NotificationDelivered, NotificationRetried, ReceiverStarted};
use attempt_core::alert_event::{AlertEvent, AlertState};
use attempt_core::alert_rules::{Receiver, ReceiverKind, Rule};

/// Notifications waiting per receiver before new ones are dropped.
const QUEUE: usize = 1024;

/// One queued notification.
#[derive(Debug, Clone)]
struct Notification {
    event: AlertEvent,
    repeat: bool,
    /// Alertmanager: how long a firing alert stays active without a resend.
    repeat_interval: Duration,
}

pub struct Notifier {
    receivers: Vec<(Receiver, SyncSender<Notification>)>,
}

impl Notifier {
    /// Starts one delivery thread per receiver. The threads end when the
    /// notifier is dropped and their queue is drained (or given up).
    pub fn start(receivers: &[Receiver]) -> Notifier {
        let receivers = receivers
            .iter()
            .map(|r| {
                let (tx, rx) = sync_channel(QUEUE);
                ReceiverStarted { receiver: &r.name }.emit();
                let receiver = r.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("notify-{}", r.name))
                    .spawn(move || deliver_all(&receiver, rx));
                if let Err(err) = spawned {
                    tracing::error!(receiver = %r.name, %err, "cannot start the delivery thread");
                }
                (r.clone(), tx)
            })
            .collect();
        Notifier { receivers }
    }

    /// Queues `event` for the rule's receivers; never blocks.
    pub fn notify(&self, rule: &Rule, event: &AlertEvent, repeat: bool, repeat_interval: Duration) {
        for (receiver, queue) in &self.receivers {
            if !rule.receivers.is_empty() && !rule.receivers.contains(&receiver.name) {
                continue;
            }
            let notification = Notification { event: event.clone(), repeat, repeat_interval };
            match queue.try_send(notification) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => NotificationDelivered {
                    receiver: &receiver.name,
                    alert: &event.key,
                    delivery: Delivery::Dropped,
                    tries: 0,
                    reason: None,
                }
                .emit(),
            }
        }
    }
}

fn deliver_all(receiver: &Receiver, queue: Queue<Notification>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(receiver.timeout))
        .http_status_as_error(false)
        .build()
        .into();
    for notification in queue {
        let body = payload(receiver, &notification, Utc::now());
        let mut delay = receiver.backoff;
        for attempt in 1..=receiver.max_tries {
            let (name, alert) = (receiver.name.as_str(), notification.event.key.as_str());
            match post(&agent, &receiver.url, &body) {
                Ok(()) => {
                    let delivery = Delivery::Sent;
                    NotificationDelivered { receiver: name, alert, delivery, tries: attempt, reason: None }
                        .emit();
                    break;
                }
                Err(reason) if attempt == receiver.max_tries => NotificationDelivered {
                    receiver: name,
                    alert,
                    delivery: Delivery::Failed,
                    tries: attempt,
                    reason: Some(&reason),
                }
                .emit(),
                Err(reason) => {
                    let retry_in_ms = delay.as_millis() as u64;
                    NotificationRetried {
                        receiver: name,
                        alert,
                        tries: attempt,
                        reason: &reason,
                        retry_in_ms,
                    }
                    .emit();
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(receiver.max_backoff);
                }
            }
        }
    }
}

fn post(agent: &ureq::Agent, url: &str, body: &Value) -> Result<(), String> {
    let response = agent
        .post(url)
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .map_err(|e| e.to_string())?;
    let status = response.status();
    if status.is_success() { Ok(()) } else { Err(format!("HTTP {status}")) }
}

fn status_word(event: &AlertEvent) -> &'static str {
    if event.state == AlertState::Resolved { "resolved" } else { "firing" }
}

fn payload(receiver: &Receiver, n: &Notification, now: DateTime<Utc>) -> Value {
    let e = &n.event;
    match receiver.kind {
        ReceiverKind::Webhook => json!({
            "version": "1",
            "receiver": receiver.name,
            "status": status_word(e),
            "repeat": n.repeat,
            "alert": e,
        }),
        ReceiverKind::Slack => {
            let (icon, word) = if e.state == AlertState::Resolved {
                (":white_check_mark:", "RESOLVED")
            } else {
                (":rotating_light:", "FIRING")
            };
            json!({ "text": format!("{icon} [{word}] *{}* ({}): {}", e.key, e.severity, e.summary) })
        }
        ReceiverKind::Alertmanager => {
            let mut labels = serde_json::Map::new();
            labels.insert("alertname".into(), json!(e.rule));
            labels.insert("severity".into(), json!(e.severity));
            labels.insert("kind".into(), json!(e.kind));
            for (k, v) in &e.labels {
                labels.insert(k.clone(), json!(v));
            }
            // Alertmanager resolves an alert on its own once `endsAt`
            // passes; a firing one is re-sent every repeat_interval, so it
            // stays active for a few of them.
            let ends_at = match e.state {
                AlertState::Resolved => e.at,
                _ => {
                    now + chrono::Duration::from_std(n.repeat_interval * 3)
                        .unwrap_or(chrono::Duration::hours(12))
                }
            };
            json!([{
                "labels": labels,
                "annotations": {
                    "summary": e.summary,
                    "value": e.value.map(|v| v.to_string()).unwrap_or_default(),
                    "threshold": e.threshold.to_string(),
                },
                "startsAt": e.active_since.to_rfc3339(),
                "endsAt": ends_at.to_rfc3339(),
            }])
        }
    }
}
