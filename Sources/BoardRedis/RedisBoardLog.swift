import BoardCRDT
import BoardModel
import BoardSync
import Foundation

/// The scale-out layer, sans-IO (docs/SCALE-OUT.md): keeps the boards a sync server hosts in
/// Redis streams shared by several servers. It attaches to each open board's hub and:
///
/// - appends what the hub's sessions sent (`XADD bs:{board}:log * n NODE o BATCH`) and lets the
///   hub acknowledge it only once Redis answered; a failed or unanswered append is sent again
///   until Redis takes it (operations are idempotent, so a duplicate is harmless);
/// - reads a board's stream from the start when it opens (catch-up), then tails every open
///   board's stream with one blocking `XREAD` and merges what other servers wrote;
/// - stores uploaded images under `bs:asset:{sha256}` and fetches images no session can offer.
///
/// It speaks over two links a driver owns (`RedisCluster` over TCP; a simulator could drive a
/// simulated log): `commands` (pipelined) and `tail` (the blocking read). Bytes and `now` go in,
/// bytes come out; it reads no clock and no socket.
public final class RedisBoardLog {
    public enum Link: Sendable, CustomStringConvertible, CaseIterable {
        /// Pipelined commands; the blocking tail read; the presence subscription.
        case commands, tail, presence
        public var description: String {
            switch self {
            case .commands: return "commands"
            case .tail: return "tail"
            case .presence: return "presence"
            }
        }
    }

    public struct Options {
        /// Written with every entry; entries a server wrote itself are not merged again.
        public var node: String
        public var keyPrefix = "bs"
        /// How long one `XREAD` blocks (ms) and how many entries one read or range returns.
        public var blockMilliseconds = 2000
        public var readCount = 512
        /// After an error reply (`-LOADING`, `-OOM`, ...), the command is sent again this much later.
        public var retryDelay = 0.25
        /// A command unanswered this long (s) means the link is dead: the driver drops it.
        public var replyTimeout = 10.0
        /// How long to keep asking Redis for an image another server has not stored yet.
        public var assetWait = 30.0
        /// Images larger than this are stored in chunks of this size (one huge value would hold
        /// up Redis's single thread while it is written or read).
        public var assetChunkBytes = 1 << 20
        /// A server that has seen this many entries of a board since its last checkpoint tries
        /// to write a new one (0: never).
        public var checkpointEvery = 2000
        /// The compaction lease's lifetime (ms): a compactor that stalls longer is fenced off.
        public var leaseMilliseconds = 30_000
        /// Entries this much older (ms) than a checkpoint are trimmed from the stream; servers
        /// that fell further behind reload from the checkpoint.
        public var retentionMilliseconds = 60_000

        public var log: (String) -> Void = { _ in }
        /// Sent first on every link (`AUTH [user] password`) when Redis requires one
        /// (`requirepass`, or an ACL user).
        public var password: String?
        public var user: String?
        /// Authorship is decided here, once for every server (servers with access control):
        /// each hub asks the board's `authors` hash through `authorScript` instead of its own
        /// `sync/authors`, and every append also records its authors in the board's `replicas`
        /// set (`appendScript`), so no replica id with operations in the log can be taken over.
        public var sharesAuthorship = false
        /// How log lines, and clients the server turns away, name this Redis (the driver sets
        /// "Redis at HOST:PORT"). Never holds a password.
        public var redisName = "Redis"

        public init(node: String) {
            self.node = node
        }
    }

    public let options: Options
    /// A planted bug for the cluster simulation's oracles: tickets complete (sessions are
    /// acknowledged) without waiting for Redis to take their appends. Never set outside it.
    @_spi(Mutations) public var acknowledgesBeforeRedis = false
    /// Called after the log changed a board's hub (merged operations, acknowledgements, images):
    /// the host writes that board's session output.
    public var onHubChanged: ((String) -> Void)?
    /// Called when commands were queued (a hub handed over operations, say): the driver writes
    /// them.
    public var onOutput: (() -> Void)?

    // MARK: State

    private var links: [Link: RedisPipeline] = [.commands: RedisPipeline(), .tail: RedisPipeline()]
    private var up: Set<Link> = []
    private enum Request {
        case append(UInt64)
        case range(String)
        case loadCheckpoint(String)
        case recheck(String, String?)
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
    }
    private var requests: [Link: [RedisPipeline.Ticket: (request: Request, sentAt: Double)]] = [.commands: [:], .tail: [:]]

    private struct Append {
        let board: String
        let bytes: [UInt8]
        /// The replica ids of its operations, hex (for the `replicas` set).
        var authors: [String] = []
        var sent = false
        var notBefore = 0.0
    }
    /// Appends Redis has not confirmed, by sequence number (sent again, in order, after errors
    /// and reconnects).
    private var appends: [UInt64: Append] = [:]
    private var nextAppend: UInt64 = 0

    private struct Ticket {
        let id: UInt64
        let board: String
        var waitingFor: Set<UInt64>
    }
    /// Hub tickets in the order they were issued; each completes when its appends are confirmed
    /// and every earlier ticket has completed.
    private var tickets: [Ticket] = []
    private var nextTicket: UInt64 = 0

    private struct BoardState {
        let hub: BoardHub
        var lastID = "0-0"
        var caughtUp = false
        var rangeInFlight = false
        var notBefore = 0.0
        /// Catch-up: what the stream held (to find operations only this server's cache has).
        var streamVector = VersionVector.empty
        /// Catch-up starts by loading the checkpoint; `checkpointID` is the one loaded (nil:
        /// none yet), re-checked once the stream has been read.
        var checkpointLoaded = false
        var checkpointID: String?
        /// Entries seen since the last checkpoint, and whether one is being written.
        var entriesSinceCheckpoint = 0
        var compacting = false
        /// Tail reads whose start has not been checked against the trim point yet: until it is,
        /// this server may have missed trimmed entries, so it writes no checkpoint.
        var unverifiedReads = 0
    }
    private var boards: [String: BoardState] = [:]
    private var tailClientID: Int64?
    private var readInFlight = false
    private var readNotBefore = 0.0
    /// Boards the outstanding XREAD does not cover yet (it is unblocked to pick them up).
    private var unblockSent = false

    private struct AuthorKey: Hashable {
        let board: String
        let request: AuthorshipRequest
    }
    /// Authorship requests of hubs, until Redis answered them.
    private var authorRequests: [AuthorKey: (sent: Bool, notBefore: Double)] = [:]
    /// Replica ids a board's hub holds, to be added to its `replicas` set after catch-up (the
    /// log may hold operations appended without `appendScript`: before authorship was shared).
    private var replicaMarks: [String: (replicas: [String], sent: Bool, notBefore: Double)] = [:]

