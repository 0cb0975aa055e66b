//! Nearest-rank quantiles of multisets that share most of their values: a
//! replay's times to outcome before and after are those of every workflow,
//! all but the changed ones' the same on both sides. A histogram of the
//! leading bits of each value finds the bucket holding each rank, and only
//! that bucket's values are selected from: linear, and the shared values
//! are neither copied nor reordered.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Quantiles {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

/// Leading bits of the order key a value is bucketed by.
const BUCKET_BITS: u32 = 16;

/// A u64 in `f64::total_cmp`'s order.
fn order_key(value: f64) -> u64 {
    let bits = value.to_bits();
    if bits >> 63 == 1 { !bits } else { bits | (1 << 63) }
}

fn bucket(value: f64) -> usize {
    (order_key(value) >> (64 - BUCKET_BITS)) as usize
}

/// p50 and p99 (nearest rank: the smallest value with at least that share
/// of all at or below it) of `shared` with each of `sides` added. `shared`
/// holds each value with how many times it occurs (the store counts equal
/// times rather than sending each one).
pub fn beside<const N: usize>(shared: &[(f64, u64)], sides: [&[f64]; N]) -> [Quantiles; N] {
    let mut counts = vec![0u64; 1 << BUCKET_BITS];
    let mut shared_total = 0u64;
    for &(value, times) in shared {
        counts[bucket(value)] += times;
        shared_total += times;
    }
    // Each side's (bucket, rank within it, from 1) of its p50 and p99.
    let targets: [[Option<(usize, u64)>; 2]; N] = sides.map(|side| {
        let mut side_counts = counts.clone();
        for value in side {
            side_counts[bucket(*value)] += 1;
        }
        let total = shared_total + side.len() as u64;
        [0.5, 0.99].map(|p| {
            let rank = ((p * total as f64).ceil() as u64).max(1);
            (rank <= total).then(|| {
                let mut below = 0u64;
                let mut found = (0, 0);
                for (b, n) in side_counts.iter().enumerate() {
                    if below + *n >= rank {
                        found = (b, rank - below);
                        break;
                    }
                    below += *n;
                }
                found
            })
        })
    });
    // The shared values of every target bucket, gathered in one pass.
    let mut wanted: Vec<usize> = targets.iter().flatten().flatten().map(|(b, _)| *b).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut gathered: Vec<Vec<(f64, u64)>> = vec![Vec::new(); wanted.len()];
    for &(value, times) in shared {
        if let Ok(i) = wanted.binary_search(&bucket(value)) {
            gathered[i].push((value, times));
        }
    }
    std::array::from_fn(|s| {
        let [p50, p99] = targets[s].map(|target| {
            target.and_then(|(b, rank)| {
                let i = wanted.binary_search(&b).ok()?;
                let mut values = gathered[i].clone();
                values.extend(sides[s].iter().filter(|v| bucket(**v) == b).map(|v| (*v, 1)));
                values.sort_unstable_by(|x, y| x.0.total_cmp(&y.0));
                let mut below = 0u64;
                values.into_iter().find_map(|(value, times)| {
                    below += times;
                    (below >= rank).then_some(value)
                })
            })
        });
        Quantiles { p50, p99 }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The quantiles by a full sort of everything, for comparison.
    fn sorted(values: &[f64]) -> Quantiles {
        let mut all = values.to_vec();
        all.sort_by(f64::total_cmp);
        let at = |p: f64| {
            let rank = ((p * all.len() as f64).ceil() as usize).max(1);
            all.get(rank - 1).copied()
        };
        Quantiles { p50: at(0.5), p99: at(0.99) }
    }

    #[test]
    fn nearest_rank() {
        let values: Vec<(f64, u64)> = (1..=200).rev().map(|v| (f64::from(v), 1)).collect();
        assert_eq!(beside(&values, [&[]]), [Quantiles { p50: Some(100.0), p99: Some(198.0) }]);
        assert_eq!(beside(&[], [&[]]), [Quantiles { p50: None, p99: None }]);
        assert_eq!(beside(&[(7.0, 1)], [&[]]), [Quantiles { p50: Some(7.0), p99: Some(7.0) }]);
        assert_eq!(beside(&[], [&[7.0]]), [Quantiles { p50: Some(7.0), p99: Some(7.0) }]);
        // 99 workflows at 1 ms and one at 5 ms, counted: p99 is still 1 ms.
        assert_eq!(beside(&[(5.0, 1), (1.0, 99)], [&[]]), [Quantiles { p50: Some(1.0), p99: Some(1.0) }]);
        assert_eq!(beside(&[(5.0, 2), (1.0, 98)], [&[]]), [Quantiles { p50: Some(1.0), p99: Some(5.0) }]);
    }

    proptest! {
        #[test]
        fn each_side_is_its_values_sorted(
            shared in prop::collection::vec((prop_oneof![-1e6f64..1e9, Just(0.0), Just(2068.0)], 1u64..5), 0..400),
            before in prop::collection::vec(0f64..1e7, 0..100),
            after in prop::collection::vec(prop_oneof![0f64..1e7, Just(2068.0)], 0..100),
        ) {
            let [b, a] = beside(&shared, [&before, &after]);
            let expanded: Vec<f64> =
                shared.iter().flat_map(|&(value, times)| std::iter::repeat_n(value, times as usize)).collect();
            let with = |side: &[f64]| [expanded.as_slice(), side].concat();
            prop_assert_eq!(b, sorted(&with(&before)));
            prop_assert_eq!(a, sorted(&with(&after)));
        }
    }
}
