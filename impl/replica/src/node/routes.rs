//! Which client connection waits for the reply to which request.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use stutter_core::{ClientId, Seq};
use tokio::time::Instant;

use super::event::ReplySlot;
use crate::wire::ClientResponse;

/// How long a client request may wait for its reply before the client is
/// told that its outcome is unknown.
pub const ROUTE_TIMEOUT: Duration = Duration::from_secs(10);

/// Routes of requests in flight, keyed by `(client, seq)`. Bounded: each
/// holds a reserved reply slot of its connection, so there are at most
/// `max_client_connections × max_inflight_per_connection` of them.
#[derive(Default)]
pub struct Routes {
    waiting: BTreeMap<(ClientId, Seq), (ReplySlot, Instant)>,
    last_sweep: Option<Instant>,
    /// Clients this replica redirected (only the injected bug
    /// `lost-redirect-route` keeps them).
    redirected: BTreeSet<ClientId>,
}

/// Injected bug `lost-redirect-route` (feature `node-bugs` with
/// `STUTTER_NODE_BUG=lost-redirect-route`,
/// for the simulation layers' teeth; never in a real build): once this
/// replica has redirected a client to the leader, it keeps no route for
/// that client's requests any more, so their replies are never sent. The
/// real mistake it models: a redirect treated as handing the client's
/// session over to the leader for good ("its replies come from there
/// now"), with the hand-over never undone, neither when the client comes
/// back nor when this replica becomes the leader itself. A client that
/// was redirected by a replica that later leads waits for every reply in
/// vain (its attempts time out; redirects from the others send it back).
fn bug_lost_redirect_route() -> bool {
    crate::node_bug::active(crate::node_bug::NodeBug::LostRedirectRoute)
}

impl Routes {
    /// Records who waits for `(client, seq)`. A route already there for the
    /// same request (a retry, perhaps on another connection) is answered
    /// `Unknown` at once: the request is in the core's hands and the newer
    /// route gets its reply; the older connection may retry too (executed
    /// at most once), and its slot is not held until the timeout.
    pub fn insert(&mut self, client: ClientId, seq: Seq, reply: ReplySlot) {
        if bug_lost_redirect_route() && self.redirected.contains(&client) {
            // The slot is dropped unanswered: the route is lost.
            return;
        }
        if let Some((old, _)) = self.waiting.insert((client, seq), (reply, Instant::now())) {
            old.send(ClientResponse::Unknown { client, seq });
        }
    }

    /// `client` was redirected to the leader (only the injected bug
    /// `lost-redirect-route` remembers it).
    pub fn redirected(&mut self, client: ClientId) {
        if bug_lost_redirect_route() {
            self.redirected.insert(client);
        }
    }

    /// The route of `(client, seq)`, removed.
    pub fn take(&mut self, client: ClientId, seq: Seq) -> Option<ReplySlot> {
        self.waiting.remove(&(client, seq)).map(|(r, _)| r)
    }

    /// A request proposed by a leader that lost its leadership may never be
    /// executed (the next leader can fill its slot with a no-op), so no
    /// reply would ever come. After [`ROUTE_TIMEOUT`] the client is told
    /// the outcome is unknown (a framed client retries with the same
    /// `(client, seq)`, which is safe); the route is dropped so it does not
    /// leak. Runs at most once a second.
    pub fn sweep_if_due(&mut self) {
        let now = Instant::now();
        if self
            .last_sweep
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            return;
        }
        self.last_sweep = Some(now);
        let stale: Vec<(ClientId, Seq)> = self
            .waiting
            .iter()
            .filter(|(_, (_, since))| now.duration_since(*since) > ROUTE_TIMEOUT)
            .map(|(k, _)| *k)
            .collect();
        for (client, seq) in stale {
            if let Some(r) = self.take(client, seq) {
                r.send(ClientResponse::Unknown { client, seq });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    #[tokio::test]
    async fn a_superseded_route_is_answered_unknown_and_frees_its_slot() {
        let (tx1, mut rx1) = mpsc::channel(1);
        let (tx2, mut rx2) = mpsc::channel(1);
        let mut routes = Routes::default();
        routes.insert(5, 1, tx1.clone().reserve_owned().await.unwrap());
        routes.insert(5, 1, tx2.clone().reserve_owned().await.unwrap());
        assert_eq!(
            rx1.recv().await,
            Some(ClientResponse::Unknown { client: 5, seq: 1 })
        );
        // The first connection's only slot is free again.
        assert!(tx1.try_reserve().is_ok());
        let r = routes.take(5, 1).unwrap();
        r.send(ClientResponse::Error("x".into()));
        assert_eq!(rx2.recv().await, Some(ClientResponse::Error("x".into())));
        assert!(routes.take(5, 1).is_none());
    }
}