    private var assetSets: [AssetHash: (data: Data, sent: Bool, notBefore: Double)] = [:]
    private var assetGets: [AssetHash: (boards: Set<String>, giveUpAt: Double, sent: Bool, notBefore: Double)] = [:]
    private var now = 0.0
    /// The presence link (SUBSCRIBE mode: messages arrive unasked, so no pipeline).
    private var presenceDecoder = RESPDecoder()
    private var presenceOutput: [UInt8] = []
    private var subscribed: Set<String> = []
    /// Why Redis cannot serve the boards, by source ("Storage trouble", below).
    private var trouble = TroubleState()

    /// Statistics.
    public private(set) var entriesAppended = 0
    public private(set) var entriesMerged = 0

    public init(options: Options) {
        self.options = options
    }

    // MARK: Boards

    /// Starts replicating an open board: its stream is read from the start, then tailed.
    public func attach(_ board: String, hub: BoardHub, now: Double) {
        self.now = now
        boards[board] = BoardState(hub: hub)
        hub.replicate = { [weak self] batches in self?.replicate(board, batches) ?? 0 }
        hub.onAssetStored = { [weak self] hash, data in self?.storeAsset(hash, data) }
        hub.fetchAsset = { [weak self] hash in self?.fetchAsset(hash, for: board) }
        hub.publishPresence = { [weak self] presence in self?.publish(presence, on: board) }
        if options.sharesAuthorship {
            hub.sharedAuthorship = { [weak self] request in self?.askAuthorship(request, on: board) }
        }
        hub.holdsGreetings = true  // until the stream has been read
        hub.storageTrouble = storageTrouble  // while Redis cannot serve, HELLOs are turned away
        options.log("board '\(board)': reading \(streamKey(board)) from Redis")
        pump()
    }

    /// Stops replicating a board (it closed). Appends it handed over are still delivered.
    public func detach(_ board: String) {
        guard let state = boards.removeValue(forKey: board) else { return }
        state.hub.replicate = nil
        state.hub.onAssetStored = nil
        state.hub.fetchAsset = nil
        state.hub.holdsGreetings = false
        state.hub.storageTrouble = nil
        state.hub.publishPresence = nil
        state.hub.sharedAuthorship = nil
        authorRequests = authorRequests.filter { $0.key.board != board }
        replicaMarks[board] = nil
        if subscribed.remove(board) != nil, up.contains(.presence) {
            presenceOutput += RESPValue.command("UNSUBSCRIBE", presenceChannel(board))
        }
    }

    /// Whether a board's stream has been read up to its end once since it was attached.
    public func isCaughtUp(_ board: String) -> Bool { boards[board]?.caughtUp ?? false }

    /// Appends waiting for Redis (sent or not).
    public var unconfirmedAppends: Int { appends.count }

    private func streamKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:log" }
    private var authCommand: [[UInt8]]? {
        guard let password = options.password else { return nil }
        return [Array("AUTH".utf8)] + (options.user.map { [Array($0.utf8)] } ?? []) + [Array(password.utf8)]
    }

