import BoardCRDT
import BoardModel
import BoardNet
import BoardRedis
import BoardRedisNet
import BoardStore
import BoardSync
import Dispatch
import Foundation
import Glibc

/// `serve`'s limits: each a flag with a default (docs/PROTOCOL.md, Limits).
enum ServeLimits {
    static let flags: [(name: String, value: Double, help: String)] = [
        ("max-connections", 4096, "Connections open at once; beyond, `busy`."),
        ("max-connections-per-address", 64, "Connections from one IP address; beyond, `busy`."),
        ("max-ops-per-second", 5000, "Live operations per second per connection, sustained (bursts of 5 s pass); beyond, `too many operations per second`."),
        ("max-boards", 100_000, "Boards the data directory may hold; creating more, `limit reached`."),
        ("max-open-boards", 1024, "Boards open at once (idle ones close first); beyond, retry later."),
        ("idle-board-seconds", 60, "Seconds a board nobody is connected to stays open before it is saved and closed."),
        ("max-assets-per-board", 100_000, "Images one board may hold; beyond, `limit reached`."),
        ("max-frame-mib", 16, "Largest frame, MiB; beyond, `frame too large`."),
        ("max-asset-mib", 64, "Largest image, MiB; beyond, `asset too large`."),
        ("max-queued-mib", 64, "Output queued for one connection, MiB; beyond, `slow reader`."),
        ("idle-timeout", 20, "Seconds without a byte before a connection closes."),
        ("handshake-timeout", 10, "Seconds a new connection has to send its HELLO."),
        ("view-save-seconds", 10, "Longest a busy board's view (manifest.json, images) may lag its op log; the log, what ACKs promise, is always current, and a view found older is rebuilt at open."),
        ("view-save-threads", 2, "Threads that write boards' views, so their fsyncs delay no other board; 0 writes them on the loop thread."),
        ("max-history-mib", 16, "History (archive and op log) of one board the server reads to answer peers' history requests (`history list --server`), MiB; a larger one is refused as `tooLarge`. A history read takes about eight times its bytes of memory while kept."),
        ("max-history-boards", 4, "Boards whose histories are kept in memory at once for peers' history requests; the least recently used is dropped first."),
    ]

    static func apply(_ args: Arguments, to options: inout SyncHost.Options) throws {
        if let text = args.value("view-save-threads") {
            let threads = try Parse.number(text, "--view-save-threads")
            guard threads >= 0, threads <= 64, threads == threads.rounded() else {
                throw UsageError("--view-save-threads '\(text)' must be a whole number from 0 to 64")
            }
            options.viewSaveThreads = Int(threads)
        }
        func value(_ name: String) throws -> Double {
            let fallback = flags.first { $0.name == name }!.value
            guard let text = args.value(name) else { return fallback }
            let number = try Parse.number(text, "--\(name)")
            guard number > 0, number <= 1e12 else { throw UsageError("--\(name) '\(text)' must be a positive number (at most 1e12)") }
            return number
        }
        /// Counts (connections, boards, images) are whole numbers: 2.5 is refused, not rounded.
        func count(_ name: String) throws -> Int {
            let number = try value(name)
            guard number == number.rounded() else { throw UsageError("--\(name) '\(args.value(name) ?? "")' must be a whole number") }
            return Int(number)
        }
        options.maxConnections = try count("max-connections")
        options.maxConnectionsPerAddress = try count("max-connections-per-address")
        options.maxOperationsPerSecond = try value("max-ops-per-second")
        options.maxBoards = try count("max-boards")
        options.maxOpenBoards = try count("max-open-boards")
        options.idleBoardTimeout = try value("idle-board-seconds")
        options.maxAssetsPerBoard = try count("max-assets-per-board")
        options.limits.maxFrame = Int(try value("max-frame-mib") * 1_048_576)
        options.limits.maxAsset = Int(try value("max-asset-mib") * 1_048_576)
        options.limits.maxQueuedBytes = Int(try value("max-queued-mib") * 1_048_576)
        options.maxHistoryBytes = Int(try value("max-history-mib") * 1_048_576)
        options.maxHistoryBoards = try count("max-history-boards")
        options.timing.idleTimeout = try value("idle-timeout")
        options.timing.handshakeTimeout = try value("handshake-timeout")
        // A server's views are for people and backups; saving 100 busy boards' views every
        // second cost half of a 1,000-client load's latency (docs/PERFORMANCE.md).
        options.saveMaxDelay = try value("view-save-seconds")
        options.saveQuietPeriod = min(2, options.saveMaxDelay / 4)
        guard options.timing.keepAlive < options.timing.idleTimeout else {
            throw UsageError("--idle-timeout must be longer than the \(Int(options.timing.keepAlive)) s keep-alive")
        }
    }
}
