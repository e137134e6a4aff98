import BoardCRDT
import BoardModel

/// The live client's logic on top of a `SyncEndpoint`, sans-IO (no clock, no randomness, no
/// IO: the time and the jitter are passed in): what a client of one server knows and decides.
/// `LiveBoard` (BoardClient) drives one per board; the simulator drives one per client peer.
///
/// - Typed changes: `changes(to:)` gives what changed since the last call (BoardCRDT's
///   `ChangeTracker`), at the cost of the change.
/// - Acknowledgements: which of this replica's operations and images the server is known to
///   hold (`observe`, after every turn of the session), and what it said it dropped (REFUSED).
/// - Status: connecting, catching up, live, offline (retry at, attempt, last error), failed.
/// - Reconnects (`ClientEngine.Reconnect`): how a link's end is classified (a refusal retried,
///   refreshed once or terminal) and the backoff before the next attempt.
/// - Presence (`ClientEngine.PresenceThrottle`): throttled, coalesced, refreshed before expiry.
public struct ClientEngine: Sendable {
    /// Where the client's connection stands (times in the caller's monotonic seconds).
    public enum Phase: Sendable, Equatable {
        case idle
        case connecting(attempt: Int)
        case catchingUp
        case live
        case offline(retryAt: Double, attempt: Int, lastError: String)
        /// The server refused in a way retrying cannot fix (`Reconnect.Decision.stop`).
        case failed(SessionError)
        case closed
    }

    public let replicaID: ReplicaID
    public var phase: Phase = .idle
    /// Why the last connection ended (nil until one has).
    public var lastLinkError: String?
    /// How many of this replica's operations a server is known to hold: what a handshake or an
    /// acknowledgement said since the engine began (a client opened again counts its earlier
    /// edits as unacknowledged until a server says it has them).
    public private(set) var serverHolds: UInt64 = 0
    /// The images this replica's own operations show, by sequence number (ascending): those
    /// beyond `serverHolds` may not have reached the server.
    private var ownImages: [(seq: UInt64, hash: AssetHash)]
    /// Images the server asked for whose bytes are not all written (sticky across links).
    public private(set) var imagesInFlight: Set<AssetHash> = []
    /// Operations of other replicas the server said it dropped (REFUSED), and why: kept until
    /// the server holds them.
    public private(set) var serverRefusal: (operations: VersionVector, error: SessionError, count: Int)?
    /// The board as last given out by `changes(to:)`.
    private var view: ChangeTracker
    /// The replica's version vector at the last `changes(to:)`.
    public private(set) var vector: VersionVector
    /// Counts the non-empty changes given out.
    public private(set) var version: UInt64 = 0
    /// What this replica says it is doing, and when it is due to go out.
    public var presence = PresenceThrottle()

    /// An engine for `replica`, whose board is `snapshot` now (the first changes are relative to it).
    public init(replica: Replica, snapshot: BoardSnapshot) {
        replicaID = replica.id
        vector = replica.versionVector
        var others = replica.versionVector.entries
        others[replica.id] = 0
        ownImages = replica.operations(since: VersionVector(others)).operations.compactMap { op in
            op.id.replica == replica.id ? op.payload.asset.map { (op.id.seq, $0) } : nil
        }
        view = ChangeTracker(replica, snapshot: snapshot)
    }

    // MARK: Typed changes

    /// What changed on the board since the last call (empty: nothing shown changed, though
    /// the vector may have moved); bumps `version` when not empty.
    public mutating func changes(to replica: Replica) -> BoardChanges {
        let changes = view.update(to: replica, since: vector)
        vector = replica.versionVector
        if !changes.isEmpty { version += 1 }
        return changes
    }

    /// The replicas whose operations `replica` holds beyond what the last `changes(to:)` saw
    /// (the origins of a remote change).
    public func newReplicas(in replica: Replica) -> [ReplicaID] {
        replica.versionVector.entries.filter { $0.value > vector[$0.key] }.map(\.key).sorted { $0.rawValue < $1.rawValue }
    }

    // MARK: Acknowledgements

    /// This replica made `operations` (its images count as unacknowledged from now).
    public mutating func noteOwnOperations(_ operations: [Op]) {
        for op in operations where op.id.replica == replicaID {
            if let hash = op.payload.asset { ownImages.append((op.id.seq, hash)) }
        }
    }

