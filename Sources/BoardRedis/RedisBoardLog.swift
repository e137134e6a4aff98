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
/// It speaks over links a driver owns (BoardRedisNet's `RedisCluster` over TCP; the cluster
/// simulation over a simulated Redis): `commands` (pipelined), `tail` (the blocking read) and
/// `presence` (a subscription). Bytes and `now` go in, bytes come out; it reads no clock and no
/// socket.
///
/// Its parts, one file each: the board's phase and state (`Internal/RedisBoardLog+Board.swift`),
/// the links and timers (`+Driving`), replies (`+Replies`), catch-up (`+Catchup`), the tail
/// read (`+Tail`), appends and tickets (`+Appends`), images (`+Assets`), checkpoints
/// (`+Compaction`), presence (`+Presence`), shared authorship (`+Authorship`) and storage
/// trouble (`+Trouble`).
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

    public let options: Options
    /// A planted bug for the cluster simulation's oracles: tickets complete (sessions are
    /// acknowledged) without waiting for Redis to take their appends. Never set outside it.
    @_spi(Mutations) public var acknowledgesBeforeRedis = false

    // MARK: State (shared by the extensions in the files beside this one)

    /// The pipelined links' commands and what each asked (`Internal/RedisBoardLog+Requests.swift`).
    var commandsChannel = Channel()
    var tailChannel = Channel()
    var up: Set<Link> = []

    /// Appends Redis has not confirmed, by sequence number (sent again, in order, after errors
    /// and reconnects).
    var appends: [UInt64: Append] = [:]
    var nextAppend: UInt64 = 0
    /// Hubs' tickets in the order they were handed over; each completes when its appends are
    /// confirmed and every earlier ticket has completed.
    var tickets: [Ticket] = []

    /// The attached boards, each with its phase (`Internal/RedisBoardLog+Board.swift`).
    var boards: [String: BoardState] = [:]

    /// The tail link's one blocking read (`Internal/RedisBoardLog+TailRead.swift`).
    var tailState = TailRead.awaitingClientID(notBefore: 0)

    /// Authorship requests of hubs, until Redis answered them.
    var authorRequests: [AuthorKey: (sent: Bool, notBefore: Double)] = [:]
    /// Replica ids a board's hub holds, to be added to its `replicas` set after catch-up (the
    /// log may hold operations appended without `appendScript`: before authorship was shared).
    var replicaMarks: [String: (replicas: [String], sent: Bool, notBefore: Double)] = [:]

    var assetSets: [AssetHash: (data: Data, sent: Bool, notBefore: Double)] = [:]
    var assetGets: [AssetHash: (boards: Set<String>, giveUpAt: Double, sent: Bool, notBefore: Double)] = [:]
    var now = 0.0
    /// The presence link (SUBSCRIBE mode: messages arrive unasked, so no pipeline).
    var presenceDecoder = RESPDecoder()
    var presenceOutput: [UInt8] = []
    var subscribed: Set<String> = []
    /// Why Redis cannot serve the boards, by source (`RedisBoardLog+Trouble.swift`).
    var trouble = TroubleState()
    /// Deletes and undeletes waiting for Redis, and boards found deleted not yet taken by the
    /// host (`RedisBoardLog+Deletion.swift`).
    var tombstoneCalls: [Int: TombstoneCall] = [:]
    var nextTombstoneCall = 0
    var deletedBoards: [(board: String, deletedAt: String)] = []

    /// Statistics.
    public internal(set) var entriesAppended = 0
    /// Replies received (round trips completed) and error replies among them, for metrics.
    public internal(set) var repliesReceived = 0
    public internal(set) var errorReplies = 0
    public internal(set) var entriesMerged = 0

    public init(options: Options) {
        self.options = options
    }

    // MARK: Boards

    /// Starts replicating an open board: its stream is read from the start, then tailed.
    public func attach(_ board: String, hub: BoardHub, now: Double) {
        self.now = now
        boards[board] = BoardState(hub: hub)
        if options.checksTombstones { boards[board]?.tombstone = .unchecked(asked: false) }
        hub.sharedLog = true
        hub.sharesAuthorship = options.sharesAuthorship
        hub.holdsGreetings = true  // until the stream has been read
        hub.storageTrouble = storageTrouble  // while Redis cannot serve, HELLOs are turned away
        options.log("board '\(board)': reading \(streamKey(board)) from Redis")
        pump()
    }

    /// What a hub asked of the shared log (its `.sharedLog` events, handed on by the host as it
    /// drains its endpoint): queued for Redis; the answers reach the hub as Redis replies.
    /// Appends of a board detached meanwhile are still delivered; its other requests are dropped.
    public func handle(_ request: SharedLogRequest, on board: String, now: Double) {
        self.now = max(self.now, now)
        switch request {
        case .append(let batches, let ticket): replicate(board, batches, ticket: ticket)
        case .storeAsset(let hash, let data): storeAsset(hash, data)
        case .fetchAsset(let hash): if boards[board] != nil { fetchAsset(hash, for: board) }
        case .decideAuthorship(let request): if boards[board] != nil { askAuthorship(request, on: board) }
        case .publishPresence(let presence): if boards[board] != nil { publish(presence, on: board) }
        }
    }

    /// Stops replicating a board (it closed). Appends it handed over are still delivered.
    public func detach(_ board: String) {
        guard let state = boards.removeValue(forKey: board) else { return }
        state.hub.sharedLog = false
        state.hub.sharesAuthorship = false
        state.hub.holdsGreetings = false
        state.hub.storageTrouble = nil
        authorRequests = authorRequests.filter { $0.key.board != board }
        replicaMarks[board] = nil
        if subscribed.remove(board) != nil, up.contains(.presence) {
            presenceOutput += RESPValue.command("UNSUBSCRIBE", presenceChannel(board))
        }
    }

    /// The boards attached, by name.
    public var attachedBoards: [String] { boards.keys.sorted() }

    /// The hub an attached board replicates.
    public func hub(of board: String) -> BoardHub? { boards[board]?.hub }

    /// Whether a board's stream has been read up to its end once since it was attached (it is
    /// tailed).
    public func isCaughtUp(_ board: String) -> Bool { boards[board]?.phase.isTailing ?? false }

    /// Appends waiting for Redis (sent or not).
    public var unconfirmedAppends: Int { appends.count }

    // MARK: Keys

    func streamKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:log" }
    func presenceChannel(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:presence" }
    func checkpointKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:ckpt" }
    func leaseKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:lease" }
    func epochKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:epoch" }
    func assetKey(_ hash: AssetHash) -> String { "\(options.keyPrefix):asset:\(hash.hex)" }
    func authorsKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:authors" }
    func authoredKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:authored" }
    func replicasKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:replicas" }
    static func hex(_ replica: ReplicaID) -> String { String(replica.rawValue, radix: 16) }

    var authCommand: [[UInt8]]? {
        guard let password = options.password else { return nil }
        return [Array("AUTH".utf8)] + (options.user.map { [Array($0.utf8)] } ?? []) + [Array(password.utf8)]
    }
}
