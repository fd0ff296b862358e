//! What a sample was doing, from its symbolized frames. Pure: names in, categories out.
//!
//! Samples are attributed by their user leaf (the sampled instruction), which is right whatever the build;
//! the callers above it come from the kernel's frame-pointer walk, which only a build that keeps frame
//! pointers makes right (`crate::binary`), so they name a spinlock sample's callers and nothing is
//! classified by them. Kernel chains are unwound by the kernel (ORC on x86_64) and are whole, which is what
//! the page-fault and switch classifications below rely on.
//!
//! The frame names follow Linux 6.x/7.x (arch/x86/mm/fault.c, mm/memory.c, kernel/sched/core.c,
//! kernel/entry/common.c) and PostgreSQL's src/backend/storage/lmgr/{s_lock.c,lwlock.c}.

/// What an on-CPU sample was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// PostgreSQL's spinlock slow path: `s_lock` (entered only when the inline test-and-set failed),
    /// `perform_spin_delay`, `finish_spin_delay`.
    Spinlock,
    /// An LWLock function (`LWLockAcquire`, `LWLockAttemptLock`, `LWLockWaitListLock`, ...).
    Lwlock,
    /// The kernel's page-fault path.
    PageFault,
    /// The kernel's scheduler.
    Scheduler,
    /// Elsewhere in the kernel.
    KernelOther,
    /// Elsewhere in user space.
    UserOther,
}

impl Category {
    /// The name used in result files.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Spinlock => "spinlock",
            Category::Lwlock => "lwlock",
            Category::PageFault => "page_fault",
            Category::Scheduler => "scheduler",
            Category::KernelOther => "kernel_other",
            Category::UserOther => "user_other",
        }
    }
}

/// PostgreSQL's spinlock slow path (s_lock.c). The fast path is an inline TAS in the caller and is never
/// seen; `s_lock` runs only for a contended acquisition.
const SPIN: [&str; 4] = [
    "s_lock",
    "perform_spin_delay",
    "finish_spin_delay",
    "s_lock_stuck",
];

/// The category of a sample whose leaf is in user space, by the leaf function's name.
pub fn user_category(leaf: &str) -> Category {
    if SPIN.contains(&leaf) {
        Category::Spinlock
    } else if leaf.starts_with("LWLock") {
        Category::Lwlock
    } else {
        Category::UserOther
    }
}

/// Frames of the page-fault path: x86_64's entry and handler, arm64's and the generic ones.
///
/// arm64 (arch/arm64/kernel/entry-common.c, arch/arm64/mm/fault.c; chains recorded in a 7.2 guest,
/// `fixtures/arm64-7.2-chains.txt`): a fault from user space enters through `el0t_64_sync` ->
/// `el0t_64_sync_handler` -> `el0_da` (data abort) or `el0_ia` (instruction abort), which calls
/// `do_mem_abort` (the fault-status table's handler: `do_translation_fault` -> `do_page_fault` for a missing
/// page, `do_page_fault` itself for a permission fault) and then `arm64_exit_to_user_mode`, inlined, whose
/// `exit_to_user_mode_loop` schedules. So `el0_da`/`el0_ia` stay on the stack on the way out, as x86's
/// `asm_exc_page_fault` does: a switch there is one after a fault.
const FAULT: [&str; 10] = [
    "asm_exc_page_fault",
    "exc_page_fault",
    "do_user_addr_fault",
    "handle_mm_fault",
    "__handle_mm_fault",
    "do_page_fault",
    "do_mem_abort",
    "do_translation_fault",
    "el0_da",
    "el0_ia",
];

/// Frames below which the fault is being handled (not merely returning): the mm part of the path, and
/// arm64's `do_mem_abort`, which `el0_da`/`el0_ia` call before, not during, the return to user space.
const FAULT_HANDLING: [&str; 6] = [
    "do_user_addr_fault",
    "handle_mm_fault",
    "__handle_mm_fault",
    "do_page_fault",
    "do_translation_fault",
    "do_mem_abort",
];

/// The main functions of PostgreSQL's processes (PostgreSQL 13-18, `src/backend/`), most specific first: a
/// walsender runs `PostgresMain` too, a parallel worker is a background worker. Each is exported (named in a
/// stripped build's `.dynsym`) or backed by an exported caller: `AutoVacWorkerMain` is static before 17
/// (`NON_EXEC_STATIC`) and called by `StartAutoVacWorker`; a client backend's stack holds `PostgresMain`
/// once it is past authentication (before, only the postmaster's own frames, which every child has).
const STACK_KINDS: [(&str, &str); 8] = [
    ("ParallelWorkerMain", "parallel worker"),
    ("exec_replication_command", "walsender"),
    ("AutoVacWorkerMain", "autovacuum worker"),
    ("StartAutoVacWorker", "autovacuum worker"),
    ("AutoVacLauncherMain", "autovacuum launcher"),
    ("StartBackgroundWorker", "background worker"),
    ("BackgroundWorkerMain", "background worker"),
    ("PostgresMain", "client backend"),
];

