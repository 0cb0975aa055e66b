use super::*;
use proptest::prelude::*;

fn ledger(cost: i128, unbilled: i128, repriced: i128) -> LedgerSide {
    LedgerSide {
        attempts: 3,
        billable_attempts: 2,
        unbilled_failures: 1,
        cost_pusd: cost,
        unbilled_cost_pusd: unbilled,
        repriced_pusd: repriced,
        ..LedgerSide::default()
    }
}

fn billed(cost: Option<i128>, priced: Option<i128>) -> BilledSide {
    BilledSide { cost_pusd: cost, tokens_priced_pusd: priced, billed_anything: true, ..BilledSide::default() }
}

#[test]
fn every_term_known_leaves_nothing_unexplained() {
    // The shapes: a charged 429, an emitter's own figure, a hidden
    // request, a discount.
    let (drift, causes) = decompose(&ledger(2_415, 1_000, 1_125), &billed(Some(2_037), Some(2_115)));
    assert_eq!(drift, Some(378));
    assert_eq!(
        causes,
        Causes {
            unbilled_failures: Some(1_000),
            emitter_cost: Some(290),
            tokens: Some(-990),
            price: Some(78),
            unexplained: Some(0)
        }
    );
}

#[test]
fn an_unknown_input_leaves_its_share_unexplained() {
    let mut unpriced = ledger(1_500, 500, 0);
    unpriced.unrepriced_attempts = 2;
    let (drift, causes) = decompose(&unpriced, &billed(Some(1_200), None));
    assert_eq!(drift, Some(300));
    assert_eq!(causes.emitter_cost, None);
    assert_eq!(causes.tokens, None);
    assert_eq!(causes.price, None);
    assert_eq!(causes.unexplained, Some(-200));
    // A cost the ledger does not know has no drift at all.
    let mut unknown = ledger(1_500, 0, 1_500);
    unknown.unknown_cost_attempts = 1;
    assert_eq!(decompose(&unknown, &billed(Some(1_500), Some(1_500))).0, None);
}

fn time(end: &str) -> CellTime {
    let at = |t: &str| DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc);
    CellTime { end: at(end), partial: false, uncovered: false, settled_before: at("2025-08-03T00:00:00Z") }
}

#[test]
fn status_follows_coverage_settling_and_tolerance() {
    let t = time("2025-08-02T00:00:00Z");
    let tol = Tolerance::default();
    let both = ledger(2_000_000_000_000, 0, 2_000_000_000_000);
    let at = |cost: i128| status(t, &both, &billed(Some(cost), None), Some(2_000_000_000_000 - cost), tol);
    // $2 against $1.985: within 1 % of $1.985, not of $0.01 alone.
    assert_eq!(at(1_985_000_000_000), Status::Matched);
    assert_eq!(at(1_900_000_000_000), Status::LedgerHigh);
    assert_eq!(at(2_100_000_000_000), Status::LedgerLow);
    assert_eq!(
        status(CellTime { partial: true, ..t }, &both, &billed(Some(0), None), Some(0), tol),
        Status::Partial
    );
    assert_eq!(
        status(time("2025-08-04T00:00:00Z"), &both, &billed(Some(0), None), Some(0), tol),
        Status::Unsettled
    );
    let nothing = BilledSide { cost_pusd: Some(0), tokens_priced_pusd: Some(0), ..BilledSide::default() };
    assert_eq!(status(t, &both, &nothing, Some(2_000_000_000_000), tol), Status::LedgerOnly);
    assert_eq!(
        status(t, &LedgerSide::default(), &billed(Some(5), None), Some(-5), tol),
        Status::ProviderOnly
    );
    assert_eq!(status(t, &both, &billed(None, Some(1)), None, tol), Status::UsageOnly);
}

#[test]
fn hidden_requests_are_requests_beyond_billable_attempts() {
    let l = ledger(0, 0, 0);
    let with = |requests| BilledSide { requests, ..BilledSide::default() };
    assert_eq!(hidden_requests(&l, &with(Some(5))), Some(3));
    assert_eq!(hidden_requests(&l, &with(Some(1))), Some(0));
    assert_eq!(hidden_requests(&l, &with(None)), None);
}

