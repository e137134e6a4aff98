import BoardCRDT

/// Everything an endpoint knows of one connection, in one record (`SyncEndpoint.links`): its
/// phase with the data of that phase, the dial target it serves and its token's grant. A
/// closed connection is one removal; a hub holds the session once it is attached.
struct EndpointLink {
    enum Phase {
        /// A dial in progress (`dialing(_:as:)`): nothing to say or hear yet.
        case connecting
        /// Waiting for its HELLO, or refused and draining its ERROR: the session lives here.
        case handshaking(SyncSession)
        /// Attached to a board's hub, which holds its session.
        case attached(board: String)
        /// Only while `SyncEndpoint.withHandshaking` has the session out of the record (so
        /// that its buffers are not copied when it changes).
        case lent
    }

    var phase: Phase
    /// The dial target this connection serves (a peer's outbound link), if any.
    var dialTarget: Int?
    /// Its token's grant, from the moment it attaches with one (access control).
    var grant: AccessGrant?

    /// The board it is attached to, if it is.
    var board: String? {
        if case .attached(let board) = phase { return board }
        return nil
    }

    var isHandshaking: Bool {
        if case .handshaking = phase { return true }
        return false
    }
}
