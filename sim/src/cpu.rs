//! One replica's processor: `cores` cores serving its inputs in arrival
//! order. The protocol step of an input runs when a core takes it (so its
//! outputs leave then); the core stays busy for the input's service time,
//! so that load shows as queueing. A collector's concurrent workers take
//! cores from the mutator (`mutator_cores`): a fractional share slows
//! every core the mutator runs on.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use stutter_core::{Action, Input, Message, Op, Output, Record, Time, Value};

/// CPU µs each kind of input costs a replica.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServiceTable {
    pub message: Time,
    pub client_request: Time,
    pub timer: Time,
    pub persisted: Time,
    /// Extra per kilobyte of a message (serialization and copying).
    pub per_kb: Time,
    /// Costs measured on the real node: when set, they replace the five
    /// figures above (`crate::calibration::service`).
    pub steps: Option<StepCosts>,
    /// Costs per client operation from an allocation profile
    /// (`crate::profile`): when set, they replace everything above.
    #[serde(default)]
    pub per_op: Option<OpCosts>,
}

/// CPU µs per client operation, by role, as a profile measured them on a
/// real implementation (its whole process: decoding, protocol, replies).
/// A request costs its kind at the replica it reaches; an `Accept` costs
/// a follower the writes it carries; nothing else is charged (it is in
/// the per-operation figures).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpCosts {
    pub leader_read: f64,
    pub leader_write: f64,
    pub follower_write: f64,
    /// As [`StepCosts::speed`].
    pub speed: f64,
}

impl OpCosts {
    fn input(&self, input: &Input) -> f64 {
        let write = |op: &Op| !matches!(op, Op::Get { .. } | Op::Register);
        match input {
            Input::Request(r) if write(&r.op) => self.leader_write,
            Input::Request(_) => self.leader_read,
            Input::Message {
                msg: Message::Accept { value, .. },
                ..
            } => {
                let n = value.requests().iter().filter(|r| write(&r.op)).count();
                self.follower_write * n as f64
            }
            _ => 0.0,
        }
    }
}

impl Default for ServiceTable {
    /// First estimates for a small VM, kept as the default so that the
    /// seeds and traces recorded with them stay reproducible; the study
    /// uses [`crate::calibration::service`].
    fn default() -> Self {
        ServiceTable {
            message: 15,
            client_request: 8,
            timer: 5,
            persisted: 4,
            per_kb: 2,
            steps: None,
            per_op: None,
        }
    }
}

/// CPU µs of a step as the real node spends them (docs/calibration.md):
/// its input by kind, what it sends, replies and persists, the keys and
/// values it carries, the requests it executes, and once per turn the
/// cost of waking up. The real node's protocol loop takes every input
/// queued when it wakes in one turn and pays the wake-up (the runtime's
/// poll, the reads and writes of its sockets) once for them; the
/// processor here does the same: an input that starts a turn claims the
/// inputs queued behind it ([`Cpu::turn_starts`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StepCosts {
    pub wakeup: f64,
    /// Client requests: reads, and writes (put, delete, cas).
    pub get: f64,
    pub write: f64,
    /// Peer messages by kind (`Message::kind`); `message` for the others.
    pub messages: BTreeMap<String, f64>,
    pub message: f64,
    pub timer: f64,
    pub persisted: f64,
    /// Per output: a message sent, a reply, a batch of log records.
    pub send: f64,
    pub reply: f64,
    pub persist: f64,
    /// Per KiB of keys and values the input carries (read, decoded) and
    /// the outputs carry (encoded, written); a written value counts as
    /// the workload's `value_size` bytes (the simulator's values are
    /// short numbers).
    pub input_kb: f64,
    pub output_kb: f64,
    /// Per request executed by the state machine.
    pub executed: f64,
    /// The share of a core the replica gets while it has work: costs are
    /// CPU time, divided by this to give the time they hold the
    /// processor. 1 for a core of its own; less where replicas share
    /// cores with each other and a load generator (docs/calibration.md).
    pub speed: f64,
}

impl Default for StepCosts {
    fn default() -> Self {
        StepCosts {
            wakeup: 0.0,
            get: 0.0,
            write: 0.0,
            messages: BTreeMap::new(),
            message: 0.0,
            timer: 0.0,
            persisted: 0.0,
            send: 0.0,
            reply: 0.0,
            persist: 0.0,
            input_kb: 0.0,
            output_kb: 0.0,
            executed: 0.0,
            speed: 1.0,
        }
    }
}