    private func presenceChannel(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:presence" }
    private func checkpointKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:ckpt" }
    private func leaseKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:lease" }
    private func epochKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:epoch" }
    private func assetKey(_ hash: AssetHash) -> String { "\(options.keyPrefix):asset:\(hash.hex)" }
    private func authorsKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:authors" }
    private func authoredKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:authored" }
    private func replicasKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:replicas" }
    static func hex(_ replica: ReplicaID) -> String { String(replica.rawValue, radix: 16) }

    private func askAuthorship(_ request: AuthorshipRequest, on board: String) {
        authorRequests[AuthorKey(board: board, request: request)] = (false, 0)
        pump()
    }

    private func replicate(_ board: String, _ batches: [OperationBatch]) -> UInt64 {
        nextTicket += 1
        var waitingFor: Set<UInt64> = []
        for batch in batches where !batch.operations.isEmpty || batch.covers != nil {
            nextAppend += 1
            appends[nextAppend] = Append(board: board, bytes: batch.encoded(), authors: options.sharesAuthorship ? Self.authors(of: batch) : [])
            waitingFor.insert(nextAppend)
        }
        tickets.append(Ticket(id: nextTicket, board: board, waitingFor: acknowledgesBeforeRedis ? [] : waitingFor))
        let ticket = nextTicket
        // A ticket with nothing to append completes after the ones before it (at the end of
        // this turn: the hub records it once this returns).
        pump()
        return ticket
    }

    private func storeAsset(_ hash: AssetHash, _ data: Data) {
        assetSets[hash] = (data, false, 0)
        pump()
    }

    private func fetchAsset(_ hash: AssetHash, for board: String) {
        var entry = assetGets[hash] ?? (boards: [], giveUpAt: now + options.assetWait, sent: false, notBefore: 0)
        entry.boards.insert(board)
        assetGets[hash] = entry
        pump()
    }

    // MARK: Driving

    /// A link connected: what was waiting is sent on it.
    public func linkUp(_ link: Link, now: Double) {
        self.now = now
        if link == .presence {
            presenceDecoder = RESPDecoder()
            presenceOutput = authCommand.map { RESPValue.command($0) } ?? []
            subscribed = []
            up.insert(link)
            pump()
            return
        }
        _ = links[link]!.reset()
        requests[link] = [:]
        up.insert(link)
        if let auth = authCommand {
            // Pipelined: Redis runs commands in order, so everything after it is authenticated.
            requests[link]![links[link]!.send(auth)] = (.auth, now)
        }
        if link == .tail {
            tailClientID = nil
            readInFlight = false
            requests[.tail]![links[.tail]!.send("CLIENT", "ID")] = (.clientID, now)
        }
        pump()
        // Connected: its trouble is over, unless it stopped answering before and now has a
        // command out whose reply will tell.
        trouble.connected(link, waitingForReply: !requests[link]!.isEmpty)
        troubleChanged()
    }

    /// A link dropped (or the driver gave up on it): every command on it may or may not have
    /// taken effect, so appends and image stores are sent again once it is back.
    public func linkDown(_ link: Link, now: Double, reason: String) {
        self.now = now
        guard up.remove(link) != nil else { return }
        options.log("Redis \(link) link lost: \(reason)")
        if link == .presence {
            subscribed = []
            presenceOutput = []
            return
        }
        _ = links[link]!.reset()
        for (_, entry) in requests[link]! { forget(entry.request) }
        requests[link] = [:]
        if link == .tail {
            readInFlight = false
            tailClientID = nil
        }
    }

    private func forget(_ request: Request) {
        switch request {
        case .append(let seq): appends[seq]?.sent = false
        case .range(let board), .loadCheckpoint(let board), .recheck(let board, _): boards[board]?.rangeInFlight = false
        case .acquireLease(let board), .commitCheckpoint(let board, _): boards[board]?.compacting = false
        case .verify(let board, _):
            boards[board]?.unverifiedReads -= 1
            reload(board, because: "a tail read could not be checked against the trim point")
        case .setAsset(let hash), .setChunk(let hash): assetSets[hash]?.sent = false
        case .getAsset(let hash), .getChunks(let hash, _): assetGets[hash]?.sent = false
        case .author(let board, let request): authorRequests[AuthorKey(board: board, request: request)]?.sent = false
        case .markReplicas(let board): replicaMarks[board]?.sent = false
        case .read: readInFlight = false
        case .unblock: unblockSent = false
        case .clientID, .publish, .auth: break
        }
    }

    /// Bytes to write on a link.
    public func takeOutput(_ link: Link) -> [UInt8] {
        if link == .presence {
            defer { presenceOutput = [] }
            return presenceOutput
        }
        return links[link]!.takeOutput()
    }

    /// Bytes read from a link. Throws when they are not RESP or do not line up with the
    /// commands sent: the driver drops the link.
    public func receive(_ link: Link, _ bytes: [UInt8], now: Double) throws(RESPError) {
        self.now = now
        if link == .presence {
            presenceDecoder.append(bytes)
            while let value = try presenceDecoder.next() { presenceMessage(value) }
            return
        }
        let replies = try links[link]!.receive(bytes)
        defer { troubleChanged() }
        for (ticket, value) in replies {
            guard let entry = requests[link]!.removeValue(forKey: ticket) else { continue }
            noteReply(to: entry.request, value, on: link)
            handle(entry.request, value)
        }
        completeTickets()
        pump()
    }

    /// Whether the oldest ticket can complete (its appends are confirmed).
    private var ticketReady: Bool {
        tickets.first.map { $0.waitingFor.allSatisfy { appends[$0] == nil } } ?? false
    }

    /// When a command's reply is overdue: the reply timeout after it was sent (a blocking read:
    /// after its block time too).
    private func replyDeadline(_ entry: (request: Request, sentAt: Double)) -> Double {
        if case .read = entry.request { return entry.sentAt + Double(options.blockMilliseconds) / 1000 + options.replyTimeout }
        return entry.sentAt + options.replyTimeout
    }

    /// When `handleTimers` should next run.
    public var nextDeadline: Double? {
        var deadlines: [Double] = []
        if ticketReady { deadlines.append(now) }
        for (link, pending) in requests where up.contains(link) {
            for (_, entry) in pending { deadlines.append(replyDeadline(entry)) }
        }
        for append in appends.values where !append.sent && append.notBefore > now { deadlines.append(append.notBefore) }
        for state in boards.values where !state.caughtUp && !state.rangeInFlight && state.notBefore > now { deadlines.append(state.notBefore) }
        for entry in assetSets.values where !entry.sent && entry.notBefore > now { deadlines.append(entry.notBefore) }
        for entry in assetGets.values where !entry.sent { deadlines.append(max(entry.notBefore, now)) }
        for entry in authorRequests.values where !entry.sent && entry.notBefore > now { deadlines.append(entry.notBefore) }
        for entry in replicaMarks.values where !entry.sent && entry.notBefore > now { deadlines.append(entry.notBefore) }
        if !readInFlight, readNotBefore > now { deadlines.append(readNotBefore) }
        return deadlines.min()
    }

    /// Retries what is due; returns the links that stopped answering (the driver drops them and
    /// reconnects).
    public func handleTimers(now: Double) -> [Link] {
        self.now = now
        completeTickets()
        var dead: [Link] = []
        for (link, pending) in requests where up.contains(link) && pending.values.contains(where: { now > replyDeadline($0) }) {
            dead.append(link)
            trouble.link[link] = (detail: "\(options.redisName) does not answer", untilReply: true)
        }
        defer { troubleChanged() }
        for (hash, entry) in assetGets where !entry.sent && now >= entry.giveUpAt {
            options.log("image \(hash) is not in Redis after \(Int(options.assetWait)) s; giving up")
            deliver(hash, nil, to: entry.boards)
        }
        pump()
        return dead.sorted { $0.description < $1.description }
    }

    /// Sends whatever can be sent now.
    private func pump() {
        defer { onOutput?() }
        if up.contains(.commands) {
            for seq in appends.keys.sorted() {
                guard let append = appends[seq], !append.sent, append.notBefore <= now else { continue }
                let ticket: RedisPipeline.Ticket
                if options.sharesAuthorship {
                    // The entry and its authors in the board's `replicas` set, atomically.
                    ticket = links[.commands]!.send(["EVAL", RedisBoardLog.appendScript, "2", streamKey(append.board),
                                                     replicasKey(append.board), options.node].map { Array($0.utf8) }
                                                    + [append.bytes] + append.authors.map { Array($0.utf8) })
                } else {
                    ticket = links[.commands]!.send([Array("XADD".utf8), Array(streamKey(append.board).utf8), Array("*".utf8),
                                                     Array("n".utf8), Array(options.node.utf8), Array("o".utf8), append.bytes])
                }
                requests[.commands]![ticket] = (.append(seq), now)
                appends[seq]!.sent = true
            }
            for name in boards.keys.sorted() {
                guard let state = boards[name] else { continue }
                if !state.caughtUp, !state.rangeInFlight, state.notBefore <= now {
                    let ticket: RedisPipeline.Ticket
                    if !state.checkpointLoaded {
                        ticket = links[.commands]!.send("HGETALL", checkpointKey(name))
                        requests[.commands]![ticket] = (.loadCheckpoint(name), now)
                    } else {
                        ticket = links[.commands]!.send("XRANGE", streamKey(name), state.lastID == "0-0" ? "-" : "(" + state.lastID, "+",
                                                        "COUNT", String(options.readCount))
                        requests[.commands]![ticket] = (.range(name), now)
                    }
                    boards[name]!.rangeInFlight = true
                } else if state.caughtUp, !state.compacting, options.checkpointEvery > 0, state.unverifiedReads == 0,
                          state.entriesSinceCheckpoint >= options.checkpointEvery, state.notBefore <= now {
                    let ticket = links[.commands]!.send(["EVAL", RedisBoardLog.acquireScript, "2", leaseKey(name), epochKey(name),
                                                         options.node, String(options.leaseMilliseconds)].map { Array($0.utf8) })
                    requests[.commands]![ticket] = (.acquireLease(name), now)
                    boards[name]!.compacting = true
                }
            }
            for board in replicaMarks.keys.sorted() {
                guard let entry = replicaMarks[board], !entry.sent, entry.notBefore <= now else { continue }
                let ticket = links[.commands]!.send((["SADD", replicasKey(board)] + entry.replicas).map { Array($0.utf8) })
                requests[.commands]![ticket] = (.markReplicas(board), now)
                replicaMarks[board]!.sent = true
            }
            // After the appends and marks above (Redis runs one link's commands in order).
            for key in authorRequests.keys.sorted(by: { ($0.board, $0.request.replica.rawValue, $0.request.subject, $0.request.bind ? 1 : 0)
                                                        < ($1.board, $1.request.replica.rawValue, $1.request.subject, $1.request.bind ? 1 : 0) }) {
                guard let entry = authorRequests[key], !entry.sent, entry.notBefore <= now else { continue }
                let request = key.request
                let ticket = links[.commands]!.send(["EVAL", RedisBoardLog.authorScript, "3", authorsKey(key.board), authoredKey(key.board),
                                                     replicasKey(key.board), Self.hex(request.replica), request.subject, request.bind ? "1" : "0",
                                                     String(request.maxPerSubject), String(request.maxPerBoard)].map { Array($0.utf8) })
                requests[.commands]![ticket] = (.author(key.board, request), now)
                authorRequests[key]!.sent = true
            }
            for hash in assetSets.keys.sorted(by: { $0.hex < $1.hex }) {
                guard let entry = assetSets[hash], !entry.sent, entry.notBefore <= now else { continue }
                let bytes = [UInt8](entry.data)
                var value = bytes
                if bytes.count > options.assetChunkBytes {
                    // Chunks first, then the marker naming them: a reader never sees a marker
                    // before its chunks.
                    let chunks = stride(from: 0, to: bytes.count, by: options.assetChunkBytes).map {
                        Array(bytes[$0..<min($0 + options.assetChunkBytes, bytes.count)])
                    }
                    for (index, chunk) in chunks.enumerated() {
                        let ticket = links[.commands]!.send([Array("SET".utf8), Array("\(assetKey(hash)):\(index)".utf8), chunk])
                        requests[.commands]![ticket] = (.setChunk(hash), now)
                    }
                    value = Array("\(Self.chunkMarker)\(chunks.count):\(bytes.count)".utf8)
                }
                let ticket = links[.commands]!.send([Array("SET".utf8), Array(assetKey(hash).utf8), value, Array("NX".utf8)])
                requests[.commands]![ticket] = (.setAsset(hash), now)
                assetSets[hash]!.sent = true
            }
            for hash in assetGets.keys.sorted(by: { $0.hex < $1.hex }) {
                guard let entry = assetGets[hash], !entry.sent, entry.notBefore <= now else { continue }
                let ticket = links[.commands]!.send("GET", assetKey(hash))
                requests[.commands]![ticket] = (.getAsset(hash), now)
                assetGets[hash]!.sent = true
            }
        }
        if up.contains(.presence) {
            for board in boards.keys.sorted() where !subscribed.contains(board) {
                presenceOutput += RESPValue.command("SUBSCRIBE", presenceChannel(board))
                subscribed.insert(board)
            }
        }
        let tailing = boards.keys.filter { boards[$0]!.caughtUp }.sorted()
        if up.contains(.tail), tailClientID != nil, !tailing.isEmpty {
            if !readInFlight, readNotBefore <= now {
                let keys = tailing.map { streamKey($0) }
                let ids = tailing.map { boards[$0]!.lastID }
                let parts = ["XREAD", "COUNT", String(options.readCount), "BLOCK", String(options.blockMilliseconds), "STREAMS"] + keys + ids
                let ticket = links[.tail]!.send(parts.map { Array($0.utf8) })
                requests[.tail]![ticket] = (.read(Dictionary(uniqueKeysWithValues: zip(tailing, ids))), now)
                readInFlight = true
                unblockSent = false
            } else if readInFlight, !unblockSent, up.contains(.commands), let id = tailClientID,
                      let reading = requests[.tail]!.values.compactMap({ entry -> [String]? in
                          if case .read(let starts) = entry.request { return starts.keys.sorted() }
                          return nil
                      }).first, reading != tailing {
                // A board caught up (or closed) while the read blocks: end the read early so the
                // next one covers it.
                let ticket = links[.commands]!.send("CLIENT", "UNBLOCK", String(id))
                requests[.commands]![ticket] = (.unblock, now)
                unblockSent = true
            }
        }
    }

    // MARK: Replies

    private func handle(_ request: Request, _ value: RESPValue) {
        if case .error(let message) = value {
            // Trouble of Redis itself (no password, loading...) is logged once, when it starts.
            retryLater(request, because: message, quietly: Self.troubleClass(message, for: request) != nil)
            return
        }
        switch request {
        case .append(let seq):
            if appends.removeValue(forKey: seq) != nil { entriesAppended += 1 }
        case .range(let board):
            guard let state = boards[board], !state.caughtUp else { return }
            // Still "in flight" while its entries merge: a hub calling back in (fetching an
            // image, say) must not start a second read of the same range.
            let entries = Self.entries(value)
            for entry in entries { apply(entry, to: board, catchingUp: true) }
            boards[board]?.rangeInFlight = false
            if entries.count < options.readCount, up.contains(.commands) {
                // Read to the end: is the checkpoint still the one loaded? A compactor may have
                // trimmed what lay between it and what was read meanwhile.
                let ticket = links[.commands]!.send("HGET", checkpointKey(board), "id")
                requests[.commands]![ticket] = (.recheck(board, state.checkpointID), now)
                boards[board]?.rangeInFlight = true
            }
        case .loadCheckpoint(let board):
            guard boards[board] != nil else { return }
            boards[board]!.rangeInFlight = false
            boards[board]!.checkpointLoaded = true
            let fields = Self.fields(value)
            guard let id = fields["id"].flatMap({ String(validating: $0, as: UTF8.self) }), let stateBytes = fields["state"] else {
                boards[board]!.checkpointID = nil
                return
            }
            boards[board]!.checkpointID = id
            do {
                let checkpoint = try OperationBatch(decoding: stateBytes)
                boards[board]!.streamVector = boards[board]!.streamVector.raised(by: checkpoint)
                try boards[board]!.hub.mergeReplicated(checkpoint, now: now)
                entriesMerged += 1
                if Self.streamID(id) > Self.streamID(boards[board]!.lastID) { boards[board]!.lastID = id }
                options.log("board '\(board)': loaded the checkpoint at \(id) (\(checkpoint.operations.count) operations)")
            } catch {
                // A checkpoint that does not decode: read the whole stream that is left instead.
                options.log("board '\(board)': the checkpoint at \(id) is unusable (\(error)); reading the stream instead")
            }
            onHubChanged?(board)
        case .recheck(let board, let loaded):
            guard boards[board] != nil else { return }
            boards[board]!.rangeInFlight = false
            let current = value.text
            if current != loaded {
                // A newer checkpoint: load it (merging is idempotent) and read on from there.
                boards[board]!.checkpointLoaded = false
            } else {
                finishCatchUp(board)
            }
        case .acquireLease(let board):
            guard boards[board] != nil else { return }
            guard case .integer(let epoch) = value else {
                // Someone else is compacting: try again after a lease's time.
                boards[board]!.compacting = false
                boards[board]!.notBefore = now + Double(options.leaseMilliseconds) / 1000
                return
            }
            writeCheckpoint(board, epoch: epoch)
        case .commitCheckpoint(let board, let id):
            guard boards[board] != nil else { return }
            boards[board]!.compacting = false
            if case .integer(0) = value { boards[board]!.entriesSinceCheckpoint = 0 }  // a newer one is there
            if case .integer(1) = value {
                boards[board]!.entriesSinceCheckpoint = 0
                boards[board]!.checkpointID = id
                options.log("board '\(board)': checkpoint at \(id) written; entries older than \(options.retentionMilliseconds / 1000) s before it trimmed")
            }
        case .verify(let board, let start):
            guard boards[board] != nil else { return }
            boards[board]!.unverifiedReads -= 1
            guard case .array(let items?) = value, items.count == 2 else { return }
            if let id = items[1].text, id != boards[board]!.checkpointID {
                // Another server wrote a checkpoint: count from there (one compactor is enough).
                boards[board]!.checkpointID = id
                boards[board]!.entriesSinceCheckpoint = 0
            }
            // Trim points only move forward: one at or before `start` now was so during the read.
            if let minID = items[0].text, Self.streamID(minID) > Self.streamID(start) {
                reload(board, because: "the stream was trimmed past \(start) (this server fell behind)")
            }
        case .setAsset(let hash):
            // Replies come in order: a chunk refused before this marker left `sent` false, and
            // the whole image goes again (the marker's NX keeps the first).
            if assetSets[hash]?.sent == true { assetSets[hash] = nil }
        case .setChunk:
            break
        case .getChunks(let hash, let size):
            guard let entry = assetGets[hash] else { return }
            var bytes: [UInt8] = []
            if case .array(let parts?) = value {
                for part in parts {
                    guard case .bulkString(let chunk?) = part else { bytes = []; break }
                    bytes += chunk
                }
            }
            guard bytes.count == size else {
                // A chunk is missing: ask again shortly (the hash is checked on arrival anyway).
                assetGets[hash]!.sent = false
                assetGets[hash]!.notBefore = now + 0.5
                return
            }
            deliver(hash, Data(bytes), to: entry.boards)
        case .getAsset(let hash):
            guard let entry = assetGets[hash] else { return }
            if case .bulkString(let bytes?) = value, bytes.starts(with: Array(Self.chunkMarker.utf8)),
               let (count, size) = Self.chunkCounts(bytes), up.contains(.commands) {
                let keys = (0..<count).map { Array("\(assetKey(hash)):\($0)".utf8) }
                let ticket = links[.commands]!.send([Array("MGET".utf8)] + keys)
                requests[.commands]![ticket] = (.getChunks(hash, size: size), now)
                return
            }
            if case .bulkString(let bytes?) = value {
                deliver(hash, Data(bytes), to: entry.boards)
            } else {
                // Not there yet (another server may still be storing it): ask again shortly.
                assetGets[hash]!.sent = false
                assetGets[hash]!.notBefore = now + 0.5
            }
        case .author(let board, let request):
            let key = AuthorKey(board: board, request: request)
            guard authorRequests.removeValue(forKey: key) != nil, let hub = boards[board]?.hub else { return }
            guard let answer = Self.authorshipAnswer(value) else {
                options.log("board '\(board)': an unexpected answer to \(request): \(value); asking again")
                authorRequests[key] = (false, now + options.retryDelay)
                return
            }
            hub.authorshipAnswered(request, answer, now: now)
            onHubChanged?(board)
        case .markReplicas(let board):
            replicaMarks[board] = nil
        case .clientID:
            if case .integer(let id) = value { tailClientID = id }
        case .unblock, .publish, .auth:
            break
        case .read(let starts):
            readInFlight = false
            if case .array(let streams?) = value {
                for stream in streams {
                    guard case .array(let pair?) = stream, pair.count == 2, let key = pair[0].text,
                          let board = boards.keys.first(where: { streamKey($0) == key }) else { continue }
                    let entries = Self.entries(pair[1])
                    for entry in entries { apply(entry, to: board, catchingUp: false) }
                    guard !entries.isEmpty, let start = starts[board], boards[board]?.caughtUp == true else { continue }
                    // Entries trimmed between `start` and the first one returned would be missed
                    // silently: check the trim point before trusting this read for a checkpoint.
                    if up.contains(.commands) {
                        let ticket = links[.commands]!.send("HMGET", checkpointKey(board), "minid", "id")
                        requests[.commands]![ticket] = (.verify(board, start), now)
                        boards[board]!.unverifiedReads += 1
                    } else {
                        reload(board, because: "a tail read could not be checked against the trim point")
                    }
                }
            }
        }
    }

    /// Hands a fetched image (or nil: not in Redis) to the hubs that asked for it.
    private func deliver(_ hash: AssetHash, _ data: Data?, to waiting: Set<String>) {
        assetGets[hash] = nil
        for board in waiting.sorted() {
            boards[board]?.hub.assetFetched(hash, data)
            onHubChanged?(board)
        }
    }

    private func retryLater(_ request: Request, because message: String, quietly: Bool = false) {
        let at = now + options.retryDelay
        let options = quietly ? Options.quiet(self.options) : self.options
        switch request {
        case .append(let seq):
            appends[seq]?.sent = false
            appends[seq]?.notBefore = at
            options.log("Redis refused an append (retrying): \(message)")
        case .range(let board), .loadCheckpoint(let board), .recheck(let board, _):
            boards[board]?.rangeInFlight = false
            boards[board]?.notBefore = at
            options.log("board '\(board)': Redis refused reading the stream (retrying): \(message)")
        case .acquireLease(let board), .commitCheckpoint(let board, _):
            boards[board]?.compacting = false
            boards[board]?.notBefore = now + Double(options.leaseMilliseconds) / 1000
            options.log("board '\(board)': checkpoint not written: \(message)")
        case .verify(let board, _):
            boards[board]?.unverifiedReads -= 1
            reload(board, because: "Redis refused checking the trim point: \(message)")
        case .setAsset(let hash), .setChunk(let hash):
            assetSets[hash]?.sent = false
            assetSets[hash]?.notBefore = at
        case .getAsset(let hash), .getChunks(let hash, _):
            assetGets[hash]?.sent = false
            assetGets[hash]?.notBefore = at
        case .read:
            readInFlight = false
            readNotBefore = at
            // An unblocked read ends with an error reply when unblocked with ERROR; plain
            // UNBLOCK gives a null reply. Either way the next read starts.
            if !message.hasPrefix("UNBLOCKED") { options.log("Redis refused the tail read (retrying): \(message)") }
        case .author(let board, let request):
            authorRequests[AuthorKey(board: board, request: request)]?.sent = false
            authorRequests[AuthorKey(board: board, request: request)]?.notBefore = at
            options.log("board '\(board)': Redis refused to \(request) (retrying): \(message)")
        case .markReplicas(let board):
            replicaMarks[board]?.sent = false
            replicaMarks[board]?.notBefore = at
        case .clientID:
            options.log("Redis refused CLIENT ID: \(message)")
        case .unblock:
            unblockSent = false
        case .publish:
            break
        case .auth:
            options.log("Redis refused the password (check --redis-password-file): \(message)")
        }
    }

    /// Stream entries from an XRANGE reply or one stream of an XREAD reply: (id, node, batch bytes).
    private static func entries(_ value: RESPValue) -> [(id: String, node: String?, bytes: [UInt8]?)] {
        guard case .array(let items?) = value else { return [] }
        return items.compactMap { item in
            guard case .array(let pair?) = item, pair.count == 2, let id = pair[0].text,
                  case .array(let fields?) = pair[1] else { return nil }
            var node: String?
            var bytes: [UInt8]?
            var index = 0
            while index + 1 < fields.count {
                switch fields[index].text {
                case "n": node = fields[index + 1].text
                case "o": if case .bulkString(let b?) = fields[index + 1] { bytes = b }
                default: break
                }
                index += 2
            }
            return (id, node, bytes)
        }
    }

    private func apply(_ entry: (id: String, node: String?, bytes: [UInt8]?), to board: String, catchingUp: Bool) {
        guard var state = boards[board] else { return }
        state.lastID = entry.id
        state.entriesSinceCheckpoint += 1
        boards[board] = state
        // Live: entries this server wrote are already merged here.
        if !catchingUp, entry.node == options.node { return }
        guard let bytes = entry.bytes else {
            options.log("board '\(board)': stream entry \(entry.id) has no operations; skipped")
            return
        }
        let batch: OperationBatch
        do {
            batch = try OperationBatch(decoding: bytes)
        } catch {
            options.log("board '\(board)': stream entry \(entry.id) does not decode (\(error)); skipped")
            return
        }
        if catchingUp { boards[board]!.streamVector = state.streamVector.raised(by: batch) }
        do {
            entriesMerged += 1
            try state.hub.mergeReplicated(batch, now: now)
        } catch {
            options.log("board '\(board)': stream entry \(entry.id) refused (\(error)); skipped")
        }
        onHubChanged?(board)
    }

    /// The stream was read to its end: operations only this server's cache holds (merged before
    /// a crash, or a board from before `--redis`) are appended now, then the board is tailed.
    private func finishCatchUp(_ board: String) {
        guard var state = boards[board], !state.caughtUp else { return }
        state.caughtUp = true
        let local = state.hub.store.replica.versionVector
        let missing = !state.streamVector.dominates(local)
        let vector = state.streamVector
        state.streamVector = .empty
        boards[board] = state
        if missing {
            let delta = state.hub.store.replica.operations(since: vector)
            options.log("board '\(board)': appending \(delta.operations.count) operations the stream lacked (stream \(vector), here \(local))")
            nextAppend += 1
            appends[nextAppend] = Append(board: board, bytes: delta.encoded(), authors: Self.authors(of: delta))
        }
        if options.sharesAuthorship {
            // Replica ids whose operations the log may hold without the set knowing (appended
            // before authorship was shared): none of them can be bound to a write token.
            let known = local.entries.keys.sorted { $0.rawValue < $1.rawValue }.map(Self.hex)
            if !known.isEmpty { replicaMarks[board] = (known, false, 0) }
        }
        options.log("board '\(board)': caught up from Redis at \(state.lastID)")
        state.hub.holdsGreetings = false
        onHubChanged?(board)
    }

    // MARK: Presence

    /// A presence this server's hub took: published for the other servers (ephemeral: dropped
    /// when the commands link is down). Payload: node id (length-prefixed), then the PRESENCE
    /// message's frame as on the wire.
    private func publish(_ presence: Presence, on board: String) {
        guard up.contains(.commands) else { return }
        var writer = ByteWriter()
        writer.write(lengthPrefixed: Array(options.node.utf8))
        writer.write(bytes: Message.presence(presence).frame().encoded())
        let ticket = links[.commands]!.send([Array("PUBLISH".utf8), Array(presenceChannel(board).utf8), writer.bytes])
        requests[.commands]![ticket] = (.publish, now)
        onOutput?()
    }

    /// A message on the presence link: `message CHANNEL PAYLOAD` (subscribe confirmations and
    /// anything else are ignored; a payload that does not decode is dropped).
    private func presenceMessage(_ value: RESPValue) {
        let items: [RESPValue]
        switch value {
        case .error(let message):
            options.log("Redis presence link: \(message)")
            return
        case .array(let list?): items = list
        case .push(let list): items = list
        default: return
        }
        guard items.count == 3, items[0].text == "message", let channel = items[1].text,
              case .bulkString(let payload?) = items[2],
              let board = boards.keys.first(where: { presenceChannel($0) == channel }) else { return }
        var reader = ByteReader(payload)
        guard let node = try? reader.readLengthPrefixed(max: 256, "node id"), node != Array(options.node.utf8) else { return }
        var frames = FrameDecoder(maxFrame: 1 << 16)
        frames.append(Array(payload[reader.offset...]))
        guard let frame = try? frames.next(), case .presence(let presence)? = try? Message(frame: frame, limits: SessionLimits()) else {
            options.log("board '\(board)': a presence message from Redis does not decode; dropped")
            return
        }
        boards[board]?.hub.receiveReplicatedPresence(presence, now: now)
        onHubChanged?(board)
    }

    /// Reads the board again from its checkpoint (merging is idempotent): what this server read
    /// may have a gap. It writes no checkpoint until then.
    private func reload(_ board: String, because why: String) {
        guard var state = boards[board], state.caughtUp else { return }  // (else it is reloading)
        options.log("board '\(board)': reloading from the checkpoint: \(why)")
        state.caughtUp = false
        state.checkpointLoaded = false
        state.rangeInFlight = false
        state.streamVector = .empty
        boards[board] = state
    }

    /// A field-value reply (HGETALL: a RESP2 array or a RESP3 map) as a dictionary of bytes.
    private static func fields(_ value: RESPValue) -> [String: [UInt8]] {
        var result: [String: [UInt8]] = [:]
        func bytes(_ value: RESPValue) -> [UInt8]? {
            if case .bulkString(let b?) = value { return b }
            return value.text.map { Array($0.utf8) }
        }
        switch value {
        case .array(let items?):
            var index = 0
            while index + 1 < items.count {
                if let key = items[index].text, let b = bytes(items[index + 1]) { result[key] = b }
                index += 2
            }
        case .map(let pairs):
            for pair in pairs { if let key = pair.key.text, let b = bytes(pair.value) { result[key] = b } }
        default: break
        }
        return result
    }

    /// What an image's key holds when its bytes are in chunks (`<marker><count>:<size>`); no
    /// PNG starts like this.
    static let chunkMarker = "BSCHUNKS:"

    static func chunkCounts(_ bytes: [UInt8]) -> (Int, Int)? {
        let parts = String(decoding: bytes.dropFirst(chunkMarker.utf8.count), as: UTF8.self).split(separator: ":")
        guard parts.count == 2, let count = Int(parts[0]), let size = Int(parts[1]),
              count > 0, count <= 1 << 16, size > 0, size <= 1 << 30 else { return nil }
        return (count, size)
    }

    /// A stream id's two numbers ("ms-seq"), for comparing ids; malformed ones sort first.
    static func streamID(_ text: String) -> (UInt64, UInt64) {
        let parts = text.split(separator: "-")
        guard parts.count == 2, let ms = UInt64(parts[0]), let seq = UInt64(parts[1]) else { return (0, 0) }
        return (ms, seq)
    }

    /// The replica ids a batch carries operations of (and its `covers` reaches), hex, sorted.
    static func authors(of batch: OperationBatch) -> [String] {
        var ids = Set(batch.operations.map(\.id.replica))
        if let covers = batch.covers { for (replica, seq) in covers.entries where seq > 0 { ids.insert(replica) } }
        return ids.sorted { $0.rawValue < $1.rawValue }.map(hex)
    }

    /// Appends a batch to the board's stream and records its authors in the board's `replicas`
    /// set, atomically. KEYS: stream, replicas. ARGV: node, batch, then the authors (hex).
    /// Returns the entry id.
    public static let appendScript = """
        for i = 3, #ARGV do redis.call('SADD', KEYS[2], ARGV[i]) end
        return redis.call('XADD', KEYS[1], '*', 'n', ARGV[1], 'o', ARGV[2])
        """

    /// Authorship, decided once for every server: who owns a replica id, and (with bind 1) the
    /// id bound to the subject when nobody owns it, the log holds no operation of it, the
    /// subject owns fewer than its limit and the board holds fewer bindings than its limit.
    /// KEYS: authors (hash replica → subject), authored (hash subject → count), replicas (set).
    /// ARGV: replica (hex), subject, bind (1 or 0), max per subject, max per board. Returns
    /// `{owner, SUBJECT}`, `{unbound}`, `{subject-limit}` or `{board-limit}`.
    public static let authorScript = """
        local owner = redis.call('HGET', KEYS[1], ARGV[1])
        if owner then return {'owner', owner} end
        if ARGV[3] ~= '1' or redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then return {'unbound'} end
        if tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0') >= tonumber(ARGV[4]) then return {'subject-limit'} end
        if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[5]) then return {'board-limit'} end
        redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
        redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
        return {'owner', ARGV[2]}
        """

    static func authorshipAnswer(_ value: RESPValue) -> AuthorshipAnswer? {
        guard case .array(let items?) = value, let status = items.first?.text else { return nil }
        switch status {
        case "owner": return items.count == 2 ? items[1].text.map(AuthorshipAnswer.owner) : nil
        case "unbound": return .unbound
        case "subject-limit": return .subjectLimit
        case "board-limit": return .boardLimit
        default: return nil
        }
    }

    /// Takes the board's compaction lease if nobody holds it, and only then a new fencing epoch.
    /// KEYS: lease, epoch. ARGV: node, lease ms. Returns the epoch, or nil when held.
    public static let acquireScript = """
        if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
          return redis.call('INCR', KEYS[2])
        end
        return false
        """

    /// Writes a checkpoint only for the current epoch and never behind the one there, then
    /// trims the stream before `minid` and releases the lease. KEYS: epoch, checkpoint, stream,
    /// lease. ARGV: epoch, stream id covered, state, minid, node. Returns 1 (written), 0 (an
    /// equal or newer checkpoint is there), or an error `FENCED` for a stale epoch.
    public static let commitScript = """
        if redis.call('GET', KEYS[1]) ~= ARGV[1] then
          return redis.error_reply('FENCED the compaction lease moved on (epoch ' .. ARGV[1] .. ' is stale)')
        end
        local function parse(id)
          local ms, seq = string.match(id, '^(%d+)-(%d+)$')
          return tonumber(ms), tonumber(seq)
        end
        local current = redis.call('HGET', KEYS[2], 'id')
        if current then
          local cms, cseq = parse(current)
          local nms, nseq = parse(ARGV[2])
          if cms > nms or (cms == nms and cseq >= nseq) then return 0 end
        end
        redis.call('HSET', KEYS[2], 'id', ARGV[2], 'state', ARGV[3], 'epoch', ARGV[1], 'minid', ARGV[4])
        redis.call('XTRIM', KEYS[3], 'MINID', ARGV[4])
        if redis.call('GET', KEYS[4]) == ARGV[5] then redis.call('DEL', KEYS[4]) end
        return 1
        """

    /// With the lease (epoch `epoch`): the board's compacted state, covering every entry up to
    /// the last one read, goes to Redis through the fenced commit.
    private func writeCheckpoint(_ board: String, epoch: Int64) {
        guard let state = boards[board], up.contains(.commands) else {
            boards[board]?.compacting = false
            return
        }
        let id = state.lastID
        let (ms, _) = Self.streamID(id)
        let minID = "\(ms > UInt64(options.retentionMilliseconds) ? ms - UInt64(options.retentionMilliseconds) : 0)-0"
        let full = state.hub.store.replica.operations(since: .empty).encoded()
        let parts: [[UInt8]] = ["EVAL", RedisBoardLog.commitScript, "4", epochKey(board), checkpointKey(board), streamKey(board),
                                leaseKey(board), String(epoch), id].map { Array($0.utf8) }
            + [full] + [minID, options.node].map { Array($0.utf8) }
        let ticket = links[.commands]!.send(parts)
        requests[.commands]![ticket] = (.commitCheckpoint(board, id), now)
    }

    private func completeTickets() {
        var completed = 0
        for ticket in tickets {
            guard ticket.waitingFor.allSatisfy({ appends[$0] == nil }) else { break }
            completed += 1
            if let state = boards[ticket.board] {
                state.hub.replicated(ticket.id)
                onHubChanged?(ticket.board)
            }
        }
        if completed > 0 { tickets.removeFirst(completed) }
    }
}

// MARK: - Storage trouble

/// Whether Redis can serve this server's boards, and why not. A link the driver cannot
/// connect (`connectFailed`), a link that stopped answering, a refused password or an error
/// reply that is Redis's own trouble (`NOAUTH`, `LOADING`, ...) makes `storageTrouble` say so;
/// every attached hub then turns new sessions away with `storageUnavailable` (their clients
/// learn what the server waits for instead of timing out), and the log says it once per change
/// of the reason, not per client or per retry.
extension RedisBoardLog {
    fileprivate struct TroubleState {
        /// Per link (commands and tail: the links boards need): why it cannot be used;
        /// `untilReply`: cleared by the next reply on it (a link that stopped answering), else
        /// by connecting.
        var link: [Link: (detail: String, untilReply: Bool)] = [:]
        /// Redis refused this server's password.
        var password: String?
        /// An error reply of Redis's own (no password given, loading, out of memory, read-only).
        var reply: String?
        /// What was reported last (logged and handed to the hubs).
        var reported: String?

        mutating func connected(_ link: Link, waitingForReply: Bool) {
            if self.link[link]?.untilReply == false || !waitingForReply { self.link[link] = nil }
        }

        var current: String? {
            link[.commands]?.detail ?? link[.tail]?.detail ?? password ?? reply
        }
    }

