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
    /// GenAI events (log records) about the call's spans, by record id:
    /// what they say completes the attempt of the span they name.
    pub events: Vec<String>,
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
            .chain(self.events.iter().map(String::as_str))
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
    /// another call, and model spans that could describe the same call as
    /// either of two others: each is kept apart, never a guess.
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
/// describe one call are one (`same_call_groups`). A call owns the HTTP
/// client spans below it (through any spans but another HTTP span); one
/// that has none owns the HTTP client spans hanging off any of its
/// ancestors that start inside its interval and go to its host, when no
/// other call could own them as well (`Owners`): an instrumentation that
/// never makes its spans current leaves them under whatever span was
/// current, anywhere above the call.
pub fn trace_calls(links: &[SpanLink]) -> TraceCalls {
    if !links.iter().any(|l| l.kind == SpanKind::Event) {
        return calls_of_spans(links);
    }
    // Events are no part of the parentage: the calls come from the spans,
    // then each event joins the call that holds the span it names.
    let (events, spans): (Vec<SpanLink>, Vec<SpanLink>) =
        links.iter().cloned().partition(|l| l.kind == SpanKind::Event);
    let mut out = calls_of_spans(&spans);
    let mut call_of: HashMap<&str, &str> = HashMap::new();
    for (call, shape) in &out.calls {
        for span in std::iter::once(call).chain(&shape.same).chain(&shape.http) {
            call_of.insert(span.as_str(), call.as_str());
        }
    }
    let mut joined: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for event in &events {
        let named = event.parent_span_id.as_deref().and_then(|span| call_of.get(span));
        if let Some(&call) = named {
            joined.entry(call.to_string()).or_default().push(event.span_id.clone());
        }
    }
    for (call, mut ids) in joined {
        ids.sort_unstable();
        if let Some(shape) = out.calls.get_mut(&call) {
            shape.events = ids;
        }
    }
    out
}

fn calls_of_spans(links: &[SpanLink]) -> TraceCalls {
    let tree = Tree::of(links);
    let is_model = |i: usize| links[i].kind == SpanKind::Model;
    let nearest = nearest_ancestors(&tree, is_model);
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
    let is_http = |i: usize| links[i].kind == SpanKind::Http;
    let above_http = nearest_ancestors(&tree, |i| is_model(i) || is_http(i));
    let mut below: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut loose: Vec<usize> = Vec::new();
    for h in (0..links.len()).filter(|&i| is_http(i)) {
        match above_http[h] {
            // One request seen by two HTTP instrumentations is the outer one.
            Some(a) if is_http(a) => {}
            Some(a) if is_call.contains(&a) => below.entry(a).or_default().push(h),
            _ => loose.push(h),
        }
    }
    let (groups, undecided) = same_call_groups(links, &tree, &calls, |i| below.contains_key(&i));
    let groups: Vec<Vec<usize>> = groups
        .into_iter()
        .map(|mut group| {
            group.sort_by_key(|&i| {
                let f = &links[i].facts;
                (
                    Reverse(below.contains_key(&i)),
                    Reverse(f.resends > 0),
                    f.end_ns.saturating_sub(f.start_ns),
                    links[i].span_id.clone(),
                )
            });
            group
        })
        .collect();
    let owners = Owners::of(links, &tree, &groups, &below, &loose);
    let mut out =
        TraceCalls { ambiguous_calls: owners.ambiguous.len() as u64 + undecided, ..TraceCalls::default() };
    if !calls.is_empty() {
        out.orphan_attempt_spans = loose
            .iter()
            .filter(|&&h| !owners.owned.contains(&h) && tree.parent[h].is_none_or(|p| p >= links.len()))
            .count() as u64;
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
        let own = group.iter().filter_map(|i| below.get(i)).flatten();
        let mut http: Vec<String> = own
            .chain(owners.by_group.get(&g).into_iter().flatten())
            .map(|&h| links[h].span_id.clone())
            .collect();
        http.sort_unstable();
        let mut same: Vec<String> = group[1..].iter().map(|&i| links[i].span_id.clone()).collect();
        same.sort_unstable();
        let resends = if http.is_empty() { links[call].facts.resends } else { 0 };
        out.calls.insert(
            links[call].span_id.clone(),
            CallSpans { around, http, same, resends, events: Vec::new() },
        );
    }
    out
}

