//! A trace's model calls, from its shape alone (docs/record-format.md,
//! "Attempts found by the call"): which model spans are calls, which other
//! model spans describe the same call, and which HTTP client spans are each
//! call's network attempts. Reads ids, parents, kinds and the few facts
//! stored beside each span (`SpanFacts`), never a span's content, so a
//! growing trace is re-read cheaply and only the calls its new spans change
//! are decoded again.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};

use crate::model::{SpanFacts, SpanKind, SpanRecord};

/// Clocks of JavaScript emitters tick in milliseconds: intervals are
/// compared with this much slack.
const SLACK_NS: u64 = 1_000_000;

/// What the shape of a trace needs of a span.
#[derive(Debug, Clone)]
pub struct SpanLink {
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub kind: SpanKind,
    pub facts: SpanFacts,
}

impl SpanLink {
    pub fn of(record: &SpanRecord) -> Self {
        Self {
            span_id: record.span_id.clone(),
            parent_span_id: record.parent_span_id.clone(),
            kind: record.kind,
            facts: record.facts.clone(),
        }
    }
}

/// One model call of a trace, as the trace's shape says. Its attempts are a
/// function of the spans it names alone, so two equal shapes derive equal
/// attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSpans {
    /// The wrappers around the call (nearest first): model spans it
    /// descends from.
    pub around: Vec<String>,
    /// Its network attempts: its HTTP client children, else the HTTP client
    /// spans beside it that it was found to own.
    pub http: Vec<String>,
    /// Other model spans that describe the same call (another
    /// instrumentation's): read for what the call's own span lacks.
    pub same: Vec<String>,
    /// Attempts known only by count: the resend count of a call with no
    /// attempt spans.
    pub resends: u32,
}

impl CallSpans {
    /// The ids of the attempts this call derives to within trace
    /// `trace_id`: one per attempt span, else one per resend and the call's
    /// own; a call that does not map derives to none of them.
    pub fn attempt_ids(&self, trace_id: &str, call_id: &str) -> Vec<String> {
        if self.http.is_empty() {
            (1..=self.resends)
                .map(|k| resent_attempt_id(trace_id, call_id, k))
                .chain(std::iter::once(span_attempt_id(trace_id, call_id)))
                .collect()
        } else {
            self.http.iter().map(|child| span_attempt_id(trace_id, child)).collect()
        }
    }

    /// Every span whose content the call's attempts read.
    pub fn spans<'a>(&'a self, call_id: &'a str) -> impl Iterator<Item = &'a str> {
        std::iter::once(call_id)
            .chain(self.same.iter().map(String::as_str))
            .chain(self.around.iter().map(String::as_str))
            .chain(self.http.iter().map(String::as_str))
    }
}

/// The id of the attempt a span stands for: its trace and span ids in hex.
/// OTLP ids have fixed lengths (16 and 8 bytes, checked when received), so
/// their concatenation names one pair; spans stored before that check may
/// have other lengths, and are told apart by a `:` between the two.
pub fn span_attempt_id(trace_id: &str, span_id: &str) -> String {
    if trace_id.len() == 32 && span_id.len() == 16 {
        format!("{trace_id}{span_id}")
    } else {
        format!("{trace_id}:{span_id}")
    }
}

/// The id of the `k`-th (1-based) attempt a call is known to have made only
/// by its resend count. It sorts before the call's own id
/// (`span_attempt_id`: `-` sorts before every hex digit and before `:`), so
/// at equal start and status the resent attempts come first, in order.
pub fn resent_attempt_id(trace_id: &str, call_id: &str, k: u32) -> String {
    format!("{trace_id}-{call_id}-{k:03}")
}

/// A trace's model calls by the span id of each call's own span, and what
/// the shape could not account for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TraceCalls {
    pub calls: BTreeMap<String, CallSpans>,
    /// HTTP client spans that no call owns and whose parent is not stored,
    /// in a trace with model spans: attempts whose model span never
    /// arrived (or has not arrived yet).
    pub orphan_attempt_spans: u64,
    /// Calls that HTTP spans beside them could belong to as well as to
    /// another call: each is one attempt, its own span, never a guess.
    pub ambiguous_calls: u64,
}

