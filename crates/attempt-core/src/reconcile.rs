//! The reconciliation's rules (docs/reconcile.md): a cell's drift split
//! into causes that add up to it exactly, and the cell's status. Sums come
//! from the store; what they mean is decided here, once, with its tests.
//! Money is integer pico-dollars in 128 bits.

use chrono::{DateTime, Utc};
use strum::{EnumString, IntoStaticStr};

use crate::request::{Params, RequestError, time_param};

/// How long a cell is: a UTC day or hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumString, IntoStaticStr, strum::VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum Grain {
    Day,
    Hour,
}

impl Grain {
    /// DuckDB's `date_trunc` part.
    pub fn name(self) -> &'static str {
        self.into()
    }

    pub fn length(self) -> chrono::Duration {
        match self {
            Self::Day => chrono::Duration::days(1),
            Self::Hour => chrono::Duration::hours(1),
        }
    }

    /// The start of the cell holding `t`.
    pub fn floor(self, t: DateTime<Utc>) -> DateTime<Utc> {
        let step = self.length().num_seconds();
        let seconds = t.timestamp().div_euclid(step) * step;
        DateTime::from_timestamp(seconds, 0).unwrap_or(t)
    }

    /// The end of the cell holding the instant just before `t`.
    pub fn ceil(self, t: DateTime<Utc>) -> DateTime<Utc> {
        let floor = self.floor(t);
        if floor == t { t } else { floor + self.length() }
    }
}

/// What a reconciliation is asked, checked once for the command's flags
/// and the route's parameters (`since`, `until`, `grain`, `tolerance_usd`,
/// `tolerance_pct`, `settle_hours`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Question {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub grain: Grain,
    pub tolerance: Tolerance,
    /// Cells that end after this are unsettled.
    pub settled_before: DateTime<Utc>,
}

/// The window when none is asked: the 7 days before `until`.
pub const DEFAULT_DAYS: i64 = 7;
/// The most days one question may span (a year of daily cells).
pub const MAX_DAYS: i64 = 366;
/// Settle time when none is asked, and its bound, in hours.
pub const DEFAULT_SETTLE_HOURS: i64 = 24;
pub const MAX_SETTLE_HOURS: i64 = 24 * 31;

impl Question {
    pub fn from_params(params: &(impl Params + ?Sized), now: DateTime<Utc>) -> Result<Self, RequestError> {
        let until = time_param(params, "until", now)?.unwrap_or(now);
        let since = time_param(params, "since", now)?.unwrap_or(until - chrono::Duration::days(DEFAULT_DAYS));
        if since >= until {
            return Err(RequestError("since: must be before until".into()));
        }
        if until - since > chrono::Duration::days(MAX_DAYS) {
            return Err(RequestError(format!("since: at most {MAX_DAYS} days before until")));
        }
        let grain = match params.param("grain") {
            None => Grain::Day,
            Some(g) => g.parse().map_err(|_| RequestError(format!("grain: `{g}` is not day or hour")))?,
        };
        let pusd = match params.param("tolerance_usd") {
            None => Tolerance::default().pusd,
            Some(v) => {
                bounded_amount(v, 1_000_000, 12).map_err(|e| RequestError(format!("tolerance_usd: {e}")))?
            }
        };
        let basis_points = match params.param("tolerance_pct") {
            None => Tolerance::default().basis_points,
            Some(v) => bounded_amount(v, 100, 2).map_err(|e| RequestError(format!("tolerance_pct: {e}")))?,
        };
        let settle = match params.param("settle_hours") {
            None => DEFAULT_SETTLE_HOURS,
            Some(v) => {
                v.trim().parse::<i64>().ok().filter(|h| (0..=MAX_SETTLE_HOURS).contains(h)).ok_or_else(
                    || {
                        RequestError(format!(
                            "settle_hours: `{v}` is not a whole number of hours from 0 to {MAX_SETTLE_HOURS}"
                        ))
                    },
                )?
            }
        };
        Ok(Self {
            since,
            until,
            grain,
            tolerance: Tolerance { pusd, basis_points },
            settled_before: now - chrono::Duration::hours(settle),
        })
    }
}

