//! How the world names its links and nodes and where a packet goes next: the vocabulary
//! shared by the world (which routes) and the nodes (which ask to be routed), so neither
//! depends on the other's internals.

/// Index of a link in the world.
pub type LinkId = u32;
/// Index of a node in the world.
pub type NodeId = u32;

/// One step of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop {
    /// Onto a link.
    Link(LinkId),
    /// Into a node.
    Node(NodeId),
}

/// Where an outgoing packet goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// The first hop of its flow's route (the node originates it).
    Start,
    /// The hop after this one in its flow's route.
    After(Hop),
    /// This hop, already resolved.
    To(Hop),
}
