//! The fault schedule of a seed and the loop that applies it while the
//! clients run: a replica paused (stop-the-world, as a GC pause: its tasks
//! stop while its timers and incoming messages pile up) and resumed (in GC
//! runs instead a full collection asked of its collector model, whose
//! pauses stop it the same way), a
//! replica killed (its tasks dropped, its sockets closed, what it had not
//! synced to its simulated disk lost: a machine's crash) and restarted, a
//! power loss of the whole cluster, a replica isolated (all its links
//! clogged), a link between two replicas or between a replica and a
//! client clogged, a window of packet loss, and a window of long delays. madsim's TCP is reliable:
//! a clogged link or a lost packet is retransmitted with back-off, so to
//! the node these are delays, as on a real network, and the connection
//! survives; a connection attempt that meets one is refused.
//!
//! Overlapping clogs share madsim's one flag per link: the first to end
//! unclogs it for both (a shorter fault, still a fault).

use std::time::Duration;

use madsim::net::NetSim;
use madsim::runtime::Handle;
use madsim::task::NodeId;
use rand_core::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;
use stutter_replica::platform::fs::crash;
use stutter_replica::platform::send_usr1;

/// How often the driver looks at the clock (simulated time).
pub const TICK: Duration = Duration::from_millis(10);

#[derive(Clone, Debug)]
pub enum Fault {
    /// Stop every task of replica `i` (a stop-the-world pause).
    Pause(usize),
    /// Kill replica `i` (restarted when the fault ends).
    Kill(usize),
    /// Kill every replica at once.
    PowerLoss,
    /// Clog every link of replica `i`.
    Isolate(usize),
    /// Clog both directions between replicas `a` and `b`.
    Clog(usize, usize),
    /// Clog both directions between replica `a` and client `c`.
    CutClient(usize, usize),
    /// Lose this fraction of packets, everywhere.
    Loss(f64),
    /// Delay every packet by 1 ms up to this many ms, everywhere.
    Slow(u64),
}

#[derive(Clone, Debug)]
pub struct Event {
    pub at: Duration,
    pub fault: Fault,
    /// How long until it is undone.
    pub lasts: Duration,
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub events: Vec<Event>,
    pub max_latency_ms: u64,
}

