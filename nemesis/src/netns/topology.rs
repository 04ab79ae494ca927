//! Jepsen's partition topologies as lists of node pairs to cut.
//!
//! A pair `(a, b)` means "a and b cannot talk, in either direction"
//! ([`NetnsCluster::partition`](super::NetnsCluster::partition) drops b's packets inside a's
//! namespace and a's inside b's). Every function returns pairs with `a < b`, sorted, without
//! duplicates, over node indices `0..n`. They are pure: the seeded randomness comes in as an
//! `Rng`.

use rand::seq::SliceRandom;
use rand::Rng;

/// A set of symmetric cuts, normalised (`a < b`, sorted, no duplicates).
pub type Cut = Vec<(usize, usize)>;

fn normalise(mut pairs: Cut) -> Cut {
    for pair in pairs.iter_mut() {
        assert!(pair.0 != pair.1, "a node cannot be cut from itself");
        if pair.0 > pair.1 {
            *pair = (pair.1, pair.0);
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// Every pair with one side in `a` and the other in `b` (Jepsen's complete grudge).
fn across(a: &[usize], b: &[usize]) -> Cut {
    let pairs = a
        .iter()
        .flat_map(|&x| b.iter().map(move |&y| (x, y)))
        .collect();
    normalise(pairs)
}

/// `node` alone on one side, everybody else on the other (Jepsen's `isolate`/`split-one`).
pub fn isolate(n: usize, node: usize) -> Cut {
    assert!(node < n, "node {node} out of range for {n} nodes");
    let others: Vec<usize> = (0..n).filter(|&j| j != node).collect();
    across(&[node], &others)
}

/// A random split into two halves, the smaller first (Jepsen's `random-halves`: shuffle,
/// then bisect): with an odd `n` the minority has `n / 2` nodes. Same seed, same cut.
pub fn halves(n: usize, rng: &mut impl Rng) -> Cut {
    let mut nodes: Vec<usize> = (0..n).collect();
    nodes.shuffle(rng);
    let (minority, majority) = nodes.split_at(n / 2);
    across(minority, majority)
}

/// Every node sees a majority (itself included), and no two nodes see the same majority
/// (Jepsen's `majorities-ring`), on the ring `0, 1, ..., n-1`.
///
/// Jepsen's version is one-directional (a node may drop a peer that still hears it); ours
/// cuts symmetrically, so each node keeps the `k` nearest ring neighbours on each side, with
/// the smallest `k` for which `2k + 1` is a majority, and loses the rest. Three nodes cannot be
/// laid out that way; there the cut `(0, 1)` has the same property (0 sees {0, 2}, 1 sees
/// {1, 2}, 2 sees all). With fewer than three nodes no cut has it and the result is empty.
/// Relabel the nodes (shuffle) for a random ring.
pub fn majorities_ring(n: usize) -> Cut {
    if n < 3 {
        return Vec::new();
    }
    if n == 3 {
        return vec![(0, 1)];
    }
    let majority = n / 2 + 1;
    let k = majority / 2; // smallest k with 2k + 1 >= majority
    let mut pairs = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            let distance = (b - a).min(n - (b - a));
            if distance > k {
                pairs.push((a, b));
            }
        }
    }
    normalise(pairs)
}

/// Two halves that cannot talk, joined by one node that talks to both (Jepsen's `bridge`):
/// the first `n / 2` nodes, then the bridge node `n / 2`, then the rest.
pub fn bridge(n: usize) -> Cut {
    if n < 3 {
        return Vec::new();
    }
    let left: Vec<usize> = (0..n / 2).collect();
    let right: Vec<usize> = (n / 2 + 1..n).collect();
    across(&left, &right)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use std::collections::BTreeSet;

    /// Which nodes each node still reaches (itself included).
    fn views(n: usize, cut: &Cut) -> Vec<BTreeSet<usize>> {
        (0..n)
            .map(|a| {
                (0..n)
                    .filter(|&b| a == b || !cut.contains(&(a.min(b), a.max(b))))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn isolate_cuts_one_node_from_all() {
        assert_eq!(isolate(3, 0), vec![(0, 1), (0, 2)]);
        assert_eq!(isolate(5, 3), vec![(0, 3), (1, 3), (2, 3), (3, 4)]);
        assert_eq!(isolate(1, 0), vec![]);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn isolate_rejects_unknown_node() {
        isolate(3, 3);
    }

    #[test]
    fn halves_split_minority_from_majority() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for n in 2..=9 {
            let cut = halves(n, &mut rng);
            assert_eq!(cut.len(), (n / 2) * (n - n / 2), "n={n}");
            // Two components: the smaller one has n/2 nodes, the other the rest.
            let mut sizes: Vec<usize> = views(n, &cut)
                .into_iter()
                .collect::<BTreeSet<_>>()
                .iter()
                .map(|v| v.len())
                .collect();
            sizes.sort_unstable();
            assert_eq!(sizes, vec![n / 2, n - n / 2], "n={n}");
        }
    }

    #[test]
    fn seeded_halves_are_reproducible() {
        let run = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..20).map(|_| halves(5, &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        let distinct: BTreeSet<Cut> = run(42).into_iter().collect();
        assert!(distinct.len() > 1, "halves should vary between draws");
    }

    #[test]
    fn majorities_ring_views_are_distinct_majorities() {
        for n in 3..=11 {
            let cut = majorities_ring(n);
            assert!(!cut.is_empty(), "n={n}");
            let views = views(n, &cut);
            for (node, view) in views.iter().enumerate() {
                assert!(view.len() > n / 2, "n={n}: node {node} sees {view:?}");
            }
            let distinct: BTreeSet<_> = views.iter().collect();
            assert_eq!(distinct.len(), n, "n={n}: views {views:?}");
        }
        assert_eq!(
            majorities_ring(5),
            vec![(0, 2), (0, 3), (1, 3), (1, 4), (2, 4)]
        );
        assert_eq!(majorities_ring(4), vec![(0, 2), (1, 3)]);
        assert!(majorities_ring(2).is_empty());
    }

    #[test]
    fn bridge_keeps_one_node_connected_to_both_halves() {
        assert_eq!(bridge(5), vec![(0, 3), (0, 4), (1, 3), (1, 4)]);
        assert_eq!(bridge(3), vec![(0, 2)]);
        for n in 3..=9 {
            let views = views(n, &bridge(n));
            assert_eq!(views[n / 2].len(), n, "n={n}: the bridge sees everyone");
            for node in (0..n).filter(|&x| x != n / 2) {
                assert!(
                    views[node].len() < n,
                    "n={n}: node {node} must be cut off from some"
                );
            }
        }
        assert!(bridge(2).is_empty());
    }
}
