//! The traces whose model calls or HTTP client spans came in a recent
//! export. The spans around a call (the application's, a framework's chain
//! and branch spans) end after it, so a batching exporter often sends them
//! in a later export, which holds no call of their trace: alone, its
//! decoding would drop them. Kept as parent links when their trace is
//! here, they keep the trace's ancestry whole for the rules that read it
//! (docs/record-format.md, "Attempts found by the call").

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use attempt_core::ingest::otlp::DecodedSpans;
use attempt_core::model::{SpanKind, SpanRecord};

/// Trace ids remembered, oldest forgotten first: about 3 MiB. A trace's
/// enclosing spans arrive within seconds of its calls, while this many
/// other traces with calls come in between only at thousands per second.
pub const RECENT_CALL_TRACES: usize = 65_536;

#[derive(Debug, Default)]
pub struct RecentCallTraces {
    inner: Mutex<Recent>,
}

#[derive(Debug, Default)]
struct Recent {
    known: HashSet<u128>,
    order: VecDeque<u128>,
}

impl RecentCallTraces {
    /// Remembers the traces of `decoded`'s calls, then moves into its spans
    /// the loose links of every trace remembered; the other loose links
    /// are dropped. Returns how many links it kept.
    pub fn keep_links(&self, decoded: &mut DecodedSpans) -> usize {
        let loose = std::mem::take(&mut decoded.loose_links);
        let mut recent = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for trace in decoded.decoded.spans.iter().filter(|s| s.kind != SpanKind::Link).filter_map(trace_of) {
            recent.remember(trace);
        }
        let kept: Vec<SpanRecord> = loose
            .into_iter()
            .filter(|link| trace_of(link).is_some_and(|t| recent.known.contains(&t)))
            .collect();
        let count = kept.len();
        decoded.decoded.spans.extend(kept);
        count
    }

    /// Remembers the traces of `spans` that hold a call (a logs export's
    /// access logs and GenAI events).
    pub fn remember_calls(&self, spans: &[SpanRecord]) {
        let mut recent = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for trace in spans.iter().filter(|s| s.kind != SpanKind::Link).filter_map(trace_of) {
            recent.remember(trace);
        }
    }
}

impl Recent {
    fn remember(&mut self, trace: u128) {
        if self.known.insert(trace) {
            self.order.push_back(trace);
            if self.order.len() > RECENT_CALL_TRACES
                && let Some(oldest) = self.order.pop_front()
            {
                self.known.remove(&oldest);
            }
        }
    }
}

fn trace_of(span: &SpanRecord) -> Option<u128> {
    u128::from_str_radix(&span.trace_id, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use attempt_core::model::SpanFacts;

    fn record(trace: u128, span: u64, kind: SpanKind) -> SpanRecord {
        SpanRecord {
            trace_id: format!("{trace:032x}"),
            span_id: format!("{span:016x}"),
            parent_span_id: None,
            kind,
            span: None,
            facts: SpanFacts::default(),
        }
    }

    fn export(calls: &[u128], loose: &[u128]) -> DecodedSpans {
        let mut decoded = DecodedSpans::default();
        decoded.decoded.spans = calls.iter().map(|t| record(*t, 1, SpanKind::Http)).collect();
        decoded.loose_links = loose.iter().map(|t| record(*t, 2, SpanKind::Link)).collect();
        decoded
    }

    #[test]
    fn links_of_a_trace_seen_with_calls_are_kept_and_others_dropped() {
        let recent = RecentCallTraces::default();
        assert_eq!(recent.keep_links(&mut export(&[1], &[])), 0);
        let mut later = export(&[], &[1, 2]);
        assert_eq!(recent.keep_links(&mut later), 1);
        let kept: Vec<&str> = later.decoded.spans.iter().map(|s| s.trace_id.as_str()).collect();
        assert_eq!(kept, [format!("{:032x}", 1)]);
        assert!(later.loose_links.is_empty());
    }

    #[test]
    fn the_oldest_trace_is_forgotten_past_the_bound() {
        let recent = RecentCallTraces::default();
        let traces: Vec<u128> = (1..=RECENT_CALL_TRACES as u128 + 1).collect();
        recent.keep_links(&mut export(&traces, &[]));
        assert_eq!(recent.keep_links(&mut export(&[], &[1, 2, RECENT_CALL_TRACES as u128 + 1])), 2);
        assert_eq!(recent.inner.lock().unwrap().order.len(), RECENT_CALL_TRACES);
    }
}
