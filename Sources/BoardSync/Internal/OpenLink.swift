import BoardCRDT
import BoardModel
import Foundation

/// Everything an open session holds beyond its byte queue: the data of `SyncSession`'s `open`
/// state. When the session closes this value is dropped whole, so nothing it queued (live
/// operations aside, which are flushed before a goodbye) can follow the ERROR or BYE.
struct OpenLink: Sendable {
    /// The peer's handshake.
    let peer: Hello
    /// Features both sides announced.
    let sharedCapabilities: UInt64
    let assetChunk: Int

    /// Live operations not yet framed: consecutive `send`s coalesce into one OPS frame.
    var pendingLive: [Op] = []
    /// What this session's live batches carried to the peer, and what the peer's carried here:
    /// linked batches (format 3) are encoded and decoded against them.
    var outgoingLink = BatchLink()
    var incomingLink = BatchLink()
    /// Presence waiting for output, latest per replica (a slow reader holds one per replica).
    var pendingPresence: [ReplicaID: Presence] = [:]
    /// The answer to the latest PING not yet sent: a peer that floods PINGs and never reads
    /// costs one pending PONG, not a queue of them.
    var pendingPong: UInt64?
    /// Assets being sent, lazily cut into chunks. `Data` shares the store's bytes: twenty peers
    /// fetching one image hold one copy, not twenty.
    var assetQueue: [(hash: AssetHash, data: Data, offset: Int)] = []
    /// Assets requested on this link and not yet fully received.
    var outstandingWants: Set<AssetHash> = []
    /// Assets queued or sent on this link: each crosses a link at most once.
    var sentAssets: Set<AssetHash> = []
    /// Token bucket for the peer's PRESENCE messages.
    /// Presences it may take (`presencePerSecond`, bursts of twice that), from its first one.
    var presenceBucket: TokenBucket?
    /// History requests from the peer the host has not answered yet (their ids), and the
    /// bucket that takes them (`historyRequestsPerSecond`, bursts of twice that).
    var peerHistoryRequests: Set<UInt64> = []
    var historyBucket: TokenBucket?
    /// History requests this side sent and has no answer to yet.
    var ownHistoryRequests: Set<UInt64> = []

    init(peer: Hello, capabilities: UInt64, assetChunk: Int) {
        self.peer = peer
        self.sharedCapabilities = peer.capabilities & capabilities
        self.assetChunk = assetChunk
    }

    /// The batch format the peer reads: 2 when both sides announced `Capabilities.packedPoints`.
    var batchFormat: UInt8 {
        sharedCapabilities & Capabilities.packedPoints != 0 ? OperationBatch.formatVersion : 1
    }

    var sendsLinkedBatches: Bool { sharedCapabilities & Capabilities.linkedBatches != 0 }
    var supportsPresence: Bool { sharedCapabilities & Capabilities.presence != 0 }
    var supportsHistory: Bool { sharedCapabilities & Capabilities.history != 0 }
    /// Whether the peer reads label operations; batches to one that does not leave them out.
    var readsLabels: Bool { sharedCapabilities & Capabilities.labels != 0 }

    /// Label operations held for a peer that does not read them, until their author's next
    /// operation goes with them (`OperationBatch.withoutLabelsHolding`); at most
    /// `maxHeldLabels` (beyond, the oldest are dropped: a gap the next handshake closes).
    var heldLabels: [Op] = []
    static let maxHeldLabels = 1_024

    /// `batch` as this peer may read it (without label operations unless it reads them); label
    /// operations that must wait for their author's next operation are kept in `heldLabels` and
    /// go in front of the next live batch.
    mutating func readable(_ batch: OperationBatch) -> OperationBatch {
        guard !readsLabels else { return batch }
        let (readable, held) = batch.withoutLabelsHolding()
        heldLabels += held
        if heldLabels.count > Self.maxHeldLabels { heldLabels.removeFirst(heldLabels.count - Self.maxHeldLabels) }
        return readable
    }

    /// Whether this link still means to send anything beyond the session's byte queue.
    var hasPending: Bool {
        !pendingLive.isEmpty || !pendingPresence.isEmpty || pendingPong != nil
            || assetQueue.contains { $0.data.count > $0.offset }
    }

    /// Bytes this link still means to send beyond the session's byte queue.
    var pendingCount: Int {
        pendingLive.count + pendingPresence.count * 64 + (pendingPong == nil ? 0 : 16)
            + assetQueue.reduce(0) { $0 + $1.data.count - $1.offset }
    }

    /// Frames a message, after any live operations waiting (the order of frames is kept).
    mutating func queue(_ message: Message, into outbox: inout [UInt8]) {
        flushLive(into: &outbox)
        outbox += message.frame().encoded()
    }

    mutating func flushLive(into outbox: inout [UInt8]) {
        guard !pendingLive.isEmpty else { return }
        let held = heldLabels
        heldLabels = []
        let batch = readable(OperationBatch(operations: held + pendingLive))
        pendingLive = []
        guard !batch.operations.isEmpty || batch.covers != nil else { return }
        // A batch left without its labels may have become a complete delta: self-contained.
        let bytes = sendsLinkedBatches && batch.covers == nil ? batch.encoded(linkedTo: &outgoingLink) : batch.encoded(format: batchFormat)
        outbox += Message.operations(bytes).frame().encoded()
    }

