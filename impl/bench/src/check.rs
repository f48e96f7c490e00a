//! Whether an answer is a correct answer to the operation it answers.

use crate::text_target::Answer;
use crate::workload::{value_matches_key, Op};

/// Checks an answer. `preloaded`: every key was written before the run, so
/// a read must find a value, and that value must belong to the key.
pub fn check(op: &Op, answer: &Answer, preloaded: bool) -> Result<(), String> {
    match (op, answer) {
        (Op::Read { key }, Answer::Value(Some(v))) if value_matches_key(key, v) => Ok(()),
        (Op::Read { .. }, Answer::Value(None)) if !preloaded => Ok(()),
        (Op::Update { .. }, Answer::Written) => Ok(()),
        (op, a) => Err(format!("{op:?} answered {a:?}")),
    }
}
