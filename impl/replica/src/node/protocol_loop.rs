//! The protocol loop: the one task that owns the protocol core. It feeds
//! the core every input (peer messages, client requests, durability,
//! timers) and turns its outputs into actions: peer sends, log writes,
//! timers, client replies, trace lines. It makes no protocol decision of
//! its own.

use std::io::Write;

use anyhow::Result;
use stutter_core::{Ballot, Input, Output, Replica, ReplicaId, Reply, Role};
use tokio::sync::{mpsc, oneshot, watch};

use super::calibrate::{TurnKind, TurnMeter};
use super::event::Event;
use super::gc::GcDriver;
use super::group_commit::{Durable, GroupCommit, SLOW};
use super::peers::PeerLinks;
use super::routes::Routes;
use super::status::status;
use super::timers::{CoreClock, Timers};
use crate::config::ClusterConfig;
use crate::wire::ClientResponse;

/// Inputs taken per turn at most before the outputs are acted on: a burst
/// of requests leaves as one batch of sends, replies and log writes.
const MAX_PER_TURN: usize = 4096;

pub struct ProtocolLoop {
    pub replica: Replica,
    pub clock: CoreClock,
    pub timers: Timers,
    pub peers: PeerLinks,
    pub wal: GroupCommit,
    pub routes: Routes,
    pub trace: Option<std::io::BufWriter<std::fs::File>>,
    /// For the client address in a redirect.
    pub cfg: ClusterConfig,
    /// `--calibrate`: a line per turn.
    pub meter: Option<TurnMeter>,
    /// `[gc]`: the collector model.
    pub gc: Option<GcDriver>,
    /// The protocol said collect (`Output::Collect`) during this turn.
    pub collect: bool,
    /// The role, ballot and leader last logged (`log_role_change`).
    pub role: Option<(Role, Ballot, Option<ReplicaId>)>,
    /// The log's error while its storage alarm is on (`kv status`).
    pub storage_alarm: Option<String>,
}