/// What a trace's newer spans change among its calls.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CallChanges {
    /// Calls to derive again: new, or owning other spans than before.
    pub derive: Vec<(String, CallSpans)>,
    /// Attempts whose stored rows go: those of every changed or vanished
    /// call as it was, and of every changed call as it is now (an earlier
    /// try of the same round may have stored them).
    pub retired_attempt_ids: Vec<String>,
}

impl TraceCalls {
    /// The calls of trace `trace_id` whose attempts differ between its
    /// spans `before` and `after` a write. A call with the same spans
    /// derives the same attempts, so it is left as stored.
    pub fn changes(trace_id: &str, before: &TraceCalls, after: &TraceCalls) -> CallChanges {
        let mut changes = CallChanges::default();
        for (call, spans) in &after.calls {
            if before.calls.get(call) != Some(spans) {
                changes.retired_attempt_ids.extend(spans.attempt_ids(trace_id, call));
                changes.derive.push((call.clone(), spans.clone()));
            }
        }
        for (call, spans) in &before.calls {
            if after.calls.get(call) != Some(spans) {
                changes.retired_attempt_ids.extend(spans.attempt_ids(trace_id, call));
            }
        }
        changes
    }
}

/// The model calls of a trace. A model span with a model-span descendant is
/// a wrapper (a framework span around an SDK span), not a call. Calls that
/// describe one call are one (same provider id; or, siblings from different
/// instrumentations asking for the same model whose intervals nest). A call
/// with HTTP client children owns them; one without owns the HTTP client
/// spans beside it (same parent) that start inside its interval and go to
/// its host, when no other call could own them too. Linear in the trace but
/// for the comparisons among one parent's children.
pub fn trace_calls(links: &[SpanLink]) -> TraceCalls {
    let index: HashMap<&str, usize> =
        links.iter().enumerate().map(|(i, l)| (l.span_id.as_str(), i)).collect();
    let parent: Vec<Option<usize>> =
        links.iter().map(|l| l.parent_span_id.as_deref().and_then(|p| index.get(p).copied())).collect();
    let is_model = |i: usize| links[i].kind == SpanKind::Model;
    let nearest = nearest_model_ancestors(links, &parent);
    let mut wrappers = vec![false; links.len()];
    for i in (0..links.len()).filter(|&i| is_model(i)) {
        // Every model ancestor of a model span is a wrapper; once one is
        // marked, so are its own model ancestors.
        let mut up = nearest[i];
        while let Some(a) = up {
            if wrappers[a] {
                break;
            }
            wrappers[a] = true;
            up = nearest[a];
        }
    }
    let calls: Vec<usize> = (0..links.len()).filter(|&i| is_model(i) && !wrappers[i]).collect();
    let is_call: HashSet<usize> = calls.iter().copied().collect();
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut loose: Vec<usize> = Vec::new();
    for i in (0..links.len()).filter(|&i| links[i].kind == SpanKind::Http) {
        match parent[i] {
            Some(p) if is_call.contains(&p) => children.entry(p).or_default().push(i),
            _ => loose.push(i),
        }
    }
    let groups: Vec<Vec<usize>> = same_call_groups(links, &calls)
        .into_iter()
        .map(|mut group| {
            group.sort_by_key(|&i| {
                let f = &links[i].facts;
                (
                    Reverse(children.contains_key(&i)),
                    Reverse(f.resends > 0),
                    f.end_ns.saturating_sub(f.start_ns),
                    links[i].span_id.clone(),
                )
            });
            group
        })
        .collect();
    let owners = Owners::of(links, &groups, &children, &loose);
    let mut out = TraceCalls { ambiguous_calls: owners.ambiguous.len() as u64, ..TraceCalls::default() };
    if !calls.is_empty() {
        out.orphan_attempt_spans =
            loose.iter().filter(|&&h| !owners.owned.contains(&h) && parent[h].is_none()).count() as u64;
    }
    for (g, group) in groups.iter().enumerate() {
        let call = group[0];
        let mut around = Vec::new();
        let mut up = nearest[call];
        while let Some(a) = up {
            if around.len() > links.len() {
                break;
            }
            around.push(links[a].span_id.clone());
            up = nearest[a];
        }
        let owned = children.get(&call).or_else(|| owners.by_group.get(&g));
        let mut http: Vec<String> = owned.into_iter().flatten().map(|&h| links[h].span_id.clone()).collect();
        http.sort_unstable();
        let mut same: Vec<String> = group[1..].iter().map(|&i| links[i].span_id.clone()).collect();
        same.sort_unstable();
        let resends = if http.is_empty() { links[call].facts.resends } else { 0 };
        out.calls.insert(links[call].span_id.clone(), CallSpans { around, http, same, resends });
    }
    out
}