/// A decimal from 0 to `max` with at most `decimals` places, as an integer
/// of those places (`1.25` with 2 places is 125).
fn bounded_amount(text: &str, max: i128, decimals: u32) -> Result<i128, String> {
    use crate::bill::money::{Unit, pico_units};
    let pico = pico_units(text, Unit::Major)?;
    let unit = 10i128.pow(12 - decimals);
    if !(0..=max * 1_000_000_000_000).contains(&pico) {
        return Err(format!("`{}` is not between 0 and {max}", text.trim()));
    }
    if pico % unit != 0 {
        return Err(format!("`{}` has more than {decimals} decimals", text.trim()));
    }
    Ok(pico / unit)
}

/// Tokens by kind, summed over a cell. `input` counts all input, cached
/// and cache writes included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenSums {
    pub input: i128,
    pub cached_input: i128,
    pub cache_write_input: i128,
    pub output: i128,
}

impl TokenSums {
    pub fn add(&mut self, other: &TokenSums) {
        self.input += other.input;
        self.cached_input += other.cached_input;
        self.cache_write_input += other.cache_write_input;
        self.output += other.output;
    }
}

/// The ledger's side of a cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LedgerSide {
    pub attempts: i64,
    pub billable_attempts: i64,
    /// Failed attempts without output tokens: providers do not bill them.
    pub unbilled_failures: i64,
    /// The billable attempts' tokens.
    pub tokens: TokenSums,
    /// What the report charges the cell's attempts, known part.
    pub cost_pusd: i128,
    /// Attempts whose cost the report does not know (no price, no usage).
    pub unknown_cost_attempts: i64,
    /// The known cost of the unbilled failures.
    pub unbilled_cost_pusd: i128,
    /// The billable attempts' tokens priced by the price table.
    pub repriced_pusd: i128,
    /// Billable attempts that cannot be repriced (no price entry, no usage).
    pub unrepriced_attempts: i64,
}

impl LedgerSide {
    pub fn add(&mut self, other: &LedgerSide) {
        self.attempts += other.attempts;
        self.billable_attempts += other.billable_attempts;
        self.unbilled_failures += other.unbilled_failures;
        self.tokens.add(&other.tokens);
        self.cost_pusd += other.cost_pusd;
        self.unknown_cost_attempts += other.unknown_cost_attempts;
        self.unbilled_cost_pusd += other.unbilled_cost_pusd;
        self.repriced_pusd += other.repriced_pusd;
        self.unrepriced_attempts += other.unrepriced_attempts;
    }

    /// The cost, when every attempt's is known.
    pub fn cost(&self) -> Option<i128> {
        (self.unknown_cost_attempts == 0).then_some(self.cost_pusd)
    }

    pub fn repriced(&self) -> Option<i128> {
        (self.unrepriced_attempts == 0).then_some(self.repriced_pusd)
    }
}

/// The provider's side of a cell, each part `None` where no export covers
/// the cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BilledSide {
    /// Requests, where the usage export counts them (Anthropic does not).
    pub requests: Option<i64>,
    pub tokens: Option<TokenSums>,
    /// Token costs in USD (other costs and currencies are shown apart).
    pub cost_pusd: Option<i128>,
    /// The provider's tokens priced by the price table; `None` also when
    /// the model has no price.
    pub tokens_priced_pusd: Option<i128>,
    /// Whether any fact of the provider falls in the cell.
    pub billed_anything: bool,
}

/// Where a cell's drift comes from; the terms sum to the drift exactly.
/// A term whose inputs are unknown is `None` and its share stays in
/// `unexplained`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Causes {
    pub unbilled_failures: Option<i128>,
    pub emitter_cost: Option<i128>,
    pub tokens: Option<i128>,
    pub price: Option<i128>,
    pub unexplained: Option<i128>,
}