impl ProtocolLoop {
    /// Runs until the event channel closes (`Ok`), a shutdown signal
    /// (`Ok`, the trace flushed), or a failed disk write (`Err`).
    pub async fn run(
        &mut self,
        mut events: mpsc::Receiver<Event>,
        mut durable: watch::Receiver<Durable>,
        mut shutdown: oneshot::Receiver<()>,
    ) -> Result<()> {
        // SIGUSR1 asks the collector model for a full collection (the
        // campaigns' `gc` nemesis): at once, or through the coordination.
        let mut gc_asked = match self.gc {
            Some(_) => match crate::platform::usr1() {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "no SIGUSR1 handler: collections cannot be asked for");
                    None
                }
            },
            None => None,
        };
        let mut out = Vec::with_capacity(1024);
        self.replica
            .handle(self.clock.now(), Input::Start, &mut out);
        self.apply(&mut out);
        loop {
            let next_timer = self.timers.next();
            let sleep = async {
                match next_timer {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending::<()>().await,
                }
            };
            let gc_wakeup = self.gc.as_ref().and_then(GcDriver::next_wakeup);
            let gc_sleep = async {
                match gc_wakeup {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending::<()>().await,
                }
            };
            let asked = async {
                match gc_asked.as_mut() {
                    Some(s) => s.recv().await,
                    None => std::future::pending().await,
                }
            };
            let turn;
            tokio::select! {
                ev = events.recv() => {
                    let Some(ev) = ev else { return Ok(()) };
                    turn = std::time::Instant::now();
                    self.start_turn(TurnKind::Events);
                    self.event(ev, &mut out);
                    for _ in 0..MAX_PER_TURN {
                        match events.try_recv() {
                            Ok(ev) => self.event(ev, &mut out),
                            Err(_) => break,
                        }
                    }
                }
                changed = durable.changed() => {
                    turn = std::time::Instant::now();
                    self.start_turn(TurnKind::Persisted);
                    let d = durable.borrow_and_update().clone();
                    if let Some(e) = d.failed {
                        anyhow::bail!(e);
                    }
                    if changed.is_err() {
                        anyhow::bail!("the write-ahead-log thread stopped");
                    }
                    if d.alarm.is_some() != self.replica.storage_full() {
                        self.handle(Input::StorageAlarm { full: d.alarm.is_some() }, &mut out);
                    }
                    self.storage_alarm = d.alarm;
                    self.handle(Input::Persisted { token: d.token }, &mut out);
                }
                _ = sleep => {
                    turn = std::time::Instant::now();
                    self.start_turn(TurnKind::Timers);
                    for t in self.timers.take_due(tokio::time::Instant::now()) {
                        self.handle(Input::Timer(t), &mut out);
                    }
                }
                _ = gc_sleep => {
                    turn = std::time::Instant::now();
                    self.start_turn(TurnKind::Gc);
                }
                signaled = asked => {
                    turn = std::time::Instant::now();
                    self.start_turn(TurnKind::Gc);
                    match (signaled, self.gc.as_mut()) {
                        (Some(()), Some(gc)) => {
                            gc.request_full();
                        }
                        // The signal stream ended: stop listening rather
                        // than wake up for it on every turn.
                        _ => gc_asked = None,
                    }
                }
                _ = &mut shutdown => {
                    tracing::info!("shutting down on signal");
                    self.flush_trace();
                    if let Some(m) = self.meter.as_mut() {
                        m.file();
                        m.flush();
                    }
                    return Ok(());
                }
            }
            self.apply(&mut out);
            if let Some(m) = self.meter.as_mut() {
                m.end(&self.replica);
            }
            if let Some(gc) = self.gc.as_mut() {
                let (assist, paused) = gc.after_turn();
                if let Some(m) = self.meter.as_mut() {
                    m.gc(assist, paused);
                }
            }
            self.coordinate_gc(&mut out);
            if turn.elapsed() > SLOW {
                tracing::warn!(
                    ms = turn.elapsed().as_millis() as u64,
                    "slow protocol-loop turn"
                );
            }
            self.routes.sweep_if_due();
            // Flushed every turn, before the turn's messages leave (the
            // peer tasks run when the loop yields): a trace cut short by a
            // kill never shows a message received whose sending it lost.
            self.flush_trace();
            // Under madsim the collector's pauses and work stop the node
            // here, in virtual time (gc_madsim.rs).
            #[cfg(feature = "madsim")]
            if let Some(gc) = self.gc.as_mut() {
                gc.settle().await;
            }
        }
    }

    fn flush_trace(&mut self) {
        if let Some(w) = self.trace.as_mut() {
            let _ = w.flush();
        }
    }

    /// A turn begins: the previous one's line is filed and this one's
    /// counters are read.
    fn start_turn(&mut self, kind: TurnKind) {
        if let Some(m) = self.meter.as_mut() {
            m.file();
            m.start(kind, &self.replica);
        }
    }

    fn handle(&mut self, input: Input, out: &mut Vec<Output>) {
        if let Some(m) = self.meter.as_mut() {
            m.input(&input);
        }
        #[cfg(feature = "madsim")]
        if let Some(gc) = self.gc.as_mut() {
            gc.input(&input);
        }
        self.replica.handle(self.clock.now(), input, out);
        #[cfg(feature = "madsim")]
        if let Some(gc) = self.gc.as_mut() {
            gc.handled(&self.replica);
        }
        self.log_role_change();
    }

    /// Logs each change of role, ballot or believed leader at info level:
    /// an operator (or whoever reads a campaign's replica logs) can tell
    /// who unseated whom without a trace, which costs too much to leave on.
    fn log_role_change(&mut self) {
        let now = (
            self.replica.role(),
            self.replica.ballot(),
            self.replica.leader(),
        );
        if self.role == Some(now) {
            return;
        }
        let (role, ballot, leader) = now;
        match self.role {
            Some((was, was_ballot, _)) => {
                tracing::info!(role = ?role, was = ?was, ballot = ballot.0, was_ballot = was_ballot.0, leader = ?leader, "role")
            }
            None => tracing::info!(role = ?role, ballot = ballot.0, leader = ?leader, "role"),
        }
        self.role = Some(now);
    }

    fn event(&mut self, ev: Event, out: &mut Vec<Output>) {
        match ev {
            Event::Peer { from, msg } => self.handle(Input::Message { from, msg }, out),
            Event::Client { reply, req } => {
                self.routes.insert(req.client, req.seq, reply);
                self.handle(Input::Request(req), out);
            }
            Event::Status(reply) => {
                if let Some(m) = self.meter.as_mut() {
                    m.status();
                }
                let mut st = status(&self.replica, self.gc.as_ref().map(GcDriver::status));
                st.storage_alarm = self.storage_alarm.clone();
                let _ = reply.send(st);
            }
        }
    }

    /// GC coordination: collections the model reports due go to the
    /// protocol as `GcDue`; a `Collect` it answers runs the collection now
    /// (the world stopped) and reports `GcDone`.
    fn coordinate_gc(&mut self, out: &mut Vec<Output>) {
        let Some(gc) = self.gc.as_mut() else { return };
        for headroom in gc.take_due() {
            self.handle(Input::GcDue { headroom }, out);
            self.apply(out);
        }
        while std::mem::take(&mut self.collect) {
            if let Some(gc) = self.gc.as_mut() {
                gc.collect_now();
            }
            self.handle(Input::GcDone, out);
            self.apply(out);
        }
    }

    fn apply(&mut self, out: &mut Vec<Output>) {
        for o in out.drain(..) {
            if let Some(m) = self.meter.as_mut() {
                m.output(&o);
            }
            #[cfg(feature = "madsim")]
            if let Some(gc) = self.gc.as_mut() {
                gc.output(&o);
            }
            match o {
                Output::Send { to, msg } => self.peers.send(to, msg),
                Output::SetTimer { timer, at } => self.timers.set(timer, self.clock.instant(at)),
                Output::Persist { token, records } => self.wal.persist(token, records),
                Output::Reply { client, seq, reply } => {
                    let Some(slot) = self.routes.take(client, seq) else {
                        continue;
                    };
                    let resp = match reply {
                        Reply::Redirect { leader } => {
                            self.routes.redirected(client);
                            ClientResponse::Redirect {
                                client,
                                seq,
                                leader,
                                addr: leader
                                    .and_then(|l| self.cfg.get(l))
                                    .map(|r| r.client_addr.clone()),
                            }
                        }
                        reply => ClientResponse::Reply { client, seq, reply },
                    };
                    // Never waits: the place was reserved with the request.
                    slot.send(resp);
                }
                // Answers `Input::GcDue`, which only the node's collector
                // model sends (`[gc]`, coordinated): carried out after the
                // turn's outputs have left.
                Output::Collect { .. } => self.collect = true,
                Output::Trace(ev) => {
                    if let Some(w) = self.trace.as_mut() {
                        if let Ok(line) = serde_json::to_string(&ev) {
                            let _ = writeln!(w, "{line}");
                        }
                    }
                }
            }
        }
    }
}
