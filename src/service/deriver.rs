//! The derivation loop of `serve`, and how far it lags the writer.
//!
//! The writer acknowledges a write once its rows are committed and tells
//! `Derivation` its number; the deriver thread, on a connection of its
//! own, derives the pending writes in rounds (`Store::derive_round`) and
//! tells `Derivation` through which number the derived tables are current.
//! A reader that must see what was acknowledged before it asked waits for
//! that number, for `READ_WAIT` at most, and otherwise says how far behind
//! its answer is (`Freshness`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::store::{ROUND_ROWS, Store};
use crate::telemetry::events::{DerivationRound, DerivationRoundFailed};

/// How long a read waits for derivation to reach what was acknowledged
/// before it was asked; past it, the answer states its lag.
pub const READ_WAIT: Duration = Duration::from_secs(2);

/// Acknowledged writes whose time is remembered for the lag. Past this,
/// the newest entry stands for the writes after it too (its time is the
/// oldest of them), so the lag is never under-stated.
const MAX_REMEMBERED_WRITES: usize = 100_000;

/// How long the deriver sleeps when nothing is pending (a write wakes it
/// sooner), and after a round that failed.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// The least time between the end of a round and the start of the next,
/// unless a reader waits for it or the writer waits for room: a round has a
/// fixed cost (about 150-250 ms of statements on two cores, whatever it
/// derives), so writes that trickle in are derived in batches instead of a
/// round each, and the CPU stays with the writer.
const MIN_ROUND_GAP: Duration = Duration::from_millis(250);

/// Why the deriver was woken.
#[derive(Default)]
struct Wake {
    /// A write was acknowledged.
    written: bool,
    /// A reader waits for derivation, the writer waits for room, or the
    /// loop is stopping: no gap.
    urgent: bool,
}

/// Rows acknowledged and not derived yet past which the writer waits before
/// its next commit: derivation keeps up with any sustained load (the lag
/// stays about one round: a round of this many rows derives in about a
/// second on two cores while writes go on), and clients see the wait as
/// latency, then as 503 once the write queue is full, never as a lag that
/// grows without end.
pub const MAX_PENDING_ROWS: u64 = 30_000;

/// The longest the writer waits for that room; past it, it commits anyway
/// (a deriver that is failing must not stop writes too).
pub const MAX_BACKPRESSURE_WAIT: Duration = Duration::from_secs(5);

/// The writes acknowledged and not derived yet.
#[derive(Default)]
struct Waiting {
    /// (number, when acknowledged, rows) in order.
    writes: VecDeque<(i64, Instant, u64)>,
    rows: u64,
}

use crate::report::Freshness;

/// Shared by the writer, the deriver and the readers.
pub struct Derivation {
    acked: AtomicI64,
    derived: watch::Sender<i64>,
    waiting: Mutex<Waiting>,
    /// Signalled when derivation made room for the writer.
    room: Condvar,
    wake: (Mutex<Wake>, Condvar),
    /// Rounds committed: what the metrics refresher watches for a change
    /// (the telemetry counts them too, for `/metrics`).
    pub rounds: AtomicU64,
    /// The last round failed (not on data: a storage error); cleared by
    /// the next one that commits.
    pub failing: AtomicBool,
    pub quarantined: AtomicU64,
    pub alive: AtomicBool,
}

impl Derivation {
    /// Everything through `derived_through` is derived; `quarantined`
    /// workflows are set aside.
    pub fn new(derived_through: i64, quarantined: u64) -> Self {
        Self {
            acked: AtomicI64::new(derived_through),
            derived: watch::Sender::new(derived_through),
            waiting: Mutex::new(Waiting::default()),
            room: Condvar::new(),
            wake: (Mutex::new(Wake::default()), Condvar::new()),
            rounds: AtomicU64::new(0),
            failing: AtomicBool::new(false),
            quarantined: AtomicU64::new(quarantined),
            alive: AtomicBool::new(true),
        }
    }

