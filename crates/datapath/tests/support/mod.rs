//! Shared pieces of the datapath integration tests.

pub mod reference;