/// The kind of a PostgreSQL process from the function names of one of its user call stacks (any order),
/// for a process that exited before its title could be read; None when no main function is on it. Only
/// a build that keeps frame pointers gives whole stacks.
pub fn kind_from_stack(names: &[&str]) -> Option<&'static str> {
    STACK_KINDS
        .iter()
        .find(|(f, _)| names.contains(f))
        .map(|(_, kind)| *kind)
}

/// True when a kernel chain has the page-fault path on it.
pub fn has_fault(chain: &[&str]) -> bool {
    chain.iter().any(|f| FAULT.contains(f))
}

/// True when the fault is being handled at this point (not returning from it).
pub fn handling_fault(chain: &[&str]) -> bool {
    chain.iter().any(|f| FAULT_HANDLING.contains(f))
}

fn is_sched(f: &str) -> bool {
    f == "__schedule"
        || f == "schedule"
        || f.starts_with("finish_task_switch")
        || f.starts_with("__switch_to")
        || f.starts_with("pick_next_task")
        || f.starts_with("preempt_schedule")
        || f == "context_switch"
}

/// The category of a sample taken in the kernel, by its kernel chain (leaf first).
pub fn kernel_category(chain: &[&str]) -> Category {
    if chain.first().is_some_and(|f| is_sched(f)) || chain.contains(&"__schedule") {
        Category::Scheduler
    } else if has_fault(chain) {
        Category::PageFault
    } else {
        Category::KernelOther
    }
}

/// True when a kernel sample is really an interrupted user instruction: the sample landed on the way back
/// to user space from an interrupt (its leaf is the exit path, with no system call or fault below). The
/// timer behind `cpu-clock` cannot fire while interrupts are off, so its samples pile up where the exit
/// path turns them back on, in time that belongs to the user code the interrupt stopped; such a sample is
/// attributed to the user leaf.
pub fn interrupted_user(chain: &[&str]) -> bool {
    chain.first().is_some_and(|leaf| {
        RETURN_TO_USER
            .iter()
            .any(|r| leaf == r || (leaf.starts_with(r) && leaf[r.len()..].starts_with('.')))
    }) && !has_fault(chain)
        && !chain.iter().any(|f| f.contains("syscall"))
}

/// How a runnable task came to be switched out, from the kernel chain of its `sched_switch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchKind {
    /// Preempted inside the kernel: on the return from an interrupt taken in kernel mode
    /// (`preempt_schedule_irq`, called by `irqentry_exit` when the interrupted code had preemption
    /// enabled) or when preemption was re-enabled (`preempt_schedule`, `preempt_schedule_notrace`). Only
    /// `full`, `lazy` (once the tick upgraded the lazy request) and `rt` do this; under `none` and
    /// `voluntary` these calls are patched out (PREEMPT_DYNAMIC) or not built.
    KernelPreemption,
    /// At a voluntary point: `__cond_resched` (`cond_resched()`), live under `none` and `voluntary`, a
    /// no-op under `full` and `lazy`. It calls `preempt_schedule_common`, which is why that name does not
    /// count as kernel preemption.
    Voluntary,
    /// On the way back to user space (`exit_to_user_mode_loop`), in every model: a pending reschedule
    /// is honoured there, including after a page fault.
    ReturnToUser,
    /// None of the above (`sched_yield`, `schedule()` with the task still runnable, an unwinder cut short).
    Other,
}

const KERNEL_PREEMPTION: [&str; 4] = [
    "preempt_schedule_irq",
    "preempt_schedule",
    "preempt_schedule_notrace",
    "preempt_schedule_thunk",
];

const VOLUNTARY: [&str; 3] = ["__cond_resched", "_cond_resched", "cond_resched"];

const RETURN_TO_USER: [&str; 5] = [
    "exit_to_user_mode_loop",
    "exit_to_user_mode_prepare",
    "irqentry_exit_to_user_mode",
    "syscall_exit_to_user_mode",
    "exit_to_user_mode",
];