    /// Why Redis cannot serve the boards now (nil: it can), in words fit for an operator and
    /// for clients with a token: "Redis at 10.0.0.5:6379 refused the connection". No password,
    /// no text Redis echoed.
    public var storageTrouble: String? { trouble.reported }

    /// The driver could not connect `link`: `why` is how Redis failed, after its name
    /// ("refused the connection", "cannot be reached (No route to host)").
    public func connectFailed(_ link: Link, because why: String, now: Double) {
        self.now = now
        guard link != .presence else { return }  // presence is a nicety; boards need the others
        trouble.link[link] = (detail: "\(options.redisName) \(why)", untilReply: false)
        troubleChanged()
    }

    /// Bookkeeping for every reply, before it is handled.
    private func noteReply(to request: Request, _ value: RESPValue, on link: Link) {
        if trouble.link[link]?.untilReply == true { trouble.link[link] = nil }
        guard case .error(let message) = value else {
            if case .auth = request { trouble.password = nil } else { trouble.reply = nil }
            return
        }
        guard let detail = Self.troubleClass(message, for: request) else { return }
        if case .auth = request { trouble.password = "\(options.redisName) \(detail)" } else { trouble.reply = "\(options.redisName) \(detail)" }
    }

    /// What an error reply says about Redis itself (nil: it is about the one command). Only
    /// the reply's code is kept (Redis's text may echo a command's arguments).
    private static func troubleClass(_ message: String, for request: Request) -> String? {
        let code = message.prefix { $0 != " " }
        if case .auth = request {
            // "ERR AUTH <password> called without any password configured" is no trouble: that
            // Redis needs none, and every command after the AUTH runs.
            let refused = code == "WRONGPASS" || message.contains("invalid password") || message.contains("invalid username-password")
            return refused ? "refused this server's password (\(code))" : nil
        }
        // An unauthenticated client's long command: Redis answers "ERR Protocol error:
        // unauthenticated multibulk length" (and closes the link) before any NOAUTH.
        if code == "NOAUTH" || message.contains("unauthenticated") { return "asks for a password (NOAUTH)" }
        switch code {
        case "WRONGPASS": return "refused this server's password (WRONGPASS)"
        case "LOADING", "MISCONF", "OOM", "READONLY", "MASTERDOWN", "BUSY", "CLUSTERDOWN", "NOREPLICAS", "TRYAGAIN":
            return "refuses commands (\(code))"
        default: return nil
        }
    }