    /// Moves what waits (live operations, presence, the PONG, asset chunks up to about
    /// `maxBytes` of output) into `outbox`. Asset chunks are cut here, so a large asset never
    /// sits in memory twice.
    mutating func drain(into outbox: inout [UInt8], maxBytes: Int) {
        flushLive(into: &outbox)
        if !pendingPresence.isEmpty {
            let presences = pendingPresence.values.sorted { $0.replica < $1.replica }
            pendingPresence = [:]
            for presence in presences { queue(.presence(presence), into: &outbox) }
        }
        if let nonce = pendingPong {
            pendingPong = nil
            queue(.pong(nonce), into: &outbox)
        }
        while outbox.count < min(maxBytes, assetChunk * 2), !assetQueue.isEmpty {
            var item = assetQueue.removeFirst()
            let end = min(item.data.count, item.offset + assetChunk)
            let base = item.data.startIndex
            let chunk = AssetChunk(hash: item.hash, totalSize: UInt64(item.data.count), offset: UInt64(item.offset),
                                   bytes: Array(item.data[(base + item.offset)..<(base + end)]))
            queue(.assetChunk(chunk), into: &outbox)
            item.offset = end
            if end < item.data.count { assetQueue.insert(item, at: 0) }
        }
    }

    /// A message of the open phase: what it means for the host, or nil.
    mutating func handle(_ message: Message, receivedAt now: Double, limits: SessionLimits,
                         dropped: inout Int, outbox: inout [UInt8]) throws(SessionError) -> SessionEvent? {
        switch message {
        case .hello: throw SessionError(.unexpectedMessage, "a second HELLO")
        case .operations(let bytes):
            do {
                // Linked batches (format 3) read against what this peer sent before; the
                // self-contained formats do not touch the link.
                return .operations(try OperationBatch(decoding: bytes, link: &incomingLink))
            } catch {
                throw SessionError(.invalidOperations, "\(error)")
            }
        case .ack(let vector): return .acknowledged(vector)
        case .synced(let vector): return .synced(vector)
        case .want(let requests): return .assetsWanted(requests)
        case .assetChunk(let chunk):
            guard outstandingWants.contains(chunk.hash) else {
                throw SessionError(.unexpectedMessage, "asset \(chunk.hash.hex.prefix(12)) was not asked for")
            }
            if chunk.offset + UInt64(chunk.bytes.count) == chunk.totalSize { outstandingWants.remove(chunk.hash) }
            return .assetChunk(chunk)
        case .noAsset(let hash):
            outstandingWants.remove(hash)
            return .assetUnavailable(hash)
        case .refused(let code, let text, let operations):
            return .refused(SessionError(SessionError.Code(rawValue: code) ?? .notAuthor, text, remote: true), operations)
        case .ping(let nonce):
            pendingPong = nonce
            return nil
        case .pong: return nil
        case .presence(let presence):
            var bucket = presenceBucket ?? TokenBucket(rate: limits.presencePerSecond, burst: limits.presencePerSecond * 2, now: now)
            defer { presenceBucket = bucket }
            guard bucket.take(now: now) else {
                dropped += 1
                return nil
            }
            return .presence(presence)
        case .historyRequest(let request):
            return try takeHistoryRequest(request, now: now, limits: limits, outbox: &outbox)
        case .history(let answer):
            guard ownHistoryRequests.remove(answer.id) != nil else {
                throw SessionError(.unexpectedMessage, "a history answer (id \(answer.id)) to no request of this side")
            }
            return .history(answer)
        case .error, .bye: return nil
        }
    }

    /// A peer's history request: refused as a protocol violation when the peer did not announce
    /// the capability or reuses an id it is waiting on; answered `busy` here, without the host
    /// seeing it, beyond the requests in flight or per second; else handed to the host.
    private mutating func takeHistoryRequest(_ request: HistoryRequest, now: Double, limits: SessionLimits,
                                             outbox: inout [UInt8]) throws(SessionError) -> SessionEvent? {
        guard supportsHistory else {
            throw SessionError(.unexpectedMessage, "a history request, but the HELLOs did not both announce history")
        }
        guard !peerHistoryRequests.contains(request.id) else {
            throw SessionError(.unexpectedMessage, "a second history request with id \(request.id) before the first was answered")
        }
        var bucket = historyBucket ?? TokenBucket(rate: limits.historyRequestsPerSecond, burst: limits.historyRequestsPerSecond * 2, now: now)
        defer { historyBucket = bucket }
        if peerHistoryRequests.count >= limits.historyRequestsInFlight {
            queue(.history(.refusal(request, .busy, "\(limits.historyRequestsInFlight) history request(s) in flight on this connection, the limit; ask again once answered")), into: &outbox)
            return nil
        }
        guard bucket.take(now: now) else {
            queue(.history(.refusal(request, .busy, "more than \(Int(limits.historyRequestsPerSecond)) history requests a second on this connection; slow down")), into: &outbox)
            return nil
        }
        peerHistoryRequests.insert(request.id)
        return .historyRequested(request)
    }
}
