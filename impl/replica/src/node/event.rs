//! What the node's tasks send the protocol loop, and the bound of that
//! channel. Every other node module uses this one; it uses none of them.

use stutter_core::{Message, ReplicaId, Request};
use tokio::sync::{mpsc, oneshot};

use crate::wire::{ClientResponse, StatusInfo};

/// Bound of the protocol loop's input channel. Peer readers and client
/// sessions wait for room (`send().await`) and meanwhile stop reading
/// their sockets, so TCP pushes back on whoever sends too fast: a peer's
/// sender then drops messages from its own bounded queue (as a network
/// would; the core resends what matters) and a client waits. Nothing is
/// lost that was acknowledged: an input that is not read is not answered.
/// The loop takes up to this many inputs per turn anyway.
pub const EVENT_QUEUE: usize = 4096;

/// A reserved place in one client connection's reply queue. A session
/// reserves it before it hands a request to the loop (waiting, and so not
/// reading its socket, while the connection has its cap of requests in
/// flight); the loop then answers through it without ever waiting on a
/// slow client, and the answer cannot be refused for want of room.
pub type ReplySlot = mpsc::OwnedPermit<ClientResponse>;

pub enum Event {
    /// A message from the peer that authenticated the connection it came on.
    Peer {
        from: ReplicaId,
        msg: Message,
    },
    Client {
        reply: ReplySlot,
        req: Request,
    },
    Status(oneshot::Sender<StatusInfo>),
}

pub type Events = mpsc::Sender<Event>;