    /// Logs a change of `storageTrouble` once and hands it to every attached hub (which turns
    /// away, or again greets, new sessions).
    fileprivate func troubleChanged() {
        let current = trouble.current
        guard current != trouble.reported else { return }
        let before = trouble.reported
        trouble.reported = current
        if let current {
            let hint: String
            if current.hasSuffix("(NOAUTH)") {
                hint = " (give the server the password with --redis-password-file)"
            } else if current.contains("password") {
                hint = " (check --redis-password-file and --redis-user)"
            } else if current.hasSuffix("refused the connection") {
                hint = " (is redis-server running there?)"
            } else {
                hint = ""
            }
            options.log("storage unavailable: \(current)\(hint); clients are told to retry later until it is back")
        } else if before != nil {
            options.log("storage available again: \(options.redisName) answers")
        }
        for name in boards.keys.sorted() {
            guard let hub = boards[name]?.hub else { continue }
            hub.storageTrouble = current
            onHubChanged?(name)
        }
    }
}

extension RedisBoardLog.Options {
    /// The same options logging nothing (for retries whose cause `storageTrouble` reports).
    static func quiet(_ options: RedisBoardLog.Options) -> RedisBoardLog.Options {
        var quiet = options
        quiet.log = { _ in }
        return quiet
    }
}
