/// Counters an endpoint keeps for an operator's metrics (`serve --admin`, `/metrics`): plain
/// integers on the endpoint's thread, bumped where the event happens (no locks, no clock: a
/// host that wants fsync latency injects `clock`). What can be counted at scrape time instead
/// (boards open, handshake deltas in flight, operations of open boards) is, so the hot path
/// pays nothing for it. Endpoint thread only.
public final class SyncMetrics {
    /// Seconds on some monotonic clock, for timing group commits' syncs (nil: not timed). The
    /// sans-IO endpoint reads no clock: `SyncHost` sets this to its loop's.
    public var clock: (() -> Double)?
    /// Tokens refused at a HELLO, by reason (`AccessRefusal.label`).
    public internal(set) var authFailures: [String: Int] = [:]
    /// Operations merged from peers and sent to peers by boards that have closed (open boards'
    /// are added at scrape time: `SyncEndpoint.operationTotals`).
    var retiredOperations = (received: 0, sent: 0)
    /// Operations made durable by each group commit (one sync of a board's log).
    public internal(set) var commitSizes = Histogram(bounds: [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096])
    /// Seconds each group commit's sync took (with `clock`).
    public internal(set) var syncSeconds = Histogram(bounds: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5])

    public init() {}

    /// A group commit of `operations` whose sync started at `started` (the clock's reading).
    func committed(_ operations: Int, started: Double?) {
        commitSizes.observe(Double(operations))
        if let started, let clock { syncSeconds.observe(max(0, clock() - started)) }
    }

    func refused(_ refusal: AccessRefusal) {
        authFailures[refusal.label, default: 0] += 1
    }
}

/// A Prometheus-style histogram: cumulative counts are made at exposition; here each
/// observation bumps one bucket (a binary search over a dozen bounds).
public struct Histogram: Sendable {
    /// Upper bounds, ascending (the `+Inf` bucket is implied).
    public let bounds: [Double]
    /// Observations per bucket (not cumulative); the last is above every bound.
    public private(set) var counts: [Int]
    public private(set) var sum: Double = 0
    public private(set) var count = 0

    public init(bounds: [Double]) {
        self.bounds = bounds
        counts = Array(repeating: 0, count: bounds.count + 1)
    }

    public mutating func observe(_ value: Double) {
        var low = 0
        var high = bounds.count
        while low < high {
            let middle = (low + high) / 2
            if value <= bounds[middle] { high = middle } else { low = middle + 1 }
        }
        counts[low] += 1
        sum += value
        count += 1
    }

    /// (upper bound, cumulative count) pairs, ending with `+Inf` (nil) and `count`.
    public var cumulative: [(bound: Double?, count: Int)] {
        var total = 0
        var result: [(bound: Double?, count: Int)] = []
        for (index, bound) in bounds.enumerated() {
            total += counts[index]
            result.append((bound, total))
        }
        result.append((nil, count))
        return result
    }
}

extension AccessRefusal {
    /// A short name for metrics' labels.
    public var label: String {
        switch self {
        case .missing: "missing"
        case .malformed: "malformed"
        case .badSignature: "bad_signature"
        case .otherBoard: "other_board"
        case .expired: "expired"
        case .revoked: "revoked"
        case .invalidBoardName: "invalid_board_name"
        case .adminToken: "admin_token"
        case .notAdmin: "not_admin"
        }
    }
}

extension SyncEndpoint {
    /// Operations merged from peers and sent to peers since the endpoint started (boards that
    /// closed, plus the open boards' own counts).
    public var operationTotals: (received: Int, sent: Int) {
        var totals = metrics.retiredOperations
        for board in boards.values {
            totals.received += board.hub.operationsMerged
            totals.sent += board.hub.operationsSent
        }
        return totals
    }

    /// Sessions whose handshake delta (over 64 KiB) is not acknowledged yet, and its bytes.
    public var deltasInFlight: (count: Int, bytes: Int) {
        var result = (count: 0, bytes: 0)
        for board in boards.values {
            for peer in board.hub.peers.values where peer.deltaInFlight > 0 {
                result.count += 1
                result.bytes += peer.deltaInFlight
            }
        }
        return result
    }

    /// Connections still in their handshake (no HELLO routed yet, or refused and draining).
    public var handshakingCount: Int { links.values.filter(\.isHandshaking).count }

    /// Bytes sent and received by every session this endpoint has had.
    public var byteTotals: (sent: Int, received: Int) { sessionBytes }
}
