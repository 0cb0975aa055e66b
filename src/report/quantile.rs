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
/// of all at or below it) of `shared` with each of `sides` added.
pub fn beside<const N: usize>(shared: &[f64], sides: [&[f64]; N]) -> [Quantiles; N] {
    let mut counts = vec![0u64; 1 << BUCKET_BITS];
    for value in shared {
        counts[bucket(*value)] += 1;
    }
    // Each side's (bucket, rank within it) of its p50 and p99.
    let targets: [[Option<(usize, usize)>; 2]; N] = sides.map(|side| {
        let mut side_counts = counts.clone();
        for value in side {
            side_counts[bucket(*value)] += 1;
        }
        let total = shared.len() + side.len();
        [0.5, 0.99].map(|p| {
            let rank = ((p * total as f64).ceil() as usize).max(1);
            (rank <= total).then(|| {
                let mut below = 0usize;
                let mut found = (0, 0);
                for (b, n) in side_counts.iter().enumerate() {
                    if below + *n as usize >= rank {
                        found = (b, rank - below - 1);
                        break;
                    }
                    below += *n as usize;
                }
                found
            })
        })
    });
    // The shared values of every target bucket, gathered in one pass.
    let mut wanted: Vec<usize> = targets.iter().flatten().flatten().map(|(b, _)| *b).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut gathered: Vec<Vec<f64>> = vec![Vec::new(); wanted.len()];
    for value in shared {
        if let Ok(i) = wanted.binary_search(&bucket(*value)) {
            gathered[i].push(*value);
        }
    }
    std::array::from_fn(|s| {
        let [p50, p99] = targets[s].map(|target| {
            target.map(|(b, within)| {
                let i = wanted.binary_search(&b).unwrap_or(0);
                let mut values = gathered[i].clone();
                values.extend(sides[s].iter().filter(|v| bucket(**v) == b));
                *values.select_nth_unstable_by(within, f64::total_cmp).1
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
        let values: Vec<f64> = (1..=200).rev().map(f64::from).collect();
        assert_eq!(beside(&values, [&[]]), [Quantiles { p50: Some(100.0), p99: Some(198.0) }]);
        assert_eq!(beside(&[], [&[]]), [Quantiles { p50: None, p99: None }]);
        assert_eq!(beside(&[7.0], [&[]]), [Quantiles { p50: Some(7.0), p99: Some(7.0) }]);
        assert_eq!(beside(&[], [&[7.0]]), [Quantiles { p50: Some(7.0), p99: Some(7.0) }]);
    }

    proptest! {
        #[test]
        fn each_side_is_its_values_sorted(
            shared in prop::collection::vec(prop_oneof![-1e6f64..1e9, Just(0.0), Just(2068.0)], 0..400),
            before in prop::collection::vec(0f64..1e7, 0..100),
            after in prop::collection::vec(prop_oneof![0f64..1e7, Just(2068.0)], 0..100),
        ) {
            let [b, a] = beside(&shared, [&before, &after]);
            let with = |side: &[f64]| [shared.as_slice(), side].concat();
            prop_assert_eq!(b, sorted(&with(&before)));
            prop_assert_eq!(a, sorted(&with(&after)));
        }
    }
}
