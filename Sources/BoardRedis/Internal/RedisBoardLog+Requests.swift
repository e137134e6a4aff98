import BoardModel
import BoardSync

extension RedisBoardLog {
    /// What a command sent on a pipelined link asked, to handle its reply (`+Replies`).
    enum Request {
        case append(UInt64)
        case range(String)
        case loadCheckpoint(String)
        case recheck(String)
        case acquireLease(String)
        case commitCheckpoint(String, String)
        /// After a tail read from `start` returned entries: was the stream trimmed past `start`?
        case verify(String, String)
        case setAsset(AssetHash)
        case setChunk(AssetHash)
        case getAsset(AssetHash)
        case getChunks(AssetHash, size: Int)
        case author(String, AuthorshipRequest)
        case markReplicas(String)
        case clientID
        case unblock
        case publish
        case auth
        case read([String: String])
        /// A board's tombstone (`GET`), before its catch-up or again after a subscription.
        case tombstone(String)
        /// A delete's or undelete's steps (`RedisBoardLog+Deletion.swift`), by call.
        case countTombstones(Int)
        case delete(Int)
        case undelete(Int)
        /// `SADD`/`SREM` of the tombstones' set (best effort: it only counts them).
        case tombstoneSet
    }

    /// A pipelined link (commands or tail): its pipeline and the commands waiting for a reply.
    struct Channel {
        var pipeline = RedisPipeline()
        var requests: [RedisPipeline.Ticket: (request: Request, sentAt: Double)] = [:]
    }

    /// The pipelined links (the presence link has no pipeline).
    static let pipelined: [Link] = [.commands, .tail]

    /// Runs `body` on a pipelined link's channel, in place. `link` is never `.presence`.
    func withChannel<Result, Failure: Error>(_ link: Link, _ body: (inout Channel) throws(Failure) -> Result) throws(Failure) -> Result {
        assert(link != .presence, "the presence link has no pipeline")
        switch link {
        case .commands: return try body(&commandsChannel)
        case .tail, .presence: return try body(&tailChannel)
        }
    }

    /// Queues a command on a pipelined link and records what it asks.
    func send(_ request: Request, _ parts: [[UInt8]], on link: Link = .commands) {
        let now = self.now
        withChannel(link) { channel in
            channel.requests[channel.pipeline.send(parts)] = (request, now)
        }
    }

    func send(_ request: Request, strings parts: [String], on link: Link = .commands) {
        send(request, parts.map { Array($0.utf8) }, on: link)
    }
}