fn below(rng: &mut Xoshiro256PlusPlus, n: u64) -> u64 {
    rng.next_u64() % n.max(1)
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

impl Plan {
    pub fn none() -> Plan {
        Plan {
            events: Vec::new(),
            max_latency_ms: 5,
        }
    }

    /// Draws a plan: 2-8 faults in the first 5 s, each lasting 50 ms to
    /// 2 s (a pause: 20 ms to 2 s, the range of the collectors' pauses).
    pub fn draw(rng: &mut Xoshiro256PlusPlus, replicas: usize, clients: usize) -> Plan {
        let replicas = replicas.max(2) as u64;
        let mut events = Vec::new();
        let n = 2 + below(rng, 7);
        for _ in 0..n {
            let at = ms(200 + below(rng, 5000));
            let mut lasts = ms(50 + below(rng, 1950));
            let a = below(rng, replicas) as usize;
            let b = (a + 1 + below(rng, replicas - 1) as usize) % replicas as usize;
            let fault = match below(rng, 13) {
                0..=2 => {
                    lasts = ms(20 + below(rng, 1980));
                    Fault::Pause(a)
                }
                3..=4 => Fault::Kill(a),
                5 => Fault::PowerLoss,
                6..=7 => Fault::Isolate(a),
                8 => Fault::Clog(a, b),
                9..=10 => Fault::CutClient(a, below(rng, clients.max(1) as u64) as usize),
                11 => Fault::Loss([0.05, 0.1, 0.2, 0.4][below(rng, 4) as usize]),
                _ => Fault::Slow([20, 50, 200][below(rng, 3) as usize]),
            };
            events.push(Event { at, fault, lasts });
        }
        events.sort_by_key(|e| e.at);
        let max_latency_ms = 2 + below(rng, 4);
        Plan {
            events,
            max_latency_ms,
        }
    }
}

/// What has to be undone, and when.
enum Undo {
    Resume(usize),
    Restart(Vec<usize>),
    Unclog(Vec<(NodeId, NodeId)>),
    UnclogNode(usize),
    NoLoss,
    Fast,
}

/// Applies faults and undoes them on time.
pub struct Driver {
    pending: Vec<Event>,
    undo: Vec<(Duration, Undo)>,
    replicas: Vec<NodeId>,
    /// Each replica's data directory on the simulated disk.
    dirs: Vec<std::path::PathBuf>,
    clients: Vec<NodeId>,
    /// The seed's latency (restored when a slow window ends).
    max_latency_ms: u64,
    /// Replicas killed by the plan (the supervisor leaves them down).
    down: Vec<bool>,
    pub applied: Vec<String>,
    /// GC runs: a `Pause` asks the replica's collector model for a full
    /// collection instead of pausing it by the clock.
    gc: bool,
    /// When the cluster last changed (a fault applied or undone, a
    /// supervisor restart): after [`Driver::heal`], the moment from which
    /// the liveness judge (`check::liveness`) counts.
    pub last_change: Duration,
}

fn now() -> Duration {
    madsim::time::TimeHandle::current().elapsed()
}

impl Driver {
    pub fn new(
        plan: &Plan,
        replicas: Vec<NodeId>,
        dirs: Vec<std::path::PathBuf>,
        clients: Vec<NodeId>,
        gc: bool,
    ) -> Driver {
        let mut pending = plan.events.clone();
        pending.reverse();
        let n = replicas.len();
        Driver {
            pending,
            undo: Vec::new(),
            replicas,
            dirs,
            clients,
            max_latency_ms: plan.max_latency_ms,
            down: vec![false; n],
            applied: Vec::new(),
            gc,
            last_change: Duration::ZERO,
        }
    }

    fn log(&mut self, now: Duration, what: String) {
        tracing::info!(target: "dsim", at_ms = now.as_millis() as u64, "{what}");
        self.applied.push(format!("{}ms {what}", now.as_millis()));
        self.last_change = now;
    }

    /// Applies due faults, undoes expired ones, and supervises.
    pub fn tick(&mut self, handle: &Handle) {
        let now = now();
        let net = NetSim::current();
        while self.pending.last().is_some_and(|e| e.at <= now) {
            let Some(e) = self.pending.pop() else { break };
            let until = now + e.lasts;
            match e.fault {
                Fault::Pause(i) if self.gc => {
                    // The collector decides the pause (coordinated: when
                    // the protocol grants it), as SIGUSR1 asks a real node.
                    if !self.down[i] && send_usr1(self.replicas[i]) {
                        self.log(now, format!("gc r{i}"));
                    }
                }
                Fault::Pause(i) => {
                    if !self.down[i] {
                        handle.pause(self.replicas[i]);
                        self.log(now, format!("pause r{i}"));
                        self.undo.push((until, Undo::Resume(i)));
                    }
                }
                Fault::Kill(i) => {
                    if !self.down[i] {
                        handle.kill(self.replicas[i]);
                        crash(&self.dirs[i]);
                        self.down[i] = true;
                        self.log(now, format!("kill r{i}"));
                        self.undo.push((until, Undo::Restart(vec![i])));
                    }
                }
                Fault::PowerLoss => {
                    let up: Vec<usize> = (0..self.down.len()).filter(|i| !self.down[*i]).collect();
                    for &i in &up {
                        handle.kill(self.replicas[i]);
                        crash(&self.dirs[i]);
                        self.down[i] = true;
                    }
                    self.log(now, format!("power loss {up:?}"));
                    self.undo.push((until, Undo::Restart(up)));
                }
                Fault::Isolate(i) => {
                    net.clog_node(self.replicas[i]);
                    self.log(now, format!("isolate r{i}"));
                    self.undo.push((until, Undo::UnclogNode(i)));
                }
                Fault::Clog(a, b) => {
                    let links = vec![
                        (self.replicas[a], self.replicas[b]),
                        (self.replicas[b], self.replicas[a]),
                    ];
                    for (s, d) in &links {
                        net.clog_link(*s, *d);
                    }
                    self.log(now, format!("clog r{a} r{b}"));
                    self.undo.push((until, Undo::Unclog(links)));
                }
                Fault::CutClient(a, c) => {
                    let Some(cid) = self.clients.get(c).copied() else {
                        continue;
                    };
                    let links = vec![(self.replicas[a], cid), (cid, self.replicas[a])];
                    for (s, d) in &links {
                        net.clog_link(*s, *d);
                    }
                    self.log(now, format!("cut r{a} c{c}"));
                    self.undo.push((until, Undo::Unclog(links)));
                }
                Fault::Loss(p) => {
                    net.update_config(|c| c.packet_loss_rate = p);
                    self.log(now, format!("loss {p}"));
                    self.undo.push((until, Undo::NoLoss));
                }
                Fault::Slow(max) => {
                    net.update_config(|c| {
                        c.send_latency = Duration::from_millis(1)..Duration::from_millis(max)
                    });
                    self.log(now, format!("slow {max}ms"));
                    self.undo.push((until, Undo::Fast));
                }
            }
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.undo)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.undo = later;
        for (_, u) in due {
            self.undo_one(handle, &net, now, u);
        }
        self.supervise(handle);
    }

    /// A replica that stopped itself (`run` returned an error, madsim's
    /// node exited) and was not killed by the plan restarts, as systemd
    /// would restart it.
    pub fn supervise(&mut self, handle: &Handle) {
        let now = now();
        for i in 0..self.replicas.len() {
            if !self.down[i] && handle.is_exit(self.replicas[i]) {
                handle.restart(self.replicas[i]);
                self.log(now, format!("supervisor restarts r{i}"));
            }
        }
    }

    fn undo_one(&mut self, handle: &Handle, net: &NetSim, now: Duration, u: Undo) {
        match u {
            Undo::Resume(i) => {
                handle.resume(self.replicas[i]);
                self.log(now, format!("resume r{i}"));
            }
            Undo::Restart(rs) => {
                for i in rs {
                    self.down[i] = false;
                    handle.restart(self.replicas[i]);
                    self.log(now, format!("restart r{i}"));
                }
            }
            Undo::Unclog(links) => {
                for (s, d) in links {
                    net.unclog_link(s, d);
                }
                self.log(now, "unclog".into());
            }
            Undo::UnclogNode(i) => {
                net.unclog_node(self.replicas[i]);
                self.log(now, format!("unisolate r{i}"));
            }
            Undo::NoLoss => {
                net.update_config(|c| c.packet_loss_rate = 0.0);
                self.log(now, "no loss".into());
            }
            Undo::Fast => {
                let max = self.max_latency_ms.max(2);
                net.update_config(|c| {
                    c.send_latency = Duration::from_millis(1)..Duration::from_millis(max)
                });
                self.log(now, "fast".into());
            }
        }
    }

    /// Undoes every fault still in force: the network heals and every
    /// replica runs.
    pub fn heal(&mut self, handle: &Handle) {
        let now = now();
        let net = NetSim::current();
        self.pending.clear();
        for (_, u) in std::mem::take(&mut self.undo) {
            self.undo_one(handle, &net, now, u);
        }
    }
}
