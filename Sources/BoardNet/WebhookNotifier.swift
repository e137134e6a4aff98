import BoardCRDT
import BoardStore
import Foundation

/// When a board's `board.changed` webhook is due: once the board has been quiet for `quiet`
/// seconds, but no sooner than `interval` after the last one sent for it, and no later than
/// `interval` after the first change waiting (a board that never rests still reports). Pure:
/// times are passed in.
public struct WebhookDebounce: Sendable, Equatable {
    public var quiet: Double
    public var interval: Double
    private var firstPending: Double?
    private var lastChange = -Double.infinity
    private var lastSent = -Double.infinity

    public init(quiet: Double = 2, interval: Double = 10) {
        self.quiet = quiet
        self.interval = interval
    }

    /// A change at `now`; returns when the event is due.
    public mutating func changed(at now: Double) -> Double {
        if firstPending == nil { firstPending = now }
        lastChange = now
        return due!
    }

    /// When the waiting event is due (nil: nothing waits).
    public var due: Double? {
        guard let first = firstPending else { return nil }
        return max(min(lastChange + quiet, first + interval), lastSent + interval)
    }

    /// The event went out at `now`.
    public mutating func sent(at now: Double) {
        firstPending = nil
        lastSent = now
    }
}

/// The server's side of webhooks, on its loop: turns board changes, sessions joining and
/// leaving, and boards appearing into events for a `WebhookSender`. Changes are debounced per
/// board into `board.changed` (`WebhookDebounce`); sessions joining and leaving are folded,
/// per board, into a debounced `clients.changed` summary (how many joined and left since the
/// last one, how many are connected now, the first `maxReplicasListed` replica ids of each),
/// so a client reconnecting in a loop costs one event per board and interval, never one per
/// connection. `boardDeleted` is for whoever deletes boards (the admin API). Loop thread only.
public final class WebhookNotifier {
    /// Replica ids a `clients.changed` lists, at most, in each of `joined_replicas` and
    /// `left_replicas` (the counts say how many there were).
    public static let maxReplicasListed = 16

    public let sender: WebhookSender
    private let host: SyncHost
    private var known: Set<String>
    private var pending: [String: (debounce: WebhookDebounce, timer: Int?)] = [:]
    private var clients: [String: Clients] = [:]
    private let quiet: Double
    private let interval: Double

    /// A board's sessions joining and leaving since its last `clients.changed`.
    struct Clients {
        var debounce: WebhookDebounce
        var timer: Int?
        var connected = 0
        var joined = 0
        var left = 0
        var joinedReplicas: [String] = []
        var leftReplicas: [String] = []

        static func note(_ replica: String, in list: inout [String]) {
            if list.count < WebhookNotifier.maxReplicasListed, !list.contains(replica) { list.append(replica) }
        }
    }

    public init(host: SyncHost, dataDirectory: String, sender: WebhookSender, quiet: Double = 2, interval: Double = 10) {
        self.host = host
        self.sender = sender
        self.quiet = quiet
        self.interval = interval
        known = Set(((try? PosixFileSystem().listDirectory(dataDirectory)) ?? []).filter { $0.hasSuffix(".boardpkg") }
            .map { String($0.dropLast(".boardpkg".count)) })
        let previous = host.onBoardChange
        host.onBoardChange = { [weak self] board in
            previous?(board)
            self?.changed(board)
        }
        host.watchSessions(joined: { [weak self] board, replica in
            self?.seen(board)
            self?.session(board, "\(replica)", joined: true)
        }, left: { [weak self] board, replica in
            self?.session(board, "\(replica)", joined: false)
        })
    }

    /// A board this server created since it started (or first heard of).
    private func seen(_ board: String) {
        guard known.insert(board).inserted else { return }
        sender.enqueue(event: "board.created", board: board)
    }

    private func changed(_ board: String) {
        seen(board)
        let now = EventLoop.now()
        var entry = pending[board] ?? (WebhookDebounce(quiet: quiet, interval: interval), nil)
        let due = entry.debounce.changed(at: now)
        if let timer = entry.timer { host.loop.cancelTimer(timer) }
        entry.timer = host.loop.schedule(after: max(0, due - now)) { [weak self] in self?.fire(board) }
        pending[board] = entry
    }