/// A step's cost as known before the step ran (its input is consumed by
/// the step); [`ServiceTable::end`] adds what its outputs cost.
#[derive(Clone, Copy, Debug)]
pub struct Pending(f64);

impl ServiceTable {
    pub fn cost(&self, input: &Input) -> Time {
        match input {
            Input::Message { msg, .. } => self.message + message_kb(msg) * self.per_kb,
            Input::Request(_) => self.client_request,
            Input::Timer(_)
            | Input::Start
            | Input::GcDue { .. }
            | Input::GcDone
            | Input::StorageAlarm { .. } => self.timer,
            Input::Persisted { .. } => self.persisted,
        }
    }

    /// The part of a step's cost its input decides; `turn_starts` when the
    /// input begins a turn of the processor.
    pub fn begin(&self, input: &Input, value_size: u64, turn_starts: bool) -> Pending {
        if let Some(o) = &self.per_op {
            return Pending(o.input(input));
        }
        let Some(c) = &self.steps else {
            return Pending(self.cost(input) as f64);
        };
        let kind = match input {
            Input::Request(r) if matches!(r.op, Op::Get { .. }) => c.get,
            Input::Request(_) => c.write,
            Input::Message { msg, .. } => c.messages.get(msg.kind()).copied().unwrap_or(c.message),
            Input::Timer(_)
            | Input::Start
            | Input::GcDue { .. }
            | Input::GcDone
            | Input::StorageAlarm { .. } => c.timer,
            Input::Persisted { .. } => c.persisted,
        };
        let bytes = match input {
            Input::Request(r) => op_bytes(&r.op, value_size),
            Input::Message { msg, .. } => message_bytes(msg, value_size),
            _ => 0,
        };
        let wake = if turn_starts { c.wakeup } else { 0.0 };
        Pending(wake + kind + c.input_kb * bytes as f64 / 1024.0)
    }

    /// A step's whole cost, CPU µs at the replica's speed (fractional:
    /// [`Cpu::whole`] rounds it).
    pub fn end(&self, p: Pending, out: &[Output], value_size: u64) -> f64 {
        if let Some(o) = &self.per_op {
            return p.0 / o.speed.max(1e-3);
        }
        let Some(c) = &self.steps else { return p.0 };
        let mut cost = p.0;
        let mut bytes = 0;
        for o in out {
            match o {
                Output::Send { msg, .. } => {
                    cost += c.send;
                    bytes += message_bytes(msg, value_size);
                }
                Output::Reply { .. } => cost += c.reply,
                Output::Persist { records, .. } => {
                    cost += c.persist;
                    for r in records {
                        if let Record::Accept { value, .. } = r {
                            bytes += value_bytes(value, value_size);
                        }
                    }
                }
                Output::Trace(ev) => {
                    if let Action::Execute {
                        value: Some(ids), ..
                    } = &ev.action
                    {
                        cost += c.executed * ids.len() as f64;
                    }
                }
                Output::SetTimer { .. } | Output::Collect { .. } => {}
            }
        }
        cost += c.output_kb * bytes as f64 / 1024.0;
        cost / c.speed.max(1e-3)
    }
}

/// Bytes of keys and values an operation carries, a written value
/// counting `value_size` bytes.
fn op_bytes(op: &Op, value_size: u64) -> u64 {
    let k = op.key().len() as u64;
    match op {
        Op::Get { .. } | Op::Del { .. } => k,
        Op::Put { .. } | Op::Cas { .. } => k + value_size,
        Op::Register => 0,
    }
}

fn value_bytes(v: &Value, value_size: u64) -> u64 {
    v.requests()
        .iter()
        .map(|r| op_bytes(&r.op, value_size))
        .sum()
}

fn message_bytes(msg: &Message, value_size: u64) -> u64 {
    match msg {
        Message::Accept { value, .. } => value_bytes(value, value_size),
        Message::CatchUp { entries, .. } | Message::Promise { entries, .. } => entries
            .iter()
            .map(|e| value_bytes(&e.value, value_size))
            .sum(),
        Message::InstallSnapshot { snapshot, .. } => snapshot
            .kv
            .keys()
            .map(|k| k.len() as u64 + value_size)
            .sum(),
        _ => 0,
    }
}