/// `drift_usd` (ledger cost - provider cost) and its causes; `None` when
/// either cost is unknown. The causes of a cell without a drift are still
/// given where their inputs are known (hour cells, usage-only imports).
pub fn decompose(ledger: &LedgerSide, billed: &BilledSide) -> (Option<i128>, Causes) {
    let cost = ledger.cost();
    let repriced = ledger.repriced();
    let unbilled = cost.map(|_| ledger.unbilled_cost_pusd);
    let emitter = cost.zip(repriced).map(|(cost, repriced)| cost - ledger.unbilled_cost_pusd - repriced);
    let tokens = repriced.zip(billed.tokens_priced_pusd).map(|(r, t)| r - t);
    let price = billed.tokens_priced_pusd.zip(billed.cost_pusd).map(|(t, p)| t - p);
    let drift = cost.zip(billed.cost_pusd).map(|(l, p)| l - p);
    let unexplained = drift
        .map(|d| d - unbilled.unwrap_or(0) - emitter.unwrap_or(0) - tokens.unwrap_or(0) - price.unwrap_or(0));
    (drift, Causes { unbilled_failures: unbilled, emitter_cost: emitter, tokens, price, unexplained })
}

/// How a cell compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumString, IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Status {
    /// The provider's exports cover only part of the cell, or the asked
    /// window does: never compared as if whole.
    Partial,
    /// No export of the provider covers the cell's time.
    Uncovered,
    /// The cell ended within the settle time: the provider may still add.
    Unsettled,
    /// The provider billed; the ledger saw nothing.
    ProviderOnly,
    /// The ledger has billable attempts; the provider covered the cell and
    /// billed nothing.
    LedgerOnly,
    /// A cost is unknown on the ledger's side (a model without a price).
    Unpriced,
    /// Only usage is imported for the cell (cost exports are daily): tokens
    /// compare, money does not.
    UsageOnly,
    Matched,
    LedgerHigh,
    LedgerLow,
}

impl Status {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether the cell counts in totals and alerts.
    pub fn is_settled_comparison(self) -> bool {
        matches!(
            self,
            Self::ProviderOnly | Self::LedgerOnly | Self::Matched | Self::LedgerHigh | Self::LedgerLow
        )
    }
}

/// How much drift is no drift: the larger of an amount and a share of the
/// provider's cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tolerance {
    pub pusd: i128,
    /// Hundredths of a percent (basis points) of the provider's cost.
    pub basis_points: i128,
}

impl Default for Tolerance {
    /// $0.01 and 1 %.
    fn default() -> Self {
        Self { pusd: 10_000_000_000, basis_points: 100 }
    }
}

/// What a cell's status reads besides its two sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellTime {
    pub end: DateTime<Utc>,
    /// Some export, or the asked window, covers only part of the cell.
    pub partial: bool,
    /// No export of the provider covers the cell at all.
    pub uncovered: bool,
    /// Cells ending after this are unsettled.
    pub settled_before: DateTime<Utc>,
}

pub fn status(
    time: CellTime,
    ledger: &LedgerSide,
    billed: &BilledSide,
    drift: Option<i128>,
    tolerance: Tolerance,
) -> Status {
    if time.partial {
        return Status::Partial;
    }
    if time.uncovered {
        return Status::Uncovered;
    }
    if time.end > time.settled_before {
        return Status::Unsettled;
    }
    if ledger.attempts == 0 && billed.billed_anything {
        return Status::ProviderOnly;
    }
    if ledger.billable_attempts > 0 && !billed.billed_anything && billed.cost_pusd.is_some() {
        return Status::LedgerOnly;
    }
    let Some(drift) = drift else {
        return if ledger.cost().is_none() { Status::Unpriced } else { Status::UsageOnly };
    };
    let provider_cost = billed.cost_pusd.unwrap_or(0).abs();
    let allowed = tolerance.pusd.max(provider_cost * tolerance.basis_points / 10_000);
    if drift.abs() <= allowed {
        Status::Matched
    } else if drift > 0 {
        Status::LedgerHigh
    } else {
        Status::LedgerLow
    }
}

/// Provider requests beyond the ledger's billable attempts: retries and
/// calls the telemetry did not see.
pub fn hidden_requests(ledger: &LedgerSide, billed: &BilledSide) -> Option<i64> {
    billed.requests.map(|r| (r - ledger.billable_attempts).max(0))
}

#[cfg(test)]
mod tests;