/// A trace's parentage: its spans (`0..spans`) and, after them, a node for
/// each parent id no stored span has (a span not arrived yet, or never
/// exported), so spans under one missing parent are still related. Each
/// node's place in a walk from the roots tells ancestry in constant time;
/// spans in a cycle of bad parent links are in no walk and related to none.
/// A missing parent only HTTP spans name is a lost model span; any other
/// cuts its subtree's ancestry: a span that was exported alone, with no
/// model or HTTP span of its trace, is not stored (docs/record-format.md,
/// "Content"), so what lies above it is unknown.
struct Tree {
    spans: usize,
    parent: Vec<Option<usize>>,
    depth: Vec<usize>,
    enter: Vec<usize>,
    exit: Vec<usize>,
    root: Vec<usize>,
    lost_call: Vec<bool>,
}

impl Tree {
    fn of(links: &[SpanLink]) -> Self {
        let mut index: HashMap<&str, usize> =
            links.iter().enumerate().map(|(i, l)| (l.span_id.as_str(), i)).collect();
        let mut parent: Vec<Option<usize>> = Vec::with_capacity(links.len());
        for link in links {
            let p = link.parent_span_id.as_deref().map(|id| {
                let next = index.len();
                *index.entry(id).or_insert(next)
            });
            parent.push(p);
        }
        parent.resize(index.len(), None);
        let nodes = parent.len();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes];
        for (i, p) in parent.iter().enumerate() {
            if let Some(p) = *p {
                children[p].push(i);
            }
        }
        let mut lost_call = vec![false; nodes];
        for p in links.len()..nodes {
            lost_call[p] = children[p].iter().all(|&c| links[c].kind == SpanKind::Http);
        }
        let (mut depth, mut enter, mut exit) =
            (vec![0; nodes], vec![usize::MAX; nodes], vec![usize::MAX; nodes]);
        let mut root = vec![usize::MAX; nodes];
        let mut clock = 0;
        for top in (0..nodes).filter(|&i| parent[i].is_none()) {
            // Iterative, so an agent's thousand-deep chain of steps is no
            // deeper a stack than one span.
            let mut stack = vec![(top, 0)];
            enter[top] = clock;
            root[top] = top;
            clock += 1;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                if let Some(&child) = children[node].get(*next) {
                    *next += 1;
                    depth[child] = depth[node] + 1;
                    enter[child] = clock;
                    root[child] = top;
                    clock += 1;
                    stack.push((child, 0));
                } else {
                    exit[node] = clock;
                    stack.pop();
                }
            }
        }
        Self { spans: links.len(), parent, depth, enter, exit, root, lost_call }
    }

    /// Whether `a` is above `b` as far as what is stored tells: it is, or
    /// `b`'s ancestry is cut (its topmost parent was never stored) below
    /// somewhere `a` could be.
    fn may_hold(&self, a: usize, b: usize) -> bool {
        if self.holds(a, b) {
            return true;
        }
        if !(self.placed(a) && self.placed(b)) {
            return false;
        }
        let (top_a, top_b) = (self.root[a], self.root[b]);
        top_a != top_b && top_b >= self.spans && !self.lost_call[top_b]
    }

    fn placed(&self, node: usize) -> bool {
        self.enter[node] != usize::MAX
    }

    /// Whether `a` is `b` or above it.
    fn holds(&self, a: usize, b: usize) -> bool {
        self.placed(a) && self.placed(b) && self.enter[a] <= self.enter[b] && self.exit[b] <= self.exit[a]
    }

    /// The depth of the nearest span above `a` that is also above `b`:
    /// how closely parentage relates them (`None`: not at all).
    fn kinship(&self, a: usize, b: usize) -> Option<usize> {
        if !self.placed(a) {
            return None;
        }
        let mut up = self.parent[a];
        while let Some(p) = up {
            if self.holds(p, b) {
                return Some(self.depth[p]);
            }
            up = self.parent[p];
        }
        None
    }
}

