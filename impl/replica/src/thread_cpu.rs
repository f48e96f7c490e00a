//! CPU time of the calling thread, for the calibration of the simulator's
//! service table and for the collector model's account of how busy the
//! node's threads are. CPU time, not wall time: on a shared machine a
//! thread's wall time includes the time slices others took from it.

use std::time::Duration;

/// CPU time the calling thread has used since it started, nanoseconds
/// (user and system; `CLOCK_THREAD_CPUTIME_ID`). 0 if the clock cannot be
/// read (it always can on Linux).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a
    // constant the kernel knows.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Keeps the calling thread busy until it has used `cpu` more CPU time,
/// or until `max_wall` has passed (on a saturated machine the thread may
/// not get the CPU at all). Returns the CPU time it used.
pub fn spin(cpu: Duration, max_wall: Duration) -> Duration {
    let start = now_ns();
    let target = cpu.as_nanos() as u64;
    let deadline = std::time::Instant::now() + max_wall;
    loop {
        let used = now_ns().saturating_sub(start);
        if used >= target || std::time::Instant::now() >= deadline {
            return Duration::from_nanos(used);
        }
        for _ in 0..64 {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_uses_cpu_time_and_sleeping_does_not() {
        let a = now_ns();
        std::thread::sleep(Duration::from_millis(20));
        let slept = now_ns() - a;
        let used = spin(Duration::from_millis(5), Duration::from_secs(5));
        assert!(used >= Duration::from_millis(5), "spun {used:?}");
        // Sleeping costs a few µs of CPU, far less than the sleep.
        assert!(slept < 5_000_000, "sleep used {slept} ns of CPU");
    }
}
