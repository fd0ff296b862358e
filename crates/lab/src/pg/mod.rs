//! `bench pg`: its options, its run over the builds x shared_buffers x huge_pages x clients matrix, the
//! huge-page side of a cell and the builds axis.

pub mod builds;
pub(crate) mod huge;
pub mod options;
pub mod run;
