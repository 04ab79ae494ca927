//! A list addressed by absolute position of which only a window is kept: the ops a history's
//! reader has read and may still read again. The batch model keeps them all (the window starts
//! at 0 and never moves); a streaming reader drops the front once nothing can read it again.

use std::collections::VecDeque;
use std::ops::{Index, IndexMut};

/// Items at positions `[base, base + len)`; those before `base` were dropped.
#[derive(Debug)]
pub(crate) struct Window<T> {
    base: usize,
    items: VecDeque<T>,
}

impl<T> Window<T> {
    pub(crate) fn with_capacity(capacity: usize) -> Window<T> {
        Window {
            base: 0,
            items: VecDeque::with_capacity(capacity),
        }
    }

    /// One past the last position: how many items were ever pushed.
    pub(crate) fn len(&self) -> usize {
        self.base + self.items.len()
    }

    /// The first position still kept.
    pub(crate) fn base(&self) -> usize {
        self.base
    }

    pub(crate) fn push(&mut self, item: T) {
        self.items.push_back(item);
    }

    pub(crate) fn get(&self, pos: usize) -> Option<&T> {
        pos.checked_sub(self.base).and_then(|i| self.items.get(i))
    }

    /// Drops every item before `pos`.
    pub(crate) fn drop_before(&mut self, pos: usize) {
        let n = pos.saturating_sub(self.base).min(self.items.len());
        self.items.drain(..n);
        self.base += n;
    }

    /// The items kept, in position order.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.items.iter_mut()
    }

    /// The items kept, in position order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    /// The position of the first item kept for which `f` is false, items kept being those
    /// for which it is true first (as `slice::partition_point`).
    pub(crate) fn partition_point(&self, f: impl FnMut(&T) -> bool) -> usize {
        self.base + self.items.partition_point(f)
    }

    /// Every item, for the batch model: the window never moved.
    pub(crate) fn into_vec(self) -> Vec<T> {
        assert_eq!(self.base, 0, "the batch model reads every op");
        self.items.into()
    }
}

impl<T> From<Vec<T>> for Window<T> {
    fn from(items: Vec<T>) -> Window<T> {
        Window {
            base: 0,
            items: items.into(),
        }
    }
}

impl<T> Index<usize> for Window<T> {
    type Output = T;
    fn index(&self, pos: usize) -> &T {
        &self.items[pos - self.base]
    }
}

impl<T> IndexMut<usize> for Window<T> {
    fn index_mut(&mut self, pos: usize) -> &mut T {
        &mut self.items[pos - self.base]
    }
}

#[cfg(test)]
mod tests {
    use super::Window;

    #[test]
    fn positions_outlive_the_front_dropped() {
        let mut w = Window::with_capacity(4);
        for i in 0..10u32 {
            w.push(i);
        }
        w.drop_before(6);
        assert_eq!((w.base(), w.len()), (6, 10));
        assert_eq!((w[6], w[9]), (6, 9));
        assert_eq!(w.get(5), None);
        w[7] = 70;
        assert_eq!(w.get(7), Some(&70));
        // Dropping past the end keeps the count of positions.
        w.drop_before(20);
        assert_eq!((w.base(), w.len()), (10, 10));
        w.push(10);
        assert_eq!(w[10], 10);
    }
}
