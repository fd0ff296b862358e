//! `check`: its plan and reproduction, the other load it sees first, and its judgement.

pub mod judge;
pub mod load;
pub mod plan;