/// The size class of a message, in kilobytes (rough: keys and entries).
pub fn message_kb(msg: &Message) -> Time {
    match msg {
        Message::Accept { value, .. } => {
            value
                .requests()
                .iter()
                .map(|r| r.op.key().len() as Time + 24)
                .sum::<Time>()
                / 1024
        }
        Message::Promise {
            entries, snapshot, ..
        } => entries.len() as Time / 8 + snapshot.as_ref().map_or(0, |s| s.kv.len() as Time / 16),
        Message::CatchUp { entries, .. } => entries.len() as Time / 8,
        Message::InstallSnapshot { snapshot, .. } => snapshot.kv.len() as Time / 16,
        _ => 0,
    }
}

pub struct Cpu {
    pub cores: u32,
    /// Inputs in service.
    pub busy: u32,
    /// Inputs waiting for a core, oldest first.
    pub inbox: VecDeque<Input>,
    /// `(time, sequence)` at which cores become free, kept out of the
    /// event queue while no input waits: the world counts them free when
    /// it next looks, or queues them once an input waits (`World::kick`).
    pub free_later: Vec<(Time, u64)>,
    /// Inputs of the current turn not yet started.
    turn_left: usize,
    /// Fractions of a µs of cost not yet charged.
    carry: f64,
}

impl Cpu {
    pub fn new(cores: u32) -> Cpu {
        Cpu {
            cores: cores.max(1),
            busy: 0,
            inbox: VecDeque::new(),
            free_later: Vec::new(),
            turn_left: 0,
            carry: 0.0,
        }
    }

    /// An input was just taken from the inbox: whether it starts a turn.
    /// A turn is what the real node's protocol loop takes in one go: the
    /// input that wakes it and everything queued behind it then; inputs
    /// that arrive meanwhile wait for the next turn.
    pub fn turn_starts(&mut self) -> bool {
        if self.turn_left > 0 {
            self.turn_left -= 1;
            false
        } else {
            self.turn_left = self.inbox.len();
            true
        }
    }

    /// `cost` µs as whole µs; the fractions add up over steps, so that a
    /// step of 0.4 µs costs nothing here and something two steps later.
    pub fn whole(&mut self, cost: f64) -> Time {
        let total = cost + self.carry;
        let t = total.floor().max(0.0);
        self.carry = total - t;
        t as Time
    }

    /// How many inputs may be in service at once, and the speed of each,
    /// when the mutator may use `mutator_cores` (all cores but what the
    /// collector's concurrent workers hold).
    pub fn slots(&self, mutator_cores: f64) -> (u32, f64) {
        let avail = mutator_cores.min(self.cores as f64);
        if avail >= self.cores as f64 {
            return (self.cores, 1.0);
        }
        let slots = (avail - 1e-9).ceil().max(1.0);
        (slots as u32, (avail / slots).clamp(0.01, 1.0))
    }

    /// Cores the mutator keeps busy now.
    pub fn busy_cores(&self, speed: f64) -> f64 {
        self.busy as f64 * speed
    }

    /// How long an input of `cost` µs (plus `assist` µs of marking) holds
    /// a core at `speed`.
    pub fn duration(cost: Time, assist: Time, speed: f64) -> Time {
        if speed >= 1.0 {
            cost + assist
        } else {
            ((cost + assist) as f64 / speed).ceil() as Time
        }
    }