    /// This replica's operations the server has not acknowledged, of the `held` it made.
    public func unacknowledgedOperations(held: UInt64) -> Int {
        Int(held &- min(serverHolds, held))
    }

    /// Images this replica's edits show that may not have reached the server.
    public var unacknowledgedImages: Int {
        // The first own image beyond what the server holds (ascending by sequence number).
        var low = 0, high = ownImages.count
        while low < high {
            let middle = (low + high) / 2
            if ownImages[middle].seq <= serverHolds { low = middle + 1 } else { high = middle }
        }
        if low == ownImages.count { return imagesInFlight.count }
        var waiting = imagesInFlight
        for entry in ownImages[low...] { waiting.insert(entry.hash) }
        return waiting.count
    }

    /// Operations of other replicas the server dropped and still lacks.
    public var refusedOperations: Int { serverRefusal?.count ?? 0 }

    /// The session `id` with the server, after a turn of the endpoint: notes what the server
    /// holds, the images in flight and what it refused. Returns nil while the session is not
    /// open, else whether the server's catch-up is done (its SYNCED arrived). `held`: the
    /// replica's version vector now.
    package mutating func observe(_ session: SyncSession, hub: BoardHub?, id: SessionID, held: VersionVector) -> Bool? {
        guard session.isOpen, let peer = session.peer else { return nil }
        let acknowledged = hub?.acknowledged(by: id)?[replicaID] ?? 0
        serverHolds = max(peer.version[replicaID], acknowledged)
        // Sticky across links: an image the server asked for is waiting until this link has
        // taken all its bytes (a dropped link's is asked for again).
        let queued = Set(session.queuedAssets)
        let sent = session.sentAssets
        imagesInFlight = imagesInFlight.filter { queued.contains($0) || !sent.contains($0) }.union(queued)
        let synced = hub?.hasSynced(id) ?? false
        if synced, serverHolds >= held[replicaID] {
            // A server asks for an image as it merges the operation showing it, before
            // acknowledging that: one that holds every operation of ours and has not asked
            // this link for an image an earlier link was sending has it.
            imagesInFlight = imagesInFlight.filter { queued.contains($0) }
        }
        noteRefusal(hub?.refusal(from: id), serverHolds: (hub?.acknowledged(by: id) ?? .empty).merged(with: peer.version), held: held)
        return synced
    }

    /// A live link's look at what the server dropped: kept until the server holds those
    /// operations (their owner synced them), across links.
    public mutating func noteRefusal(_ refusal: (operations: VersionVector, error: SessionError)?, serverHolds: VersionVector, held: VersionVector) {
        let operations = (serverRefusal?.operations ?? .empty).merged(with: refusal?.operations ?? .empty)
        let counts = refusedCounts(operations, held: held, serverHolds: serverHolds)
        let latest = refusal?.error ?? serverRefusal?.error
        serverRefusal = counts.isEmpty || latest == nil ? nil : (operations, latest!, counts.values.reduce(0, +))
    }

    /// Of the replicas the server said it dropped operations of, how many operations of each
    /// this side holds and the server still lacks (this replica's own never count: refusing
    /// those closes the session).
    public func refusedCounts(_ operations: VersionVector, held: VersionVector, serverHolds: VersionVector) -> [ReplicaID: Int] {
        var counts: [ReplicaID: Int] = [:]
        for replica in operations.entries.keys where replica != replicaID && held[replica] > serverHolds[replica] {
            counts[replica] = Int(held[replica] - serverHolds[replica])
        }
        return counts
    }

    // MARK: Classifying a session's end

    /// What of a session's close reason decides the next step: the server's ERROR, or an
    /// error this side found that retrying cannot fix. Other errors found here are the link's
    /// trouble: nil, retried.
    public static func refusal(_ reason: SessionError?) -> SessionError? {
        guard let reason, reason.remote || reason.recovery == .stop || exceedsOwnLimit(reason) else { return nil }
        return reason
    }

    /// The server sent more than this client's limits allow (frame, image size, image count):
    /// the same server would send it again, so the client stops.
    public static func exceedsOwnLimit(_ reason: SessionError) -> Bool {
        !reason.remote && [.frameTooLarge, .assetTooLarge, .limitReached].contains(reason.code)
    }
}
