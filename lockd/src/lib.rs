//! lockd
