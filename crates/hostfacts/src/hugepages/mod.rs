//! Huge pages, one folder: a pool's sysfs files read and resized (`sysfs`), an instance's or a size's need
//! (`sizing`), the pool a host needs, one figure per page size (`target`), and the record of the pages
//! preemptlab's own runs added to a pool (`record`).

pub mod record;
pub mod sizing;
pub mod sysfs;
pub mod target;
