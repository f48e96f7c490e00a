//! A replica process: the unchanged protocol core, its incarnation, its
//! processor, disk, heap and timers, and whether it is stopped.

use stutter_core::{Input, Replica, Time, Timer};

use crate::cpu::Cpu;
use crate::disk::Disk;
use crate::memory::Heap;

pub struct Node {
    pub replica: Option<Replica>,
    /// Incarnation: bumped by a crash, so that events of the dead process
    /// (timers, disk completions, CPU, collector wake-ups) are ignored.
    pub inc: u64,
    /// Stopped (a pause fault or a collector's stop-the-world phase)
    /// until `pause_until`.
    pub paused: bool,
    pub pause_until: Time,
    pub cpu: Cpu,
    pub disk: Disk,
    pub heap: Option<Heap>,
    /// Per timer kind (Election, Heartbeat, Gc): the deadline the core last set
    /// and the time of the one queue entry that stands for it. A timer the
    /// core re-arms on every message would otherwise leave thousands of
    /// stale entries in the queue; the core ignores early firings anyway
    /// (`Output::SetTimer` replaces the previous deadline).
    pub timer_deadline: [Time; 3],
    pub timer_queued: [Option<Time>; 3],
}

pub fn timer_index(t: Timer) -> usize {
    match t {
        Timer::Election => 0,
        Timer::Heartbeat => 1,
        Timer::Gc => 2,
    }
}

impl Node {
    pub fn new(replica: Replica, cores: u32) -> Node {
        let mut cpu = Cpu::new(cores);
        cpu.inbox.push_back(Input::Start);
        Node {
            replica: Some(replica),
            inc: 0,
            paused: false,
            pause_until: 0,
            cpu,
            disk: Disk::default(),
            heap: None,
            timer_deadline: [0; 3],
            timer_queued: [None; 3],
        }
    }

    /// Cores the protocol's inputs may use now.
    pub fn mutator_cores(&self) -> f64 {
        self.heap
            .as_ref()
            .map_or(f64::INFINITY, |h| h.mutator_cores())
    }

    /// The process died: everything volatile is gone.
    pub fn crash(&mut self) {
        self.replica = None;
        self.inc += 1;
        self.timer_deadline = [0; 3];
        self.timer_queued = [None; 3];
        self.paused = false;
        self.cpu.crash();
        self.disk.crash();
        self.heap = None;
    }
}
