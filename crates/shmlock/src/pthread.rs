//! glibc's mutex with `PTHREAD_PROCESS_SHARED` (default type: no spinning, futex-based like
//! [`crate::futex_mutex`], shared futex ops because of the pshared attribute).

use std::cell::UnsafeCell;

use crate::{Acquired, InitError, RawLock};

/// A process-shared pthread mutex, padded to a cache line.
#[repr(C, align(64))]
pub struct PthreadMutex {
    m: UnsafeCell<libc::pthread_mutex_t>,
}

// SAFETY: pthread mutexes are designed for concurrent use; all access goes through pthread_mutex_* calls.
unsafe impl Sync for PthreadMutex {}

impl RawLock for PthreadMutex {
    type Waiter = ();

    unsafe fn init(ptr: *mut Self) -> Result<(), InitError> {
        let mut attr = std::mem::MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
        let failed = |call, code| Err(InitError { call, code });
        // SAFETY: attr is a valid out-pointer; ptr is valid and unshared per this function's contract.
        unsafe {
            let r = libc::pthread_mutexattr_init(attr.as_mut_ptr());
            if r != 0 {
                return failed("pthread_mutexattr_init", r);
            }
            let r =
                libc::pthread_mutexattr_setpshared(attr.as_mut_ptr(), libc::PTHREAD_PROCESS_SHARED);
            if r != 0 {
                libc::pthread_mutexattr_destroy(attr.as_mut_ptr());
                return failed("pthread_mutexattr_setpshared", r);
            }
            let r = libc::pthread_mutex_init((*ptr).m.get(), attr.as_ptr());
            libc::pthread_mutexattr_destroy(attr.as_mut_ptr());
            if r != 0 {
                return failed("pthread_mutex_init", r);
            }
        }
        Ok(())
    }

    fn waiter(&self, _id: u32) {}

    #[inline]
    fn lock(&self, _w: &mut ()) -> Acquired {
        // SAFETY: the mutex was initialized by init() before any waiter existed.
        let r = unsafe { libc::pthread_mutex_lock(self.m.get()) };
        assert_eq!(r, 0, "pthread_mutex_lock failed");
        Acquired::default()
    }

    #[inline]
    fn unlock(&self, _w: &mut ()) {
        // SAFETY: called by the holder of an initialized mutex.
        let r = unsafe { libc::pthread_mutex_unlock(self.m.get()) };
        debug_assert_eq!(r, 0);
    }
}