/// Each span's nearest ancestor (not itself) that `stops`, each found
/// once: a long parent chain (an agent's steps) costs no more than a wide
/// trace. A cycle of bad parent links ends the walk.
fn nearest_ancestors(tree: &Tree, stops: impl Fn(usize) -> bool) -> Vec<Option<usize>> {
    let stops = |i: usize| i < tree.spans && stops(i);
    let mut nearest: Vec<Option<Option<usize>>> = vec![None; tree.spans];
    for start in 0..tree.spans {
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
            match tree.parent[current] {
                Some(p) if p >= tree.spans => break None,
                None => break None,
                Some(p) if stops(p) => {
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

/// The calls grouped by the call they describe, and how many spans were
/// as likely one call with two others. Spans of one call: the same
/// provider id; or spans from different instrumentations (different span
/// names) asking for the same model whose intervals nest, unless both carry
/// ids that differ. Siblings so are one call, as an instrumentation beside
/// another leaves them. A framework that never makes its spans current
/// leaves the SDK's span under whatever was current, an ancestor of the
/// framework's span: two such spans are one call when one hangs off an
/// ancestor of the other, not both have HTTP spans below them, and their
/// token counts agree where both state them; each joins its likeliest
/// others (stating the same tokens, then hanging off the nearest ancestor).
/// A wrong join moves no tokens: each SDK span's tokens stay on its own
/// HTTP span that delivered (`derive_call`).
/// How likely a span is one call with another: (it states the same
/// tokens, the depth of the ancestor both hang under).
type Likelihood = (bool, Option<usize>);

fn same_call_groups(
    links: &[SpanLink],
    tree: &Tree,
    calls: &[usize],
    has_http: impl Fn(usize) -> bool,
) -> (Vec<Vec<usize>>, u64) {
    let mut sets = DisjointSets::new(
        calls.iter().map(|&i| [links[i].facts.input_tokens, links[i].facts.output_tokens]).collect(),
    );
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for (pos, &i) in calls.iter().enumerate() {
        if let Some(id) = links[i].facts.call_id.as_deref() {
            if let Some(&first) = by_id.get(id) {
                sets.join(first, pos);
            } else {
                by_id.insert(id, pos);
            }
        }
    }
    let facts = |pos: usize| &links[calls[pos]].facts;
    let mut by_start: Vec<usize> = (0..calls.len()).collect();
    by_start.sort_by_key(|&pos| (facts(pos).start_ns, Reverse(end(facts(pos)))));
    // Each span's likeliest other span of its call away from its siblings,
    // ranked by (states the same tokens, kinship).
    let mut likeliest: BTreeMap<usize, Vec<(Likelihood, usize)>> = BTreeMap::new();
    for (a_at, &a) in by_start.iter().enumerate() {
        let (fa, a_end) = (facts(a), end(facts(a)));
        for &b in &by_start[a_at + 1..] {
            let fb = facts(b);
            if fb.start_ns > a_end {
                break;
            }
            let nested = end(fb) <= a_end.saturating_add(SLACK_NS);
            let ids_differ = matches!((&fa.call_id, &fb.call_id), (Some(x), Some(y)) if x != y);
            if !nested || fa.name == fb.name || fa.model.is_none() || fa.model != fb.model || ids_differ {
                continue;
            }
            let (span_a, span_b) = (calls[a], calls[b]);
            if tree.parent[span_a].is_some() && tree.parent[span_a] == tree.parent[span_b] {
                sets.join(a, b);
                continue;
            }
            let hangs_off = |x: usize, y: usize| tree.parent[x].is_some_and(|p| tree.may_hold(p, y));
            if !(hangs_off(span_a, span_b) || hangs_off(span_b, span_a))
                || (has_http(span_a) && has_http(span_b))
            {
                continue;
            }
            let counts = |f: &SpanFacts| [f.input_tokens, f.output_tokens];
            let pairs = counts(fa).into_iter().zip(counts(fb));
            if pairs.clone().any(|pair| matches!(pair, (Some(x), Some(y)) if x != y)) {
                continue;
            }
            let same_tokens = pairs.clone().any(|pair| matches!(pair, (Some(_), Some(_))));
            let rank = (same_tokens, tree.kinship(span_a, span_b));
            likeliest.entry(a).or_default().push((rank, b));
            likeliest.entry(b).or_default().push((rank, a));
        }
    }
    let mut undecided = 0;
    // In an order of the spans alone, so equal traces group alike however
    // their spans were stored.
    let mut likeliest: Vec<_> = likeliest.into_iter().collect();
    likeliest.sort_by(|(a, _), (b, _)| links[calls[*a]].span_id.cmp(&links[calls[*b]].span_id));
    for (a, others) in likeliest {
        let best = others.iter().map(|(rank, _)| *rank).max();
        let mut top: Vec<usize> =
            others.iter().filter(|(rank, _)| Some(*rank) == best).map(|(_, b)| *b).collect();
        // Two as likely are both joined: the attempts below each stay
        // counted, where leaving the span alone would count it as a call
        // of its own. One after the other they are a framework's tries;
        // at the same time, perhaps two calls: counted.
        top.sort_by_key(|&b| (facts(b).start_ns, &links[calls[b]].span_id));
        undecided += u64::from(top.windows(2).any(|w| facts(w[1]).start_ns < end(facts(w[0]))));
        for b in top {
            sets.join_agreeing(a, b);
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (pos, &i) in calls.iter().enumerate() {
        groups.entry(sets.root(pos)).or_default().push(i);
    }
    (groups.into_values().collect(), undecided)
}

/// A span's end, never before its start.
fn end(facts: &SpanFacts) -> u64 {
    facts.end_ns.max(facts.start_ns)
}

/// Which HTTP spans not below any call each call owns.
struct Owners {
    by_group: HashMap<usize, Vec<usize>>,
    owned: HashSet<usize>,
    ambiguous: HashSet<usize>,
}

/// The calls with a span without HTTP spans of its own, sorted by the start
/// of the hull of such spans (with the slack), with the running
/// furthest end: the calls an HTTP span can start inside are found by a
/// binary search and a walk back that stops where no earlier call reaches,
/// so an agent's thousand sequential calls cost a few comparisons each, not
/// a thousand.
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
    /// An HTTP span not below any call goes to a call whose span without
    /// HTTP spans of its own (the whole call's span, or a framework's
    /// around the SDK's) starts around it and goes to its host, and that it
    /// hangs off an ancestor of (as far as what is stored tells); or whose
    /// parent was lost (a model span that was never exported: an
    /// instrumentation that never ends a failed call's span). Among several,
    /// the one naming the same host wins, then the one parentage surely
    /// relates, then the one whose interval holds all of it; a tie is
    /// nobody's (`ambiguous`), never a guess.
    fn of(
        links: &[SpanLink],
        tree: &Tree,
        groups: &[Vec<usize>],
        below: &HashMap<usize, Vec<usize>>,
        loose: &[usize],
    ) -> Self {
        let umbrellas: Vec<Vec<usize>> = groups
            .iter()
            .map(|group| group.iter().copied().filter(|i| !below.contains_key(i)).collect())
            .collect();
        let window = |f: &SpanFacts| (f.start_ns.saturating_sub(SLACK_NS), end(f).saturating_add(SLACK_NS));
        let mut hulls: Vec<(u64, u64, usize)> = umbrellas
            .iter()
            .enumerate()
            .filter(|(_, spans)| !spans.is_empty())
            .map(|(g, spans)| {
                let windows = spans.iter().map(|&i| window(&links[i].facts));
                let from = windows.clone().map(|w| w.0).min().unwrap_or(0);
                (from, windows.map(|w| w.1).max().unwrap_or(0), g)
            })
            .collect();
        hulls.sort_unstable();
        let mut beside = Beside::default();
        let mut furthest = 0;
        for (from, to, g) in hulls {
            furthest = furthest.max(to);
            beside.groups.push(g);
            beside.starts.push(from);
            beside.reach.push(furthest);
        }
        let mut owners =
            Owners { by_group: HashMap::new(), owned: HashSet::new(), ambiguous: HashSet::new() };
        let mut claims: Vec<(usize, usize)> = Vec::new();
        for &h in loose {
            let http = &links[h].facts;
            let Some(attached) = tree.parent[h] else { continue };
            let lost = attached >= links.len() && tree.lost_call[attached];
            let ranked: Vec<((bool, bool, bool), usize)> = beside
                .containing(http.start_ns)
                .filter_map(|g| {
                    let host = groups[g].iter().find_map(|&i| links[i].facts.host.as_deref());
                    if matches!((host, http.host.as_deref()), (Some(a), Some(b)) if a != b) {
                        return None;
                    }
                    let holding = |whole: bool, related: &dyn Fn(usize) -> bool| {
                        umbrellas[g].iter().any(|&i| {
                            let (from, to) = window(&links[i].facts);
                            related(i)
                                && from <= http.start_ns
                                && http.start_ns <= to
                                && (!whole || end(http) <= to)
                        })
                    };
                    let known = |i: usize| lost || tree.holds(attached, i);
                    let possible = |i: usize| lost || tree.may_hold(attached, i);
                    holding(false, &possible).then(|| {
                        let host_named = host.is_some() && http.host.is_some();
                        ((host_named, holding(false, &known), holding(true, &possible)), g)
                    })
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

/// Union-find over `0..n`, for grouping spans that describe one call;
/// each set keeps the token counts its spans state, so a set never gathers
/// two that differ through spans that state none.
struct DisjointSets {
    parent: Vec<usize>,
    tokens: Vec<[Option<i64>; 2]>,
}

impl DisjointSets {
    fn new(tokens: Vec<[Option<i64>; 2]>) -> Self {
        Self { parent: (0..tokens.len()).collect(), tokens }
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
            let (keep, gone) = (a.min(b), a.max(b));
            self.parent[gone] = keep;
            for k in 0..2 {
                self.tokens[keep][k] = self.tokens[keep][k].or(self.tokens[gone][k]);
            }
        }
    }

    /// Joins `a` and `b` unless their sets state token counts that differ.
    fn join_agreeing(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.root(a), self.root(b));
        let differ =
            (0..2).any(|k| matches!((self.tokens[ra][k], self.tokens[rb][k]), (Some(x), Some(y)) if x != y));
        if !differ {
            self.join(ra, rb);
        }
    }
}
