import BoardSync
import Foundation

/// `/metrics`: the Prometheus text exposition format (version 0.0.4), every family with HELP
/// and TYPE. Everything is read at scrape time on the loop thread from counters the host and
/// endpoint keep as plain integers (`SyncMetrics`, `SyncHost.closedByCode`) or from state they
/// hold anyway (connections, boards, queues): the hot path takes no lock and does no work
/// for metrics beyond an increment. Label values are fixed sets (ports, states, reasons, error
/// codes), never board names or addresses, so the answer's size does not grow with use.
extension AdminServer {
    /// Error codes that mean the peer sent something refused (a frame or what it carried).
    static let refusedFrameCodes: [SessionError.Code] = [
        .malformedFrame, .badChecksum, .frameTooLarge, .unsupportedVersion, .unknownMessage, .badBoardName,
        .unexpectedMessage, .invalidOperations, .assetMismatch, .assetTooLarge, .boardMismatch, .readOnly,
        .notAuthor, .tooFast, .limitReached,
    ]
    /// Every other code this side closes sessions with.
    static let otherCloseCodes: [SessionError.Code] = [
        .idleTimeout, .slowReader, .busy, .unauthorized, .tokenExpired, .storageUnavailable, .internalError, .shuttingDown, .boardDeleted,
    ]

    func metricsText() -> String {
        var out = MetricsText()
        let endpoint = host.endpoint
        let handshaking = endpoint.handshakingCount
        let syncOpen = max(0, host.connections.count - handshaking)
        let webClients = web.map { Array($0.clients.values) } ?? []
        let pages = webClients.filter { $0.socket != nil }.count
        out.family("boardsync_connections", .gauge, "Connections open now, by port and state.", [
            ([("port", "sync"), ("state", "handshaking")], Double(handshaking)),
            ([("port", "sync"), ("state", "open")], Double(syncOpen)),
            ([("port", "web"), ("state", "request")], Double(webClients.count - pages)),
            ([("port", "web"), ("state", "page")], Double(pages)),
            ([("port", "admin"), ("state", "open")], Double(clients.count)),
        ])
        out.family("boardsync_connections_accepted_total", .counter, "Connections accepted on the sync port.",
                   [([], Double(host.acceptedTotal))])
        out.family("boardsync_boards_open", .gauge, "Boards open now (loaded from storage).", [([], Double(endpoint.boards.count))])
        out.family("boardsync_web_pages", .gauge, "Web view pages connected now (their WebSocket open).", [([], Double(pages))])
        let operations = endpoint.operationTotals
        out.family("boardsync_operations_received_total", .counter, "Operations merged from peers (new ones only).",
                   [([], Double(operations.received))])
        out.family("boardsync_operations_sent_total", .counter, "Operations sent to peers (handshake deltas and live relays).",
                   [([], Double(operations.sent))])
        let bytes = endpoint.byteTotals
        out.family("boardsync_bytes_received_total", .counter, "Bytes of sync frames received.", [([], Double(bytes.received))])
        out.family("boardsync_bytes_sent_total", .counter, "Bytes of sync frames sent.", [([], Double(bytes.sent))])
        out.family("boardsync_frames_refused_total", .counter, "Sessions closed because the peer sent something refused, by error code.",
                   Self.refusedFrameCodes.map { ([("reason", "\($0)")], Double(host.closedByCode[$0] ?? 0)) })
        out.family("boardsync_sessions_closed_total", .counter, "Sessions this server closed for other reasons (timeouts, slow readers, busy, tokens), by error code.",
                   Self.otherCloseCodes.map { ([("reason", "\($0)")], Double(host.closedByCode[$0] ?? 0)) })
        var auth: [([(String, String)], Double)] = []
        let reasons = ["missing", "malformed", "bad_signature", "other_board", "expired", "revoked", "invalid_board_name", "admin_token", "not_admin"]
        for reason in reasons { auth.append(([("port", "sync"), ("reason", reason)], Double(endpoint.metrics.authFailures[reason] ?? 0))) }
        for reason in reasons { auth.append(([("port", "admin"), ("reason", reason)], Double(authFailures[reason] ?? 0))) }
        if let web { for reason in reasons { auth.append(([("port", "web"), ("reason", reason)], Double(web.authFailures[reason] ?? 0))) } }
        out.family("boardsync_auth_failures_total", .counter, "Tokens refused, by port (sync, admin, web) and reason.", auth)
        out.family("boardsync_rate_limited_sessions_total", .counter, "Sessions closed for sending more operations per second than --max-ops-per-second.",
                   [([], Double(host.closedByCode[.tooFast] ?? 0))])
        out.histogram("boardsync_fsync_seconds", "Seconds each group commit's fsync of a board's log took.", endpoint.metrics.syncSeconds)
        out.histogram("boardsync_group_commit_operations", "Operations made durable by each group commit (one fsync).", endpoint.metrics.commitSizes)
        out.family("boardsync_queued_output_bytes", .gauge, "Bytes waiting to go out on sync connections: in sessions (not yet handed to the socket) and in send buffers.", [
            ([("where", "session")], Double(host.connections.keys.reduce(0) { $0 + endpoint.pendingOutput(for: $1) })),
            ([("where", "transport")], Double(host.connections.values.reduce(0) { $0 + $1.queuedBytes })),
        ])
        let deltas = endpoint.deltasInFlight
        out.family("boardsync_handshake_deltas_in_flight", .gauge, "Handshake deltas (over 64 KiB) sent and not yet acknowledged.", [([], Double(deltas.count))])
        out.family("boardsync_handshake_delta_bytes_in_flight", .gauge, "Bytes of the handshake deltas in flight.", [([], Double(deltas.bytes))])
        out.family("boardsync_admin_requests_total", .counter, "Requests answered on the admin port, by status.",
                   requests.keys.sorted().map { ([("status", $0)], Double(requests[$0] ?? 0)) })
        out.family("boardsync_ready", .gauge, "1 when /readyz answers 200, 0 when it answers 503.", [([], readinessFailure() == nil ? 1 : 0)])
        out.family("process_resident_memory_bytes", .gauge, "Resident memory size in bytes.", [([], Double(Self.residentBytes()))])
        out.family("process_start_time_seconds", .gauge, "Start time of the process since the Unix epoch, in seconds.", [([], started)])
        var text = out.text
        for extra in options.extraMetrics { text += extra() }
        return text
    }