    /// The writer committed write `seq` of `rows` rows: called before it
    /// answers, so a client that reads after its answer waits for it.
    pub fn acknowledged(&self, seq: i64, rows: u64) {
        self.acked.fetch_max(seq, Ordering::SeqCst);
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            waiting.rows += rows;
            if waiting.writes.len() >= MAX_REMEMBERED_WRITES {
                if let Some(last) = waiting.writes.back_mut() {
                    last.0 = seq;
                    last.2 += rows;
                }
            } else {
                waiting.writes.push_back((seq, Instant::now(), rows));
            }
        }
        self.wake(false);
    }

    /// Wakes the deriver: at once if `urgent`, else once its gap is over.
    fn wake(&self, urgent: bool) {
        let (woken, signal) = &self.wake;
        let mut woken = woken.lock().unwrap_or_else(|p| p.into_inner());
        woken.written = true;
        woken.urgent |= urgent;
        signal.notify_one();
    }

    fn derived_through(&self, seq: i64) {
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            while let Some(&(s, _, rows)) = waiting.writes.front() {
                if s > seq {
                    break;
                }
                waiting.rows -= rows;
                waiting.writes.pop_front();
            }
        }
        self.room.notify_all();
        self.derived.send_if_modified(|current| {
            let moved = seq > *current;
            *current = (*current).max(seq);
            moved
        });
    }

    /// How current the derived tables are now, for a question asked when
    /// `asked` was the newest acknowledged write.
    pub fn freshness(&self, asked: i64) -> Freshness {
        let waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        Freshness {
            complete: *self.derived.borrow() >= asked,
            pending_commits: waiting.writes.len() as u64,
            lag_seconds: waiting.writes.front().map_or(0.0, |(_, at, _)| at.elapsed().as_secs_f64()),
        }
    }

    /// Rows acknowledged and not derived yet.
    pub fn pending_rows(&self) -> u64 {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).rows
    }

    /// The writer's flow control: waits while more than `MAX_PENDING_ROWS`
    /// rows wait for derivation, for `MAX_BACKPRESSURE_WAIT` at most, or
    /// not at all while the deriver is failing or stopped. Returns how long
    /// it waited.
    pub fn wait_for_room(&self) -> Duration {
        let began = Instant::now();
        if self.pending_rows() > MAX_PENDING_ROWS {
            self.wake(true);
        }
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        while waiting.rows > MAX_PENDING_ROWS
            && self.alive.load(Ordering::Relaxed)
            && !self.failing.load(Ordering::Relaxed)
        {
            let Some(left) = MAX_BACKPRESSURE_WAIT.checked_sub(began.elapsed()) else { break };
            waiting =
                self.room.wait_timeout(waiting, left).map(|(w, _)| w).unwrap_or_else(|p| p.into_inner().0);
        }
        began.elapsed()
    }

    /// Now, for a question asked now.
    pub fn current(&self) -> Freshness {
        self.freshness(self.acked.load(Ordering::SeqCst))
    }

    /// Waits until every write acknowledged before this call is derived,
    /// for `READ_WAIT` at most.
    pub async fn caught_up(&self) -> Freshness {
        let asked = self.acked.load(Ordering::SeqCst);
        let mut derived = self.derived.subscribe();
        if *derived.borrow() < asked {
            self.wake(true);
        }
        let _ = tokio::time::timeout(READ_WAIT, derived.wait_for(|through| *through >= asked)).await;
        self.freshness(asked)
    }

    /// Sleeps until a write is acknowledged (or something urgent), or
    /// `IDLE_WAIT`.
    fn idle(&self) {
        let (woken, signal) = &self.wake;
        let mut woken = woken.lock().unwrap_or_else(|p| p.into_inner());
        if !woken.written && !woken.urgent {
            woken =
                signal.wait_timeout(woken, IDLE_WAIT).map(|(w, _)| w).unwrap_or_else(|p| p.into_inner().0);
        }
        *woken = Wake::default();
    }

    /// After a round: sleeps `MIN_ROUND_GAP`, or until something urgent.
    fn pause(&self) {
        let began = Instant::now();
        let (woken, signal) = &self.wake;
        let mut woken = woken.lock().unwrap_or_else(|p| p.into_inner());
        while !woken.urgent {
            let Some(left) = MIN_ROUND_GAP.checked_sub(began.elapsed()) else { break };
            woken = signal.wait_timeout(woken, left).map(|(w, _)| w).unwrap_or_else(|p| p.into_inner().0);
        }
        *woken = Wake::default();
    }
}

/// Stops the deriver thread.
#[derive(Default)]
pub struct Stop(AtomicBool);

impl Stop {
    pub fn stop(&self, derivation: &Derivation) {
        self.0.store(true, Ordering::SeqCst);
        derivation.wake(true);
    }

    fn stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Starts the deriver thread on its own connection.
pub fn spawn(store: Store, derivation: Arc<Derivation>, stop: Arc<Stop>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("attempt-deriver".into()).spawn(move || run(&store, &derivation, &stop))
}

fn run(store: &Store, derivation: &Derivation, stop: &Stop) {
    while !stop.stopped() {
        // A panic is a bug in one round: logged and counted, the
        // transaction rolled back, and the loop goes on.
        let round = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.derive_round(ROUND_ROWS)));
        match round {
            Ok(Ok(Some(round))) => {
                derivation.rounds.fetch_add(1, Ordering::Relaxed);
                derivation.quarantined.fetch_add(round.quarantined, Ordering::Relaxed);
                DerivationRound { clamped: round.clamped }.emit();
                derivation.failing.store(false, Ordering::Relaxed);
                derivation.derived_through(round.derived_through);
                derivation.pause();
            }
            Ok(Ok(None)) => {
                derivation.failing.store(false, Ordering::Relaxed);
                // Nothing pending: the moment to checkpoint, so no commit on
                // the write path pays for it.
                if let Err(err) = store.checkpoint_if_idle() {
                    tracing::debug!(error = %err, "idle checkpoint failed");
                }
                derivation.idle();
            }
            Ok(Err(err)) => {
                DerivationRoundFailed { error: Some(&err) }.emit();
                derivation.failing.store(true, Ordering::Relaxed);
                std::thread::sleep(IDLE_WAIT);
            }
            Err(_) => {
                DerivationRoundFailed { error: None }.emit();
                let _ = store.rollback_open_transaction();
                derivation.failing.store(true, Ordering::Relaxed);
                std::thread::sleep(IDLE_WAIT);
            }
        }
    }
    derivation.alive.store(false, Ordering::Relaxed);
    derivation.room.notify_all();
}
