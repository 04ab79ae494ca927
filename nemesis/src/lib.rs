//! nemesis
