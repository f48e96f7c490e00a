//! What a replica's step produced, put into the world: messages into the
//! network, timers and persists into the queue, replies to the clients,
//! and trace events to the checkers, the trace hash and the trace file.

use std::io::Write;

use stutter_core::{Action, Message, Output, Record, ReplicaId, TraceEvent};

use super::{Ev, GcMark, GcStep, World};
use crate::network::Sent;
use crate::node::timer_index;

impl World {
    pub(super) fn outputs(&mut self, r: ReplicaId, out: &mut Vec<Output>) {
        for o in out.drain(..) {
            match o {
                Output::Send { to, msg } => self.send(r, to, msg),
                Output::SetTimer { timer, at } => {
                    let k = timer_index(timer);
                    let node = &mut self.nodes[r as usize];
                    let inc = node.inc;
                    node.timer_deadline[k] = at;
                    let at = at.max(self.now);
                    if node.timer_queued[k].is_none_or(|q| q > at) {
                        node.timer_queued[k] = Some(at);
                        self.at(at, Ev::Timer { r, timer, inc, at });
                    }
                }
                Output::Persist { token, records } => {
                    let lat = self.s.disk_latency(&mut self.rng);
                    let ballot = !self.armed.is_empty()
                        && records.iter().any(|rec| matches!(rec, Record::Ballot(_)));
                    let pending = if ballot { records.clone() } else { Vec::new() };
                    let node = &mut self.nodes[r as usize];
                    let done = node.disk.append(self.now, lat, token, records);
                    let inc = node.inc;
                    self.at(done, Ev::Disk { r, token, inc });
                    if ballot {
                        self.on_persist(r, &pending, done);
                    }
                }
                Output::Reply { client, seq, reply } => {
                    if let Some(c) = self.clients.index(client) {
                        let d = self.net.delay(&mut self.rng);
                        self.at(
                            self.now + d,
                            Ev::ClientReply {
                                c,
                                client,
                                seq,
                                reply,
                            },
                        );
                    }
                }
                Output::Collect { .. } => self.collect_granted(r),
                Output::Trace(ev) => self.trace(ev),
            }
        }
    }

    fn trace(&mut self, ev: TraceEvent) {
        if self.s.memory.is_on() {
            self.trace_memory(&ev);
        }
        if self.s.memory.coordinated {
            let mark = match ev.action {
                Action::GcDue { .. } => Some(GcMark::Due),
                Action::TransferLeadership { to, .. } | Action::TransferWithPromise { to, .. } => {
                    Some(GcMark::HandOff { to })
                }
                Action::BecomeLeader { .. } => Some(GcMark::Elected),
                Action::Collect { granted } => Some(GcMark::Collect { granted }),
                Action::GcDone => Some(GcMark::Done),
                _ => None,
            };
            if let Some(mark) = mark {
                self.gc_log.push(GcStep {
                    at: ev.time,
                    replica: ev.replica,
                    mark,
                });
            }
        }
        if !self.armed.is_empty() {
            match ev.action {
                Action::BecomeLeader { .. } => self.on_elected(ev.replica),
                Action::StartElection { .. } => self.on_election_started(ev.replica),
                _ => {}
            }
        }
        self.hash.add(&ev);
        if let Some(w) = self.trace_out.as_mut() {
            if let Ok(line) = serde_json::to_vec(&ev) {
                let _ = w.write_all(&line);
                let _ = w.write_all(b"\n");
            }
        }
        // A replica whose state came from elsewhere than its own execution:
        // its session table is judged against the log (at the state after
        // the step, which is consistent with itself).
        let taken = match &ev.action {
            Action::InstallSnapshot { .. } => Some("after installing a snapshot"),
            Action::BecomeLeader {
                snapshot_from: Some(_),
                ..
            } => Some("after installing a promised snapshot"),
            Action::Recover { .. } => Some("after a restart"),
            _ => None,
        };
        if let Some(when) = taken {
            if let Some(rep) = self
                .nodes
                .get(ev.replica as usize)
                .and_then(|n| n.replica.as_ref())
            {
                self.checker
                    .state_taken(ev.replica, when, rep.state_machine());
            }
        }
        if matches!(ev.action, Action::BecomeLeader { .. }) {
            self.elections += 1;
        }
        // Last, so that the executed value moves into the checker.
        if let Action::Execute { slot, value, .. } = ev.action {
            self.checker.executed(ev.replica, slot, value);
        }
    }

    fn send(&mut self, from: ReplicaId, to: ReplicaId, msg: Message) {
        if to as usize >= self.s.n {
            return;
        }
        if let Sent::Delivered {
            arrival,
            epoch,
            duplicate,
        } = self.net.send(&mut self.rng, self.now, from, to)
        {
            if let Some(later) = duplicate {
                self.at(
                    later,
                    Ev::Deliver {
                        to,
                        from,
                        epoch,
                        msg: msg.clone(),
                    },
                );
            }
            self.at(
                arrival,
                Ev::Deliver {
                    to,
                    from,
                    epoch,
                    msg,
                },
            );
        }
    }
}