    /// Resident memory from /proc/self/statm (its second field, in pages).
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// Builds the text exposition format: `# HELP`, `# TYPE`, then the samples, label values
/// escaped (backslash, double quote, newline).
public struct MetricsText {
    public enum Kind: String { case counter, gauge, histogram }
    public private(set) var text = ""

    public init() {}

    public mutating func family(_ name: String, _ kind: Kind, _ help: String, _ samples: [([(String, String)], Double)]) {
        text += "# HELP \(name) \(Self.escapedHelp(help))\n# TYPE \(name) \(kind.rawValue)\n"
        for (labels, value) in samples { text += Self.sample(name, labels, value) }
    }

    public mutating func histogram(_ name: String, _ help: String, _ histogram: Histogram) {
        text += "# HELP \(name) \(Self.escapedHelp(help))\n# TYPE \(name) histogram\n"
        for (bound, count) in histogram.cumulative {
            text += Self.sample(name + "_bucket", [("le", bound.map(Self.number) ?? "+Inf")], Double(count))
        }
        text += Self.sample(name + "_sum", [], histogram.sum)
        text += Self.sample(name + "_count", [], Double(histogram.count))
    }

    static func sample(_ name: String, _ labels: [(String, String)], _ value: Double) -> String {
        let labelText = labels.isEmpty ? "" : "{" + labels.map { "\($0.0)=\"\(escapedLabel($0.1))\"" }.joined(separator: ",") + "}"
        return "\(name)\(labelText) \(number(value))\n"
    }

    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    static func escapedLabel(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }

    static func escapedHelp(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }
}