fn money() -> impl Strategy<Value = i128> {
    -(1i128 << 80)..(1i128 << 80)
}

proptest! {
    #[test]
    fn causes_always_sum_to_the_drift(
        cost in money(), unbilled in money(), repriced in money(),
        provider in proptest::option::of(money()), priced in proptest::option::of(money()),
        unknown in 0i64..2, unrepriced in 0i64..2,
    ) {
        let mut l = ledger(cost, unbilled, repriced);
        l.unknown_cost_attempts = unknown;
        l.unrepriced_attempts = unrepriced;
        let (drift, causes) = decompose(&l, &billed(provider, priced));
        match drift {
            Some(drift) => {
                let terms = [causes.unbilled_failures, causes.emitter_cost, causes.tokens, causes.price, causes.unexplained];
                prop_assert_eq!(terms.iter().flatten().sum::<i128>(), drift);
                prop_assert_eq!(drift, cost - provider.unwrap());
                if unrepriced == 0 && priced.is_some() {
                    prop_assert_eq!(causes.unexplained, Some(0));
                }
            }
            None => prop_assert!(unknown > 0 || provider.is_none()),
        }
    }
}

#[test]
fn a_question_is_checked_once_for_flags_and_parameters() {
    let now = DateTime::parse_from_rfc3339("2025-08-10T12:00:00Z").unwrap().with_timezone(&Utc);
    let ask = |pairs: &[(&'static str, &str)]| {
        let params: Vec<(&'static str, String)> = pairs.iter().map(|(k, v)| (*k, v.to_string())).collect();
        Question::from_params(params.as_slice(), now)
    };
    let q = ask(&[]).unwrap();
    assert_eq!((q.until, q.until - q.since, q.grain), (now, chrono::Duration::days(7), Grain::Day));
    assert_eq!(q.tolerance, Tolerance::default());
    assert_eq!(q.settled_before, now - chrono::Duration::hours(24));
    let q =
        ask(&[("tolerance_usd", "0.5"), ("tolerance_pct", "2.5"), ("grain", "hour"), ("settle_hours", "0")])
            .unwrap();
    assert_eq!(q.tolerance, Tolerance { pusd: 500_000_000_000, basis_points: 250 });
    assert_eq!((q.grain, q.settled_before), (Grain::Hour, now));
    for (pairs, error) in [
        (vec![("tolerance_pct", "101")], "tolerance_pct: `101` is not between 0 and 100"),
        (vec![("tolerance_pct", "1.005")], "tolerance_pct: `1.005` has more than 2 decimals"),
        (vec![("tolerance_usd", "-1")], "tolerance_usd: `-1` is not between 0 and 1000000"),
        (vec![("grain", "week")], "grain: `week` is not day or hour"),
        (vec![("settle_hours", "745")], "settle_hours: `745` is not a whole number of hours from 0 to 744"),
        (vec![("since", "2025-08-11")], "since: must be before until"),
        (vec![("since", "2020-01-01")], "since: at most 366 days before until"),
        (vec![("until", "soon")], "until: `soon` is not a time"),
    ] {
        let err = ask(&pairs).unwrap_err().0;
        assert!(err.starts_with(error), "{err}");
    }
}

#[test]
fn cells_are_whole_utc_days_or_hours() {
    let at = |t: &str| DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc);
    assert_eq!(Grain::Day.floor(at("2025-08-01T10:37:00Z")), at("2025-08-01T00:00:00Z"));
    assert_eq!(Grain::Day.ceil(at("2025-08-01T10:37:00Z")), at("2025-08-02T00:00:00Z"));
    assert_eq!(Grain::Day.ceil(at("2025-08-01T00:00:00Z")), at("2025-08-01T00:00:00Z"));
    assert_eq!(Grain::Hour.floor(at("2025-08-01T10:37:00Z")), at("2025-08-01T10:00:00Z"));
    assert_eq!(Grain::Hour.floor(at("1969-12-31T23:30:00Z")), at("1969-12-31T23:00:00Z"));
}
