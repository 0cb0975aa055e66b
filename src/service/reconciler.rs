//! `serve --reconcile-every`: the providers' bills fetched on a schedule
//! (`crate::admin_api`) and imported on a connection of its own. Each run
//! re-reads a look-back (a day by default) so usage the provider reports
//! late replaces what an earlier run read; then the drift of the last
//! settled day of each provider goes to /metrics.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use chrono::Utc;

use super::observer::{Stop, supervised};
use crate::admin_api::{Key, Plan, Provider, fetch};
use crate::read::Reader;
use crate::store::Store;
use crate::telemetry::events::{BillDrift, BillFetchFailed, BillFetched};
use attempt_core::reconcile::Question;

/// A provider the loop fetches: its key and API address.
#[derive(Debug, Clone)]
pub struct Source {
    pub provider: Provider,
    pub key: Key,
    pub base_url: String,
}

/// `--reconcile-every` and what goes with it.
#[derive(Debug, Clone)]
pub struct ReconcileConfig {
    pub every: Duration,
    pub look_back: Duration,
    pub sources: Vec<Source>,
}

pub struct Reconciler {
    pub store: Store,
    pub reader: Reader<Store>,
    pub config: ReconcileConfig,
}

impl Reconciler {
    fn run(&self) {
        let now = Utc::now();
        let look_back =
            chrono::Duration::from_std(self.config.look_back).unwrap_or(chrono::Duration::days(1));
        for source in &self.config.sources {
            let plan = Plan {
                provider: source.provider,
                since: now - look_back,
                until: now,
                base_url: source.base_url.clone(),
            };
            match fetch(&plan, &source.key) {
                Ok(fetched) => {
                    for f in fetched {
                        match self.store.import_bill(&f.pages) {
                            Ok(done) => BillFetched {
                                source: f.pages.source.name(),
                                pages: f.pages.pages,
                                requests: f.requests,
                                throttled: f.throttled,
                                buckets: done.buckets,
                                facts: done.facts,
                            }
                            .emit(),
                            Err(error) => {
                                BillFetchFailed { provider: source.provider.name(), error: &error }.emit()
                            }
                        }
                    }
                }
                Err(error) => BillFetchFailed { provider: source.provider.name(), error: &error }.emit(),
            }
        }
        self.measure(now);
    }

    /// Sets each provider's drift of its last settled, compared day.
    fn measure(&self, now: chrono::DateTime<Utc>) {
        let window = [("since", format!("{}d", attempt_core::reconcile::DEFAULT_DAYS))];
        let question = match Question::from_params(window.as_slice(), now) {
            Ok(q) => q,
            Err(error) => return BillFetchFailed { provider: "all", error: &error }.emit(),
        };
        let answer = match self.reader.reconcile(&question) {
            Ok(answer) => answer,
            Err(error) => return BillFetchFailed { provider: "all", error: &error }.emit(),
        };
        for (provider, day) in crate::report::reconcile::last_settled_days(&answer) {
            BillDrift { provider: &provider, day: day.start, ledger_usd: day.ledger, billed_usd: day.billed }
                .emit();
        }
    }

    pub fn spawn(self, stop: Arc<Stop>) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new().name("reconcile".into()).spawn(move || {
            loop {
                supervised("reconcile", || self.run());
                if stop.wait(self.config.every) {
                    return;
                }
            }
        })
    }
}