    private func fire(_ board: String) {
        guard var entry = pending[board] else { return }
        entry.timer = nil
        let now = EventLoop.now()
        if let due = entry.debounce.due, due > now + 0.001 {
            entry.timer = host.loop.schedule(after: due - now) { [weak self] in self?.fire(board) }
            pending[board] = entry
            return
        }
        entry.debounce.sent(at: now)
        pending[board] = entry
        forgetLater(board)
        var fields: [String: any Sendable] = [:]
        if let replica = host.boards[board]?.store.replica { fields["operations"] = Int(clamping: replica.versionVector.totalCount) }
        // A board.changed still waiting for the receiver takes the newer count instead.
        sender.enqueue(event: "board.changed", board: board, fields: fields) { _, newer in newer }
    }

    private func session(_ board: String, _ replica: String, joined: Bool) {
        let now = EventLoop.now()
        var entry = clients[board] ?? Clients(debounce: WebhookDebounce(quiet: quiet, interval: interval))
        if joined {
            entry.connected += 1
            entry.joined += 1
            Clients.note(replica, in: &entry.joinedReplicas)
        } else {
            entry.connected = max(0, entry.connected - 1)
            entry.left += 1
            Clients.note(replica, in: &entry.leftReplicas)
        }
        let due = entry.debounce.changed(at: now)
        if let timer = entry.timer { host.loop.cancelTimer(timer) }
        entry.timer = host.loop.schedule(after: max(0, due - now)) { [weak self] in self?.fireClients(board) }
        clients[board] = entry
    }

    private func fireClients(_ board: String) {
        guard var entry = clients[board] else { return }
        entry.timer = nil
        let now = EventLoop.now()
        if let due = entry.debounce.due, due > now + 0.001 {
            entry.timer = host.loop.schedule(after: due - now) { [weak self] in self?.fireClients(board) }
            clients[board] = entry
            return
        }
        entry.debounce.sent(at: now)
        let fields: [String: any Sendable] = ["joined": entry.joined, "left": entry.left, "connected": entry.connected,
                                              "joined_replicas": entry.joinedReplicas, "left_replicas": entry.leftReplicas]
        (entry.joined, entry.left, entry.joinedReplicas, entry.leftReplicas) = (0, 0, [], [])
        clients[board] = entry
        forgetLater(board)
        sender.enqueue(event: "clients.changed", board: board, fields: fields, merge: Self.mergeClients)
    }

    /// Boards whose debouncing state is held now: one waiting for its event, one that sent an
    /// event less than an interval ago, one with sessions connected. Every other board's state
    /// is forgotten (`forgetLater`), so a server whose boards come and go (created and deleted
    /// through the admin API, or many boards edited once) holds state for the active ones only.
    public var trackedBoards: Int { Set(pending.keys).union(clients.keys).count }

    /// An interval after an event went out, the board's state is dropped unless something waits
    /// or (for sessions) some are still connected: past the interval, a fresh debounce behaves
    /// exactly as the old one would.
    private func forgetLater(_ board: String) {
        _ = host.loop.schedule(after: interval + 0.001) { [weak self] in
            guard let self else { return }
            if let entry = pending[board], entry.timer == nil, entry.debounce.due == nil { pending[board] = nil }
            if let entry = clients[board], entry.timer == nil, entry.debounce.due == nil, entry.connected == 0 { clients[board] = nil }
        }
    }

    /// Two `clients.changed` of one board as one: the counts added, `connected` the newer's,
    /// the lists joined (up to `maxReplicasListed`, without repeats).
    static let mergeClients: WebhookSender.Merge = { waiting, newer in
        var merged = newer
        for key in ["joined", "left"] { merged[key] = (waiting[key] as? Int ?? 0) + (newer[key] as? Int ?? 0) }
        for key in ["joined_replicas", "left_replicas"] {
            var list = waiting[key] as? [String] ?? []
            for replica in newer[key] as? [String] ?? [] where list.count < maxReplicasListed && !list.contains(replica) { list.append(replica) }
            merged[key] = list
        }
        return merged
    }

    /// A board was deleted (the admin API calls this): a `board.deleted` event, and its
    /// waiting `board.changed` is dropped (a `clients.changed` for the sessions the deletion
    /// closed may follow it).
    public func boardDeleted(_ board: String) {
        if let timer = pending.removeValue(forKey: board)?.timer { host.loop.cancelTimer(timer) }
        known.remove(board)
        sender.enqueue(event: "board.deleted", board: board)
    }
}
