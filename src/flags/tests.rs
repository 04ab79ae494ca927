//! The invariants of the flag table.
