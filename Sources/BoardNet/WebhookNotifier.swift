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
/// leaving, and boards appearing into events for a `WebhookSender`, debouncing changes per
/// board (`WebhookDebounce`). `boardDeleted` is for whoever deletes boards (the admin API).
/// Loop thread only.
public final class WebhookNotifier {
    public let sender: WebhookSender
    private let host: SyncHost
    private var known: Set<String>
    private var pending: [String: (debounce: WebhookDebounce, timer: Int?)] = [:]
    private let quiet: Double
    private let interval: Double

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
            self?.sender.enqueue(event: "client.joined", board: board, fields: ["replica": "\(replica)"])
        }, left: { [weak self] board, replica in
            self?.sender.enqueue(event: "client.left", board: board, fields: ["replica": "\(replica)"])
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
        var fields: [String: any Sendable] = [:]
        if let replica = host.boards[board]?.store.replica { fields["operations"] = Int(replica.versionVector.totalCount) }
        sender.enqueue(event: "board.changed", board: board, fields: fields)
    }

    /// A board was deleted (the admin API calls this): a `board.deleted` event, and its
    /// waiting `board.changed` is dropped.
    public func boardDeleted(_ board: String) {
        if let timer = pending.removeValue(forKey: board)?.timer { host.loop.cancelTimer(timer) }
        known.remove(board)
        sender.enqueue(event: "board.deleted", board: board)
    }
}
