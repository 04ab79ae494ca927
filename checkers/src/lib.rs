//! checkers
