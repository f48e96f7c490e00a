//! Injected node bugs: the negative controls of the simulation layers
//! (dsim/turmoil, dsim/madsim) and of the power-cut campaign. Each bug is
//! a mistake a real node could make, placed at one site of this crate;
//! the layers' tests show their checkers catch it.
//!
//! Built in only with the cargo feature `node-bugs`, and then chosen at
//! run time by the environment variable `STUTTER_NODE_BUG` (one name of
//! [`NodeBug::NAMES`]; unset: none), so that one build serves every
//! control instead of one build per bug. Without the feature [`active`]
//! is a constant `false` and every site compiles away: a real replica
//! carries none of this.

/// One injected bug; its name (for `STUTTER_NODE_BUG`) is in [`NodeBug::NAMES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeBug {
    /// The group commit acknowledges before it syncs (src/node/group_commit.rs).
    AckBeforeSync,
    /// Recovery replays a record without checking its CRC (src/wal/format.rs).
    AcceptTornTail,
    /// A re-established peer link drops the first message of every batch
    /// (src/node/peers.rs).
    DropOnReconnect,
    /// A replica that redirected a client keeps no route for its later
    /// requests (src/node/routes.rs).
    LostRedirectRoute,
}

impl NodeBug {
    /// Every bug with the name `STUTTER_NODE_BUG` gives it.
    pub const NAMES: [(NodeBug, &'static str); 4] = [
        (NodeBug::AckBeforeSync, "ack-before-sync"),
        (NodeBug::AcceptTornTail, "accept-torn-tail"),
        (NodeBug::DropOnReconnect, "drop-on-reconnect"),
        (NodeBug::LostRedirectRoute, "lost-redirect-route"),
    ];

    /// The bug `name` names, if any.
    pub fn from_name(name: &str) -> Option<NodeBug> {
        Self::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(b, _)| *b)
    }

    /// The name `STUTTER_NODE_BUG` gives this bug.
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(b, _)| *b == self)
            .map_or("", |(_, n)| n)
    }
}

/// The environment variable that chooses the injected bug.
pub const ENV: &str = "STUTTER_NODE_BUG";

/// Whether bug `b` is injected in this process. Without the feature
/// `node-bugs`: never (a constant the compiler folds away).
#[cfg(not(feature = "node-bugs"))]
#[inline]
pub const fn active(_b: NodeBug) -> bool {
    false
}

/// Whether bug `b` is injected in this process: `STUTTER_NODE_BUG` names
/// it (read once).
#[cfg(feature = "node-bugs")]
pub fn active(b: NodeBug) -> bool {
    chosen() == Some(b)
}

/// The bug `STUTTER_NODE_BUG` names, read at first use.
///
/// Panics on a name that is none of [`NodeBug::NAMES`]. Nothing a peer,
/// client or disk sends reaches this: only the test-only feature
/// `node-bugs` compiles it in, and a mistyped control must fail loudly
/// rather than run the correct node and pass without its bug.
#[cfg(feature = "node-bugs")]
#[allow(clippy::panic)] // test-only feature; see above
pub fn chosen() -> Option<NodeBug> {
    static CHOSEN: std::sync::OnceLock<Option<NodeBug>> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let name = std::env::var(ENV).ok().filter(|s| !s.is_empty())?;
        match NodeBug::from_name(&name) {
            Some(b) => Some(b),
            None => {
                let names: Vec<&str> = NodeBug::NAMES.iter().map(|(_, n)| *n).collect();
                panic!(
                    "{ENV}={name:?} names no injected node bug; the names are: {}",
                    names.join(", ")
                )
            }
        }
    })
}

/// A negative control's first step: the bug it is for must be the one
/// `STUTTER_NODE_BUG` injects, so that the control run without it (or
/// with another) fails loudly instead of passing on the correct node.
/// Panics otherwise, for the reason [`chosen`] gives.
#[cfg(feature = "node-bugs")]
pub fn require(bug: NodeBug) {
    assert_eq!(
        chosen(),
        Some(bug),
        "this negative control needs {ENV}={}",
        bug.name()
    );
}

#[cfg(test)]
mod tests {
    use super::NodeBug;

    #[test]
    fn every_name_round_trips() {
        for (b, n) in NodeBug::NAMES {
            assert_eq!(NodeBug::from_name(n), Some(b));
            assert_eq!(b.name(), n);
        }
        assert_eq!(NodeBug::from_name("ack_before_sync"), None);
    }
}
