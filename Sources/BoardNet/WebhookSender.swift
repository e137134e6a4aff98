import BoardModel
import BoardSync
import Foundation

/// Webhook delivery (docs/DEPLOYMENT.md, "Webhooks") on a thread of its own: events wait in a
/// bounded queue and go out one at a time, in order, each a POST of its JSON body signed with
/// HMAC-SHA256 (`X-BoardSync-Signature: sha256=<hex>`) and carrying its idempotency key
/// (`Idempotency-Key`, the same on every retry). A 2xx delivers; a 5xx, 408, 429, a timeout or
/// a failed connection is retried with backoff; any other answer drops the event with a log
/// line. `enqueue` may be called from any thread; it never blocks on the network.
///
/// What a full queue gives up: events have a priority (`Priority`: `board.created` and
/// `board.deleted` above `board.changed`, above `clients.changed`), and the oldest waiting
/// event of the lowest priority present is dropped, with a log line naming it, so client
/// traffic never pushes out a board's creation or deletion. A `board.changed` or
/// `clients.changed` for a board whose event of that kind is still waiting (not yet tried) is
/// folded into it (`Merge`) instead of queued again, so one board holds at most one waiting
/// event of each kind. Log lines name the receiver as `URLParts.redacted` does (never its path
/// or query, which may carry a secret), and quote at most 200 characters of an answer's body,
/// escaped.
public final class WebhookSender: @unchecked Sendable {
    public struct Options: Sendable {
        public var url: HTTPClient.URLParts
        /// The HMAC key (never logged).
        public var secret: [UInt8]
        /// Events waiting at most (beyond, the oldest of the lowest priority is dropped).
        public var maxQueued = 1000
        /// Seconds one delivery attempt may take.
        public var timeout: Double = 5
        /// The first retry's delay; each failure doubles it, up to `retryMax`.
        public var retryFirst: Double = 1
        public var retryMax: Double = 60
        /// TLS for https:// (nil: the system trust store).
        public var tls: TLSContext?

        public init(url: HTTPClient.URLParts, secret: [UInt8]) {
            self.url = url
            self.secret = secret
        }
    }

    /// Which events a full queue keeps: higher first.
    public enum Priority: Int, Sendable, Comparable {
        case clients = 0, changes = 1, boards = 2

        /// `board.created` and `board.deleted` are `boards`, `board.changed` is `changes`,
        /// anything else (`clients.changed`) is `clients`.
        public init(event: String) {
            switch event {
            case "board.created", "board.deleted": self = .boards
            case "board.changed": self = .changes
            default: self = .clients
            }
        }

        public static func < (a: Priority, b: Priority) -> Bool { a.rawValue < b.rawValue }
    }

    /// Folds a newer event's fields into those of the same kind still waiting for its board.
    public typealias Merge = @Sendable (_ waiting: [String: any Sendable], _ newer: [String: any Sendable]) -> [String: any Sendable]

    struct Delivery {
        var id: String
        var event: String
        var board: String
        var fields: [String: any Sendable]
        var time: Double
        var priority: Priority
        /// Made at its first try and kept for every retry (the receiver sees the same bytes).
        var body: [UInt8]?
    }

    public let options: Options
    private let log: @Sendable (String) -> Void
    private let condition = NSCondition()
    // Guarded by `condition`:
    private var queue: [Delivery] = []
    private var inFlight: String?
    private var stopped = false
    private var deliveredCount = 0
    private var droppedCount = 0
    private var mergedCount = 0

    public init(options: Options, log: @escaping @Sendable (String) -> Void) {
        self.options = options
        self.log = log
        let thread = Thread { [self] in self.run() }
        thread.name = "board-sync.webhooks"
        thread.start()
    }

    /// Events delivered, dropped (refused by the receiver or pushed out of a full queue),
    /// waiting, and folded into one waiting (`merge`) so far.
    public var counts: (delivered: Int, dropped: Int, waiting: Int, merged: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (deliveredCount, droppedCount, queue.count, mergedCount)
    }