    /// The process died: queued inputs are gone and no core is busy.
    pub fn crash(&mut self) {
        self.busy = 0;
        self.inbox.clear();
        self.free_later.clear();
        self.turn_left = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_speed_follow_the_cores_left_to_the_mutator() {
        let c = Cpu::new(4);
        assert_eq!(c.slots(f64::INFINITY), (4, 1.0));
        assert_eq!(c.slots(3.0), (3, 1.0));
        let (n, s) = c.slots(1.5);
        assert_eq!(n, 2);
        assert!((s - 0.75).abs() < 1e-9);
        let one = Cpu::new(1);
        let (n, s) = one.slots(0.75);
        assert_eq!(n, 1);
        assert!((s - 0.75).abs() < 1e-9);
        assert_eq!(Cpu::duration(30, 0, 1.0), 30);
        assert_eq!(Cpu::duration(30, 15, 0.75), 60);
    }

    #[test]
    fn a_turn_takes_what_was_queued_when_it_started() {
        let mut c = Cpu::new(1);
        c.inbox.extend([Input::Start, Input::Start, Input::Start]);
        c.inbox.pop_front();
        assert!(c.turn_starts(), "the first input wakes the processor");
        c.inbox.push_back(Input::Start); // arrives during the turn
        for _ in 0..2 {
            c.inbox.pop_front();
            assert!(!c.turn_starts());
        }
        c.inbox.pop_front();
        assert!(c.turn_starts(), "the late arrival starts the next turn");
        c.crash();
        c.inbox.push_back(Input::Start);
        c.inbox.pop_front();
        assert!(c.turn_starts());
    }

    #[test]
    fn fractions_of_a_microsecond_add_up() {
        let mut c = Cpu::new(1);
        let charged: Time = (0..10).map(|_| c.whole(0.4)).sum();
        assert_eq!(charged, 4);
        assert_eq!(c.whole(7.0), 7);
    }

    #[test]
    fn the_default_table_charges_what_it_always_did() {
        let t = ServiceTable::default();
        for input in [Input::Start, Input::Persisted { token: 1 }] {
            let p = t.begin(&input, 500, true);
            assert_eq!(t.end(p, &[], 500), t.cost(&input) as f64);
        }
    }

    #[test]
    fn operation_costs_charge_requests_by_kind_and_accepts_by_the_writes_they_carry() {
        use bytes::Bytes;
        use stutter_core::Request;
        let t = ServiceTable {
            per_op: Some(OpCosts {
                leader_read: 20.0,
                leader_write: 30.0,
                follower_write: 10.0,
                speed: 0.5,
            }),
            ..ServiceTable::default()
        };
        let put = Request::new(
            1,
            1,
            Op::Put {
                key: Bytes::from_static(b"k"),
                value: Bytes::from_static(b"1"),
            },
        );
        let get = Request::new(
            1,
            2,
            Op::Get {
                key: Bytes::from_static(b"k"),
            },
        );
        let cost = |i: &Input| t.end(t.begin(i, 500, true), &[], 500);
        assert_eq!(cost(&Input::Request(put.clone())), 60.0);
        assert_eq!(cost(&Input::Request(get.clone())), 40.0);
        let accept = Input::Message {
            from: 0,
            msg: Message::Accept {
                ballot: stutter_core::Ballot(1),
                slot: stutter_core::Slot(1),
                value: Value::Batch(std::sync::Arc::new(vec![put.clone(), get, put])),
                committed: None,
            },
        };
        assert_eq!(cost(&accept), 40.0);
        assert_eq!(cost(&Input::Persisted { token: 1 }), 0.0);
    }

    #[test]
    fn step_costs_charge_wakeup_input_outputs_and_bytes() {
        use bytes::Bytes;
        use stutter_core::{Reply, Request};
        let mut messages = BTreeMap::new();
        messages.insert("Accepted".to_string(), 3.0);
        let t = ServiceTable {
            steps: Some(StepCosts {
                wakeup: 20.0,
                get: 1.0,
                write: 2.0,
                messages,
                message: 5.0,
                send: 1.5,
                reply: 2.5,
                input_kb: 1024.0,
                speed: 0.5,
                ..StepCosts::default()
            }),
            ..ServiceTable::default()
        };
        let put = Input::Request(Request::new(
            1,
            1,
            Op::Put {
                key: Bytes::from_static(b"k1"),
                value: Bytes::from_static(b"1"),
            },
        ));
        // 20 + 2 + 1024 × (2 + 100) / 1024, then a reply, at half speed.
        let p = t.begin(&put, 100, true);
        let out = [Output::Reply {
            client: 1,
            seq: 1,
            reply: Reply::Done,
        }];
        assert!((t.end(p, &out, 100) - 2.0 * (20.0 + 2.0 + 102.0 + 2.5)).abs() < 1e-9);
        let acc = Input::Message {
            from: 1,
            msg: Message::Accepted {
                ballot: stutter_core::Ballot(1),
                slot: stutter_core::Slot(1),
                ok: true,
            },
        };
        assert!((t.end(t.begin(&acc, 100, false), &[], 100) - 6.0).abs() < 1e-9);
        let hb = Input::Message {
            from: 1,
            msg: Message::Heartbeat {
                ballot: stutter_core::Ballot(1),
                last_executed: stutter_core::Slot(0),
                global_last_executed: stutter_core::Slot(0),
            },
        };
        assert!((t.end(t.begin(&hb, 100, false), &[], 100) - 10.0).abs() < 1e-9);
    }
}