/// Classifies a runnable switch by its kernel chain (leaf first).
pub fn switch_kind(chain: &[&str]) -> SwitchKind {
    let any = |set: &[&str]| {
        chain.iter().any(|f| {
            set.contains(f)
                || set
                    .iter()
                    .any(|s| f.starts_with(s) && f[s.len()..].starts_with('.'))
        })
    };
    if any(&KERNEL_PREEMPTION) {
        SwitchKind::KernelPreemption
    } else if any(&VOLUNTARY) {
        SwitchKind::Voluntary
    } else if any(&RETURN_TO_USER) {
        SwitchKind::ReturnToUser
    } else {
        SwitchKind::Other
    }
}

/// True when a `sched_switch` prev_state means the task was still runnable: no state bit of the
/// reported states (TASK_REPORT, 0xff: S D T t X Z P I) is set. R+ (the TASK_REPORT_MAX bit, 0x100 on
/// 6.x/7.x) marks a preemption (`__schedule(SM_PREEMPT)`): `preempt_schedule*` and `__cond_resched`
/// alike, so the chain, not the `+`, tells them apart.
pub fn runnable(prev_state: i64) -> bool {
    prev_state & 0xff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_leaves() {
        assert_eq!(user_category("s_lock"), Category::Spinlock);
        assert_eq!(user_category("perform_spin_delay"), Category::Spinlock);
        assert_eq!(user_category("LWLockAttemptLock"), Category::Lwlock);
        assert_eq!(user_category("StrategyGetBuffer"), Category::UserOther);
    }

    #[test]
    fn kernel_chains() {
        let fault = [
            "clear_page_erms",
            "shmem_get_folio_gfp",
            "shmem_fault",
            "__do_fault",
            "__handle_mm_fault",
            "handle_mm_fault",
            "do_user_addr_fault",
            "exc_page_fault",
            "asm_exc_page_fault",
        ];
        assert_eq!(kernel_category(&fault), Category::PageFault);
        assert_eq!(
            kernel_category(&["finish_task_switch.isra.0", "__schedule", "schedule"]),
            Category::Scheduler
        );
        assert_eq!(
            kernel_category(&["_raw_spin_unlock_irqrestore", "__x64_sys_futex"]),
            Category::KernelOther
        );
        // Seen in a `full` guest: the sample lands where preempt_schedule_irq turns interrupts back on,
        // inside a fault; it is the scheduler's time, not the fault's.
        assert_eq!(
            kernel_category(&[
                "preempt_schedule_irq",
                "irqentry_exit",
                "clear_page_erms",
                "handle_mm_fault"
            ]),
            Category::Scheduler
        );
    }

    #[test]
    fn interrupt_exits_belong_to_user_space() {
        assert!(interrupted_user(&[
            "irqentry_exit_to_user_mode",
            "asm_sysvec_apic_timer_interrupt"
        ]));
        assert!(!interrupted_user(&[
            "irqentry_exit_to_user_mode",
            "exc_page_fault",
            "asm_exc_page_fault"
        ]));
        assert!(!interrupted_user(&[
            "syscall_exit_to_user_mode",
            "do_syscall_64"
        ]));
        assert!(!interrupted_user(&["read_zero", "vfs_read"]));
    }

    /// Stacks as PostgreSQL 15 and 17 build them (main at the bottom, the leaf first).
    #[test]
    fn kinds_from_stacks() {
        let backend = [
            "hash_search_with_hash_value",
            "exec_simple_query",
            "PostgresMain",
            "ServerLoop",
            "PostmasterMain",
            "main",
        ];
        assert_eq!(kind_from_stack(&backend), Some("client backend"));
        let walsender = ["WalSndLoop", "exec_replication_command", "PostgresMain"];
        assert_eq!(kind_from_stack(&walsender), Some("walsender"));
        let av15 = [
            "heap_vacuum_rel",
            "postgres:?",
            "StartAutoVacWorker",
            "ServerLoop",
        ];
        assert_eq!(kind_from_stack(&av15), Some("autovacuum worker"));
        let parallel = [
            "ExecParallelHashJoin",
            "ParallelWorkerMain",
            "BackgroundWorkerMain",
            "postmaster_child_launch",
        ];
        assert_eq!(kind_from_stack(&parallel), Some("parallel worker"));
        // Authenticating: only the postmaster's frames, which every child inherits.
        let auth = [
            "ClientAuthentication",
            "postgres:?",
            "ServerLoop",
            "PostmasterMain",
        ];
        assert_eq!(kind_from_stack(&auth), None);
        assert_eq!(kind_from_stack(&[]), None);
    }

    #[test]
    fn switch_kinds() {
        // Timer interrupt inside a fault under full/lazy.
        let irq = [
            "__schedule",
            "preempt_schedule_irq",
            "irqentry_exit",
            "asm_sysvec_apic_timer_interrupt",
            "clear_page_erms",
            "handle_mm_fault",
            "do_user_addr_fault",
            "exc_page_fault",
        ];
        assert_eq!(switch_kind(&irq), SwitchKind::KernelPreemption);
        assert!(has_fault(&irq) && handling_fault(&irq));
        // cond_resched inside a huge page's zeroing.
        let cond = [
            "__schedule",
            "preempt_schedule_common",
            "__cond_resched",
            "folio_zero_user",
            "hugetlb_no_page",
            "handle_mm_fault",
        ];
        assert_eq!(switch_kind(&cond), SwitchKind::Voluntary);
        // After the fault, on the way out.
        let ret = [
            "__schedule",
            "schedule",
            "exit_to_user_mode_loop",
            "irqentry_exit_to_user_mode",
            "exc_page_fault",
            "asm_exc_page_fault",
        ];
        assert_eq!(switch_kind(&ret), SwitchKind::ReturnToUser);
        assert!(has_fault(&ret) && !handling_fault(&ret));
        assert_eq!(
            switch_kind(&["__schedule", "schedule", "do_sched_yield"]),
            SwitchKind::Other
        );
        // A compiler-suffixed clone still counts.
        assert_eq!(
            switch_kind(&["__schedule", "preempt_schedule_irq.part.0"]),
            SwitchKind::KernelPreemption
        );
    }

    /// The chains of `fixtures/arm64-7.2-chains.txt`: (kind, chain leaf first).
    fn arm64_72_chains() -> Vec<(&'static str, Vec<&'static str>)> {
        include_str!("../fixtures/arm64-7.2-chains.txt")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let mut f = l.split('\t');
                let kind = f.next().unwrap();
                let _seen = f.next().unwrap();
                (kind, f.next().unwrap().split(' ').collect())
            })
            .collect()
    }

    /// arm64 7.2's own fault path, as recorded: a fault from user space is on the fault path and being
    /// handled; the samples there are the fault's.
    #[test]
    fn arm64_faults_from_user_space() {
        let chains = arm64_72_chains();
        let user: Vec<_> = chains
            .iter()
            .filter(|(k, c)| *k == "fault" && c.iter().any(|f| *f == "el0_da" || *f == "el0_ia"))
            .collect();
        assert!(user.len() >= 3, "{user:?}");
        for (_, c) in user {
            assert!(has_fault(c) && handling_fault(c), "{c:?}");
            assert_eq!(kernel_category(c), Category::PageFault, "{c:?}");
        }
    }

    /// Regression (issue 45): on arm64 a switch on the way back to user space after a fault has no
    /// x86 `asm_exc_page_fault` on its chain but `el0_da`/`el0_ia`; without them the fault went unseen and
    /// `after_fault_return_to_user` stayed 0 in arm64 guests (measured: 0 of 1649 runnable switches in a
    /// 7.2 guest's `bench pg --reconnect --diagnose`).
    #[test]
    fn arm64_switches_after_a_fault_and_elsewhere() {
        let chains = arm64_72_chains();
        let switches: Vec<&Vec<&str>> = chains
            .iter()
            .filter(|(k, _)| *k == "switch")
            .map(|(_, c)| c)
            .collect();
        let mut after_fault = 0;
        let mut preempted_in_fault = 0;
        for c in switches {
            let returning = c.contains(&"exit_to_user_mode_loop");
            let aborted = c.iter().any(|f| *f == "el0_da" || *f == "el0_ia");
            if returning {
                assert_eq!(switch_kind(c), SwitchKind::ReturnToUser, "{c:?}");
                assert_eq!(has_fault(c), aborted, "{c:?}");
                assert!(!handling_fault(c), "returning, not handling: {c:?}");
                after_fault += usize::from(aborted);
            } else if c.contains(&"preempt_schedule") {
                assert_eq!(switch_kind(c), SwitchKind::KernelPreemption, "{c:?}");
                let in_fault = c.contains(&"handle_mm_fault");
                assert_eq!(has_fault(c) && handling_fault(c), in_fault, "{c:?}");
                preempted_in_fault += usize::from(in_fault);
            }
        }
        assert!(after_fault >= 2, "el0_da and el0_ia returns in the fixture");
        assert!(
            preempted_in_fault >= 2,
            "preempted inside do_wp_page and do_fault"
        );
    }

    #[test]
    fn runnable_states() {
        assert!(runnable(0));
        assert!(runnable(0x100));
        assert!(!runnable(1));
        assert!(!runnable(0x101));
        assert!(!runnable(0x80));
    }
}
