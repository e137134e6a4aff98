import BoardModel
import Foundation

/// Webhook delivery (docs/DEPLOYMENT.md, "Webhooks") on a thread of its own: events wait in a
/// bounded queue and go out one at a time, in order, each a POST of its JSON body signed with
/// HMAC-SHA256 (`X-BoardSync-Signature: sha256=<hex>`) and carrying its idempotency key
/// (`Idempotency-Key`, the same on every retry). A 2xx delivers; a 5xx, 408, 429, a timeout or
/// a failed connection is retried with backoff; any other answer drops the event with a log
/// line. When the queue is full the oldest event is dropped, with a log line naming it.
/// `enqueue` may be called from any thread; it never blocks on the network.
public final class WebhookSender: @unchecked Sendable {
    public struct Options: Sendable {
        public var url: HTTPClient.URLParts
        /// The HMAC key (never logged).
        public var secret: [UInt8]
        /// Events waiting at most (the oldest dropped beyond).
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

    struct Delivery {
        var id: String
        var event: String
        var board: String
        var body: [UInt8]
    }

    public let options: Options
    private let log: @Sendable (String) -> Void
    private let condition = NSCondition()
    // Guarded by `condition`:
    private var queue: [Delivery] = []
    private var stopped = false
    private var deliveredCount = 0
    private var droppedCount = 0

    public init(options: Options, log: @escaping @Sendable (String) -> Void) {
        self.options = options
        self.log = log
        let thread = Thread { [self] in self.run() }
        thread.name = "board-sync.webhooks"
        thread.start()
    }

    /// Events delivered and dropped so far.
    public var counts: (delivered: Int, dropped: Int, waiting: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (deliveredCount, droppedCount, queue.count)
    }

    /// Queues an event: `fields` join `id`, `event`, `board` and `time` in its JSON body.
    /// Returns its idempotency key.
    @discardableResult
    public func enqueue(event: String, board: String, fields: [String: any Sendable] = [:], at time: Double = Date().timeIntervalSince1970) -> String {
        var generator = SystemRandomNumberGenerator()
        let id = SigV4.hex((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
        var object: [String: Any] = ["id": id, "event": event, "board": board, "time": BackupManifest.timestamp(time)]
        for (key, value) in fields { object[key] = value }
        let body = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])).map(Array.init) ?? []
        condition.lock()
        queue.append(Delivery(id: id, event: event, board: board, body: body))
        var dropped: Delivery?
        if queue.count > options.maxQueued {
            dropped = queue.removeFirst()
            droppedCount += 1
        }
        condition.signal()
        condition.unlock()
        if let dropped {
            log("webhook: \(options.maxQueued) events are waiting (--webhook-queue), the receiver is not taking them: dropped the oldest, \(dropped.event) of board '\(dropped.board)' (id \(dropped.id))")
        }
        return id
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
            let delivery = queue[0]
            condition.unlock()
            let outcome = attempt(delivery, client)
            condition.lock()
            switch outcome {
            case .delivered, .refused:
                if queue.first?.id == delivery.id { queue.removeFirst() }
                if case .delivered = outcome { deliveredCount += 1 } else { droppedCount += 1 }
                delay = options.retryFirst
            case .retry:
                // Waits, or until stopped; a newer event never overtakes this one.
                let until = Date().addingTimeInterval(delay)
                while !stopped, Date() < until { _ = condition.wait(until: until) }
                delay = min(delay * 2, options.retryMax)
            }
            condition.unlock()
        }
    }

    private enum Outcome { case delivered, refused, retry }

    private func attempt(_ delivery: Delivery, _ client: HTTPClient) -> Outcome {
        let headers = [("Content-Type", "application/json"), ("User-Agent", "board-sync"),
                       ("X-BoardSync-Event", delivery.event), ("Idempotency-Key", delivery.id),
                       ("X-BoardSync-Signature", WebhookSender.signature(delivery.body, secret: options.secret))]
        do {
            let response = try client.request("POST", options.url, headers: headers, body: delivery.body)
            switch response.status {
            case 200..<300:
                return .delivered
            case 408, 429, 500..<600:
                log("webhook: \(delivery.event) of board '\(delivery.board)' (id \(delivery.id)): the receiver answered \(response.status); retrying")
                return .retry
            default:
                log("webhook: \(delivery.event) of board '\(delivery.board)' (id \(delivery.id)): the receiver refused it with \(response.status); dropped")
                return .refused
            }
        } catch {
            log("webhook: \(delivery.event) of board '\(delivery.board)' (id \(delivery.id)) to \(options.url.hostHeader): \(error); retrying")
            return .retry
        }
    }
}
