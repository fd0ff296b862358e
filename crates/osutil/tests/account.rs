//! Acting as another account changes this whole process's effective IDs for a moment: alone in its own
//! test binary, so no other test runs meanwhile.

use osutil::account::{as_account, by_name, effective_uid};

#[test]
fn acting_as_an_account_gives_its_ids_and_takes_root_back() {
    let Some(nobody) = by_name("nobody") else {
        panic!("no 'nobody' account to act as");
    };
    if effective_uid() != 0 {
        assert!(as_account(&nobody, || ()).is_err(), "only root may");
        return;
    }
    // SAFETY: geteuid and getegid have no preconditions.
    let ids = as_account(&nobody, || unsafe { (libc::geteuid(), libc::getegid()) }).unwrap();
    assert_eq!(ids, (nobody.uid, nobody.gid));
    assert_eq!(effective_uid(), 0);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::getegid() }, 0);
    // A panic inside gives root back too.
    let r = std::panic::catch_unwind(|| as_account(&nobody, || panic!("inside")));
    assert!(r.is_err());
    assert_eq!(effective_uid(), 0);
}
