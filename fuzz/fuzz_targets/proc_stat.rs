//! `/proc/stat`: the aggregate `cpu` line the benches read for steal and idle time.
#![no_main]
use osutil::procstat::CpuTimes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = CpuTimes::parse(&String::from_utf8_lossy(data));
});
