//! `/proc/stat`: the aggregate `cpu` line the benches read for steal and idle time.
#![no_main]
use libfuzzer_sys::fuzz_target;
use osutil::procstat::CpuTimes;

fuzz_target!(|data: &[u8]| {
    let _ = CpuTimes::parse(&String::from_utf8_lossy(data));
});
