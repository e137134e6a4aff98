import BoardCRDT
import BoardModel

/// Everything a hub knows about the peer behind one session, in one record: removing a session
/// is one assignment (`peers[id] = nil`) plus the board-wide tables that name it (presences,
/// asset fetches), so no per-peer field can be forgotten and leak.
struct HubPeer {
    var session: SyncSession

    // Access (servers with access control; BoardHub+Access.swift, BoardHub+Authorship.swift).
    /// Its token allows reading only.
    var readOnly = false
    /// Its token's subject (nil: no access control).
    var subject: String?
    /// A trusted relay (a peer token): it may carry any replica's operations and presence.
    var relay = false
    /// The replica id it said HELLO under (the only one it may bind).
    var helloReplica: ReplicaID?

    // Phase (BoardHub+Handshake.swift).
    /// Its HELLO, unanswered while a replication layer holds greetings (`holdsGreetings`).
    var heldGreeting: Hello?
    /// Batches held, in order, while the shared log decides its authorship (nil: none held).
    var heldBatches: [OperationBatch]?
    /// Bytes of its handshake delta sent and not yet acknowledged (flow control that also
    /// counts what sits in kernel socket buffers).
    var deltaInFlight = 0
    /// Bytes of its output the host's transport holds, not yet written (as the host last said,
    /// `noteTransportQueued`), counted against `maxQueuedOutput`.
    var transportQueued = 0

    // Versions (BoardHub+Merge.swift).
    /// What it acknowledged having merged durably.
    var acknowledged: VersionVector?
    /// A lower bound of what it holds: its handshake vector merged with its acks.
    var known: VersionVector?
    /// It has sent everything it held when the session began (SYNCED).
    var synced = false
    /// Operations of it merged and waiting for the next group commit's sync before their ACK.
    var awaitingSync = false
    /// Rate limit of its live operations (`maxOperationsPerSecond`).
    var bucket: TokenBucket?
    /// Operations of this side it said it dropped (REFUSED, merged over the session) and why.
    var refused: (operations: VersionVector, error: SessionError)?

    // Assets (BoardHub+Assets.swift).
    /// Assets it said it does not have, and when it may be asked again: it may get them later
    /// (from their uploader, reconnecting) while this link stays up, and nothing in the protocol
    /// tells the asker so. The wait doubles per hash from `assetRetryFirst` to `assetRetryMax`.
    var unavailable: [AssetHash: (askAgainAt: Double, wait: Double)] = [:]

    init(session: SyncSession) {
        self.session = session
    }
}
