//! A set whose keys come in ascending order and leave in any: what a reader keeps of the ops
//! still waiting on something, read in invoke order (a history's time never goes back) and
//! answered in any order. An ordered tree cost an insert and a remove of a node per op on the
//! reader's thread; here a key goes on the back of a queue, one that leaves is marked, and the
//! marked ones go once they reach the front.

use std::collections::VecDeque;

/// The keys kept, each with a value, ascending. The front is always a key still in the set;
/// the keys that left behind it are let go once they outnumber those in the set (a key that
/// never leaves, such as an acquire never answered, must not make the queue grow with the
/// history), so the queue holds at most about twice the set.
#[derive(Debug)]
pub(crate) struct AscendingQueue<K, V> {
    /// (key, value, still in the set), ascending by key.
    queue: VecDeque<(K, V, bool)>,
    /// How many keys are in the set.
    len: usize,
}

/// Keys that left, past which the queue is compacted whatever the set's size.
const LEFT_KEPT_MIN: usize = 64;

impl<K, V> Default for AscendingQueue<K, V> {
    fn default() -> Self {
        AscendingQueue {
            queue: VecDeque::new(),
            len: 0,
        }
    }
}

impl<K: Ord + Copy, V: Copy> AscendingQueue<K, V> {
    /// Adds `key`, above every key added before.
    pub(crate) fn push(&mut self, key: K, value: V) {
        debug_assert!(
            (self.queue.back()).is_none_or(|&(k, _, _)| k < key),
            "keys come in ascending order"
        );
        self.queue.push_back((key, value, true));
        self.len += 1;
    }

    /// Takes `key` out, with its value, if it is in the set.
    pub(crate) fn remove(&mut self, key: K) -> Option<V> {
        let i = self.queue.binary_search_by(|e| e.0.cmp(&key)).ok()?;
        let entry = &mut self.queue[i];
        if !entry.2 {
            return None;
        }
        entry.2 = false;
        let value = entry.1;
        self.len -= 1;
        self.drop_left();
        Some(value)
    }

    /// The least key and its value.
    pub(crate) fn first(&self) -> Option<(K, V)> {
        self.queue.front().map(|&(k, v, _)| (k, v))
    }

    /// Takes the least key out, with its value.
    pub(crate) fn pop_first(&mut self) -> Option<(K, V)> {
        let (k, v, _) = self.queue.pop_front()?;
        self.len -= 1;
        self.drop_left();
        Some((k, v))
    }

    /// The keys in the set and their values, ascending.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (K, V)> + '_ {
        (self.queue.iter()).filter(|e| e.2).map(|&(k, v, _)| (k, v))
    }

    pub(crate) fn clear(&mut self) {
        self.queue.clear();
        self.len = 0;
    }

    /// Lets go of the keys that left, up to the first one still in, and of all of them once
    /// they outnumber the keys still in: after a key leaves, by either way out.
    fn drop_left(&mut self) {
        // Bounded by the queue.
        while self.queue.front().is_some_and(|e| !e.2) {
            self.queue.pop_front();
        }
        if self.queue.len() > 2 * self.len + LEFT_KEPT_MIN {
            // Each key that left is moved at most once per as many keys leaving: amortized, a
            // constant per key.
            self.queue.retain(|e| e.2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::AscendingQueue;
    use proptest::prelude::*;

    /// The first key never leaves (an acquire never answered), and a hundred thousand after it
    /// come and go, each leaving after the next came: the queue stays small.
    #[test]
    fn a_key_that_never_leaves_keeps_the_queue_small() {
        let mut queue = AscendingQueue::default();
        queue.push(0u64, ());
        let mut most = 0;
        for k in 1..100_000u64 {
            queue.push(k, ());
            if k > 1 {
                assert_eq!(queue.remove(k - 1), Some(()));
            }
            most = most.max(queue.queue.len());
        }
        assert_eq!(queue.first(), Some((0, ())));
        assert_eq!(queue.iter().count(), 2, "the first key and the last");
        assert!(
            most <= 2 * 2 + super::LEFT_KEPT_MIN + 1,
            "kept {most} entries"
        );
    }

    /// Keys added in ascending order (with gaps) and taken out in any order, the least or any
    /// other, some twice, some never: at every step the queue answers what an ordered map
    /// answers, and keeps at most about twice as many entries as the map.
    #[test]
    fn the_queue_is_an_ordered_map() {
        let step = prop_oneof![
            (1..4u64).prop_map(|g| (0u8, g as usize)),
            (0..64usize).prop_map(|k| (1u8, k)),
            Just((2u8, 0usize)),
        ];
        proptest!(|(steps in proptest::collection::vec(step, 1..200))| {
            let mut queue = AscendingQueue::default();
            let mut map = std::collections::BTreeMap::new();
            let (mut added, mut key) = (Vec::new(), 0u64);
            for (what, n) in steps {
                match what {
                    0 => {
                        key += n as u64;
                        queue.push(key, key * 10);
                        map.insert(key, key * 10);
                        added.push(key);
                    }
                    1 if !added.is_empty() => {
                        let k = added[n % added.len()];
                        prop_assert_eq!(queue.remove(k), map.remove(&k));
                    }
                    2 => prop_assert_eq!(queue.pop_first(), map.pop_first()),
                    _ => {}
                }
                prop_assert_eq!(queue.first(), map.first_key_value().map(|(&k, &v)| (k, v)));
                let listed: Vec<(u64, u64)> = map.iter().map(|(&k, &v)| (k, v)).collect();
                prop_assert_eq!(queue.iter().collect::<Vec<_>>(), listed);
                prop_assert!(queue.queue.len() <= 2 * map.len() + super::LEFT_KEPT_MIN);
            }
        });
    }
}
