//! When each piece of a replica's long-lived state was allocated, in the
//! collector's young epochs (`Collector::epoch`), so that what dies is
//! released from the generation that holds it: a value overwritten before
//! the next young collection never survives one. Also the log's entries,
//! which die when the log is trimmed, by the rule of the system modelled.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;

use stutter_core::Time;

use super::LogTrim;

/// The epoch of each key's current value, for keys written in the run
/// (a preloaded value never written is as old as the data set). A fixed
/// hasher: the same run every time.
#[derive(Default)]
pub(crate) struct KeyAges {
    born: HashMap<u64, u64, BuildHasherDefault<DefaultHasher>>,
}

impl KeyAges {
    /// `key` gets a value born at `epoch`: returns when the value it
    /// replaces was born, if in this run.
    pub(crate) fn write(&mut self, key: u64, epoch: u64) -> Option<u64> {
        self.born.insert(key, epoch)
    }
}

struct Entry {
    at: Time,
    slot: u64,
    born: u64,
    bytes: u64,
}

/// The log's live entries, oldest first (one per step and epoch).
#[derive(Default)]
pub(crate) struct Log {
    entries: VecDeque<Entry>,
    /// Bytes logged since the last trim (`LogTrim::Bytes`), and when the
    /// last trim was (`LogTrim::Interval`).
    since_trim: u64,
    last_trim: Time,
}

impl Log {
    pub(crate) fn new(now: Time) -> Log {
        Log {
            last_trim: now,
            ..Log::default()
        }
    }

    /// A request executed in `slot` logged `bytes` born at `born`.
    pub(crate) fn append(&mut self, at: Time, slot: u64, born: u64, bytes: u64) {
        self.since_trim += bytes;
        if let Some(e) = self.entries.back_mut() {
            if e.slot == slot && e.born == born {
                e.bytes += bytes;
                return;
            }
        }
        self.entries.push_back(Entry {
            at,
            slot,
            born,
            bytes,
        });
    }

    /// The protocol trimmed up to `slot`: `(bytes, born)` released, into
    /// `out` (with `LogTrim::Core` only).
    pub(crate) fn trimmed(&mut self, rule: LogTrim, slot: u64, out: &mut Vec<(u64, Option<u64>)>) {
        if rule == LogTrim::Core {
            self.release(out, |e| e.slot <= slot);
        }
    }

    /// The time- and size-driven rules, at `now`.
    pub(crate) fn tick(&mut self, rule: LogTrim, now: Time, out: &mut Vec<(u64, Option<u64>)>) {
        match rule {
            LogTrim::Core => {}
            LogTrim::Bytes { bytes } => {
                if self.since_trim >= bytes.max(1) {
                    self.since_trim = 0;
                    self.release(out, |_| true);
                }
            }
            LogTrim::Interval { interval } => {
                if now >= self.last_trim + interval.max(1) {
                    let before = self.last_trim;
                    self.last_trim = now;
                    self.release(out, |e| e.at < before);
                }
            }
        }
    }

    fn release(&mut self, out: &mut Vec<(u64, Option<u64>)>, dead: impl Fn(&Entry) -> bool) {
        while let Some(e) = self.entries.front() {
            if !dead(e) {
                break;
            }
            out.push((e.bytes, Some(e.born)));
            self.entries.pop_front();
        }
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_written_twice_reports_its_previous_value_s_epoch() {
        let mut k = KeyAges::default();
        assert_eq!(k.write(7, 3), None);
        assert_eq!(k.write(7, 5), Some(3));
        assert_eq!(k.write(8, 5), None);
    }

    #[test]
    fn each_trim_rule_releases_the_oldest_entries_with_their_epochs() {
        let mut out = Vec::new();
        let mut core = Log::new(0);
        core.append(10, 1, 0, 100);
        core.append(10, 1, 0, 50);
        core.append(20, 2, 1, 70);
        core.tick(LogTrim::Core, 1_000_000, &mut out);
        assert!(out.is_empty());
        core.trimmed(LogTrim::Core, 1, &mut out);
        assert_eq!(out, vec![(150, Some(0))]);
        assert_eq!(core.bytes(), 70);

        out.clear();
        let rule = LogTrim::Bytes { bytes: 200 };
        let mut by_bytes = Log::new(0);
        by_bytes.append(1, 1, 0, 150);
        by_bytes.tick(rule, 1, &mut out);
        assert!(out.is_empty());
        by_bytes.append(2, 2, 1, 60);
        by_bytes.tick(rule, 2, &mut out);
        assert_eq!(out, vec![(150, Some(0)), (60, Some(1))]);

        out.clear();
        let rule = LogTrim::Interval { interval: 100 };
        let mut by_time = Log::new(0);
        by_time.append(50, 1, 0, 10);
        by_time.tick(rule, 100, &mut out);
        // The first round trims what came before the start: nothing.
        assert!(out.is_empty());
        by_time.append(150, 2, 1, 20);
        by_time.tick(rule, 200, &mut out);
        // The second trims what was logged before the first round.
        assert_eq!(out, vec![(10, Some(0))]);
        assert_eq!(by_time.bytes(), 20);
    }
}
