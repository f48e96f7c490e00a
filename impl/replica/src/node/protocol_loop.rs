//! The protocol loop: the one task that owns the protocol core. It feeds
//! the core every input (peer messages, client requests, durability,
//! timers) and turns its outputs into actions: peer sends, log writes,
//! timers, client replies, trace lines. It makes no protocol decision of
//! its own.

use std::io::Write;

use anyhow::Result;
use stutter_core::{Input, Output, Replica, Reply};
use tokio::sync::{mpsc, oneshot, watch};

use super::event::Event;
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
        let mut out = Vec::with_capacity(1024);
        self.replica.handle(self.clock.now(), Input::Start, &mut out);
        self.apply(&mut out);
        loop {
            let next_timer = self.timers.next();
            let sleep = async {
                match next_timer {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending::<()>().await,
                }
            };
            let turn;
            tokio::select! {
                ev = events.recv() => {
                    let Some(ev) = ev else { return Ok(()) };
                    turn = std::time::Instant::now();
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
                    let d = durable.borrow_and_update().clone();
                    if let Some(e) = d.failed {
                        anyhow::bail!(e);
                    }
                    if changed.is_err() {
                        anyhow::bail!("the write-ahead-log thread stopped");
                    }
                    self.replica.handle(self.clock.now(), Input::Persisted { token: d.token }, &mut out);
                }
                _ = sleep => {
                    turn = std::time::Instant::now();
                    for t in self.timers.take_due(tokio::time::Instant::now()) {
                        self.replica.handle(self.clock.now(), Input::Timer(t), &mut out);
                    }
                }
                _ = &mut shutdown => {
                    tracing::info!("shutting down on signal");
                    self.flush_trace();
                    return Ok(());
                }
            }
            self.apply(&mut out);
            if turn.elapsed() > SLOW {
                tracing::warn!(ms = turn.elapsed().as_millis() as u64, "slow protocol-loop turn");
            }
            self.routes.sweep_if_due();
            // Flushed every turn, before the turn's messages leave (the
            // peer tasks run when the loop yields): a trace cut short by a
            // kill never shows a message received whose sending it lost.
            self.flush_trace();
        }
    }

    fn flush_trace(&mut self) {
        if let Some(w) = self.trace.as_mut() {
            let _ = w.flush();
        }
    }

    fn event(&mut self, ev: Event, out: &mut Vec<Output>) {
        let now = self.clock.now();
        match ev {
            Event::Peer { from, msg } => self.replica.handle(now, Input::Message { from, msg }, out),
            Event::Client { reply, req } => {
                self.routes.insert(req.client, req.seq, reply);
                self.replica.handle(now, Input::Request(req), out);
            }
            Event::Status(reply) => {
                let _ = reply.send(status(&self.replica));
            }
        }
    }

    fn apply(&mut self, out: &mut Vec<Output>) {
        for o in out.drain(..) {
            match o {
                Output::Send { to, msg } => self.peers.send(to, msg),
                Output::SetTimer { timer, at } => self.timers.set(timer, self.clock.instant(at)),
                Output::Persist { token, records } => self.wal.persist(token, records),
                Output::Reply { client, seq, reply } => {
                    let Some(slot) = self.routes.take(client, seq) else { continue };
                    let resp = match reply {
                        Reply::Redirect { leader } => ClientResponse::Redirect {
                            client,
                            seq,
                            leader,
                            addr: leader.and_then(|l| self.cfg.get(l)).map(|r| r.client_addr.clone()),
                        },
                        reply => ClientResponse::Reply { client, seq, reply },
                    };
                    // Never waits: the place was reserved with the request.
                    slot.send(resp);
                }
                // Only answers `Input::GcDue`, which only the node's emulated
                // collector sends (the `[gc]` section); without one this
                // never comes.
                Output::Collect { .. } => {}
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