/// Each span's nearest model ancestor (not itself), each found once: a long
/// parent chain (an agent's steps) costs no more than a wide trace. A cycle
/// of bad parent links ends the walk.
fn nearest_model_ancestors(links: &[SpanLink], parent: &[Option<usize>]) -> Vec<Option<usize>> {
    let is_model = |i: usize| links[i].kind == SpanKind::Model;
    let mut nearest: Vec<Option<Option<usize>>> = vec![None; links.len()];
    for start in 0..links.len() {
        // Walk up until a span whose answer is known, then fill the path.
        let mut path = Vec::new();
        let mut current = start;
        let mut on_path = HashSet::new();
        let known = loop {
            if let Some(answer) = nearest[current] {
                break answer;
            }
            if !on_path.insert(current) {
                break None; // a cycle
            }
            path.push(current);
            match parent[current] {
                None => break None,
                Some(p) if is_model(p) => {
                    nearest[current] = Some(Some(p));
                    path.pop();
                    break Some(p);
                }
                Some(p) => current = p,
            }
        };
        for i in path {
            nearest[i] = Some(known);
        }
    }
    nearest.into_iter().map(Option::flatten).collect()
}

/// The calls grouped by the call they describe: the same provider id, or
/// siblings from different instrumentations (different span names) asking
/// for the same model whose intervals nest, unless both carry ids that
/// differ.
fn same_call_groups(links: &[SpanLink], calls: &[usize]) -> Vec<Vec<usize>> {
    let mut sets = DisjointSets::new(calls.len());
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    let mut by_parent: HashMap<&str, Vec<usize>> = HashMap::new();
    for (pos, &i) in calls.iter().enumerate() {
        if let Some(id) = links[i].facts.call_id.as_deref() {
            if let Some(&first) = by_id.get(id) {
                sets.join(first, pos);
            } else {
                by_id.insert(id, pos);
            }
        }
        if let Some(p) = links[i].parent_span_id.as_deref() {
            by_parent.entry(p).or_default().push(pos);
        }
    }
    for mut siblings in by_parent.into_values() {
        let facts = |pos: usize| &links[calls[pos]].facts;
        siblings.sort_by_key(|&pos| (facts(pos).start_ns, Reverse(end(facts(pos)))));
        for (a_at, &a) in siblings.iter().enumerate() {
            let (fa, a_end) = (facts(a), end(facts(a)));
            for &b in &siblings[a_at + 1..] {
                let fb = facts(b);
                if fb.start_ns > a_end {
                    break;
                }
                let nested = end(fb) <= a_end.saturating_add(SLACK_NS);
                let ids_differ = matches!((&fa.call_id, &fb.call_id), (Some(x), Some(y)) if x != y);
                if nested && fa.name != fb.name && fa.model.is_some() && fa.model == fb.model && !ids_differ {
                    sets.join(a, b);
                }
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (pos, &i) in calls.iter().enumerate() {
        groups.entry(sets.root(pos)).or_default().push(i);
    }
    groups.into_values().collect()
}

/// A span's end, never before its start.
fn end(facts: &SpanFacts) -> u64 {
    facts.end_ns.max(facts.start_ns)
}

/// Which loose HTTP spans (beside calls, not under one) each call owns.
struct Owners {
    by_group: HashMap<usize, Vec<usize>>,
    owned: HashSet<usize>,
    ambiguous: HashSet<usize>,
}

/// The calls without HTTP children under one parent, sorted by the start
/// of their hull (the interval their spans cover, with the slack), with the
/// running furthest end: the calls an HTTP span can start inside are found
/// by a binary search and a walk back that stops where no earlier call
/// reaches, so an agent's thousand sequential calls under one span cost a
/// few comparisons each, not a thousand.
#[derive(Default)]
struct Beside {
    groups: Vec<usize>,
    starts: Vec<u64>,
    reach: Vec<u64>,
}

impl Beside {
    fn containing(&self, at: u64) -> impl Iterator<Item = usize> + '_ {
        let upto = self.starts.partition_point(|&s| s <= at);
        (0..upto).rev().take_while(move |&j| self.reach[j] >= at).map(|j| self.groups[j])
    }
}

impl Owners {
    fn of(
        links: &[SpanLink],
        groups: &[Vec<usize>],
        children: &HashMap<usize, Vec<usize>>,
        loose: &[usize],
    ) -> Self {
        let hull = |g: usize| {
            let spans = groups[g].iter().map(|&i| &links[i].facts);
            let from = spans.clone().map(|f| f.start_ns).min().unwrap_or(0);
            let to = spans.map(end).max().unwrap_or(0);
            (from.saturating_sub(SLACK_NS), to.saturating_add(SLACK_NS))
        };
        // The calls without HTTP children, by the parent of any of their spans.
        let mut by_parent: HashMap<&str, Vec<(u64, u64, usize)>> = HashMap::new();
        for (g, group) in groups.iter().enumerate() {
            if children.contains_key(&group[0]) {
                continue;
            }
            let parents: HashSet<&str> =
                group.iter().filter_map(|&i| links[i].parent_span_id.as_deref()).collect();
            let (from, to) = hull(g);
            for p in parents {
                by_parent.entry(p).or_default().push((from, to, g));
            }
        }
        let beside: HashMap<&str, Beside> = by_parent
            .into_iter()
            .map(|(p, mut calls)| {
                calls.sort_unstable();
                let mut sorted = Beside::default();
                let mut furthest = 0;
                for (from, to, g) in calls {
                    furthest = furthest.max(to);
                    sorted.groups.push(g);
                    sorted.starts.push(from);
                    sorted.reach.push(furthest);
                }
                (p, sorted)
            })
            .collect();
        let mut owners =
            Owners { by_group: HashMap::new(), owned: HashSet::new(), ambiguous: HashSet::new() };
        let mut claims: Vec<(usize, usize)> = Vec::new();
        for &h in loose {
            let Some(candidates) = links[h].parent_span_id.as_deref().and_then(|p| beside.get(p)) else {
                continue;
            };
            let http = &links[h].facts;
            // A candidate ranks higher when both name the same host, and
            // when the whole HTTP span lies inside the call's.
            let ranked: Vec<(u8, usize)> = candidates
                .containing(http.start_ns)
                .filter_map(|g| {
                    let host = groups[g].iter().find_map(|&i| links[i].facts.host.as_deref());
                    if matches!((host, http.host.as_deref()), (Some(a), Some(b)) if a != b) {
                        return None;
                    }
                    let inside = |whole: bool| {
                        groups[g].iter().any(|&i| {
                            let f = &links[i].facts;
                            let (from, to) =
                                (f.start_ns.saturating_sub(SLACK_NS), end(f).saturating_add(SLACK_NS));
                            from <= http.start_ns && http.start_ns <= to && (!whole || end(http) <= to)
                        })
                    };
                    if !inside(false) {
                        return None;
                    }
                    let rank = 2 * u8::from(host.is_some() && http.host.is_some()) + u8::from(inside(true));
                    Some((rank, g))
                })
                .collect();
            let Some(best) = ranked.iter().map(|(rank, _)| *rank).max() else { continue };
            let best: Vec<usize> = ranked.iter().filter(|(rank, _)| *rank == best).map(|(_, g)| *g).collect();
            if let [only] = best[..] {
                claims.push((only, h));
            } else {
                owners.ambiguous.extend(best);
            }
        }
        for (g, h) in claims {
            if !owners.ambiguous.contains(&g) {
                owners.by_group.entry(g).or_default().push(h);
                owners.owned.insert(h);
            }
        }
        owners
    }
}

/// Union-find over `0..n`, for grouping spans that describe one call.
struct DisjointSets {
    parent: Vec<usize>,
}

impl DisjointSets {
    fn new(n: usize) -> Self {
        Self { parent: (0..n).collect() }
    }

    fn root(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn join(&mut self, a: usize, b: usize) {
        let (a, b) = (self.root(a), self.root(b));
        if a != b {
            self.parent[a.max(b)] = a.min(b);
        }
    }
}