    /// Queues an event: `fields` join `id`, `event`, `board` and `time` in its JSON body. With
    /// `merge`, an event of the same kind for the same board still waiting (not yet tried)
    /// takes the newer one's fields through it (and its time) instead. Returns the idempotency
    /// key of the event that will carry it.
    @discardableResult
    public func enqueue(event: String, board: String, fields: [String: any Sendable] = [:], at time: Double = Date().timeIntervalSince1970,
                        merge: Merge? = nil) -> String {
        condition.lock()
        if let merge, let index = queue.lastIndex(where: { $0.event == event && $0.board == board && $0.body == nil && $0.id != inFlight }) {
            queue[index].fields = merge(queue[index].fields, fields)
            queue[index].time = time
            mergedCount += 1
            let id = queue[index].id
            condition.unlock()
            return id
        }
        var generator = SystemRandomNumberGenerator()
        let id = SigV4.hex((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
        queue.append(Delivery(id: id, event: event, board: board, fields: fields, time: time, priority: Priority(event: event)))
        var dropped: Delivery?
        if queue.count > options.maxQueued {
            // The oldest of the lowest priority waiting; never the one being tried.
            var victim: Int?
            for index in queue.indices where queue[index].id != inFlight {
                if victim == nil || queue[index].priority < queue[victim!].priority { victim = index }
            }
            if let victim {
                dropped = queue.remove(at: victim)
                droppedCount += 1
            }
        }
        condition.signal()
        condition.unlock()
        if let dropped {
            log("webhook: \(options.maxQueued) events are waiting (--webhook-queue), the receiver is not taking them: dropped \(dropped.event) of board '\(dropped.board)' (id \(dropped.id)), the oldest of the lowest priority waiting")
        }
        return id
    }

    /// The JSON body of an event.
    static func body(_ delivery: Delivery) -> [UInt8] {
        var object: [String: Any] = ["id": delivery.id, "event": delivery.event, "board": delivery.board, "time": BackupManifest.timestamp(delivery.time)]
        for (key, value) in delivery.fields { object[key] = value }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])).map(Array.init) ?? []
    }

    /// Stops delivering (events still waiting are dropped).
    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    /// The header's value for `body`.
    public static func signature(_ body: [UInt8], secret: [UInt8]) -> String {
        "sha256=" + SigV4.hex(HMAC.sha256(key: secret, message: body))
    }

    private func run() {
        var delay = options.retryFirst
        let client = HTTPClient(timeout: options.timeout, maxResponseBytes: 64 << 10, tls: options.tls)
        while true {
            condition.lock()
            while queue.isEmpty && !stopped { condition.wait() }
            if stopped { condition.unlock(); return }
            if queue[0].body == nil { queue[0].body = Self.body(queue[0]) }
            let delivery = queue[0]
            inFlight = delivery.id
            condition.unlock()
            let outcome = attempt(delivery, client)
            condition.lock()
            inFlight = nil
            switch outcome {
            case .delivered, .refused:
                if let index = queue.firstIndex(where: { $0.id == delivery.id }) { queue.remove(at: index) }
                if case .delivered = outcome { deliveredCount += 1 } else { droppedCount += 1 }
                delay = options.retryFirst
            case .retry:
                // Waits, or until stopped; a newer event never overtakes this one (unless a
                // full queue drops it meanwhile).
                let until = Date().addingTimeInterval(delay)
                while !stopped, Date() < until { _ = condition.wait(until: until) }
                delay = min(delay * 2, options.retryMax)
            }
            condition.unlock()
        }
    }

    private enum Outcome { case delivered, refused, retry }

    /// At most 200 characters of an answer's body for a log line, escaped (it is the
    /// receiver's text: it must not forge log lines).
    static func excerpt(_ body: [UInt8]) -> String {
        guard !body.isEmpty else { return "" }
        let text = String(decoding: body.prefix(800), as: UTF8.self)
        return ": " + LogText.quoted(text, limit: 200)
    }

    private func attempt(_ delivery: Delivery, _ client: HTTPClient) -> Outcome {
        let body = delivery.body ?? []
        let headers = [("Content-Type", "application/json"), ("User-Agent", "board-sync"),
                       ("X-BoardSync-Event", delivery.event), ("Idempotency-Key", delivery.id),
                       ("X-BoardSync-Signature", WebhookSender.signature(body, secret: options.secret))]
        let what = "webhook: \(delivery.event) of board '\(delivery.board)' (id \(delivery.id)) to \(options.url.redacted)"
        do {
            let response = try client.request("POST", options.url, headers: headers, body: body)
            switch response.status {
            case 200..<300:
                return .delivered
            case 408, 429, 500..<600:
                log("\(what): the receiver answered \(response.status)\(Self.excerpt(response.body)); retrying")
                return .retry
            default:
                log("\(what): the receiver refused it with \(response.status)\(Self.excerpt(response.body)); dropped")
                return .refused
            }
        } catch {
            log("\(what): \(LogText.quoted("\(error)", limit: 300)); retrying")
            return .retry
        }
    }
}
