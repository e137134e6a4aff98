import BoardCRDT
import BoardStore
import BoardSync
import Foundation

/// `board-sync sync`: an offline replica meets the server once, both directions, assets
/// included, and returns when each side holds the other's operations.
public enum OneShotSync {
    public struct Report: Sendable {
        /// Operations this replica lacked and now holds, and operations the server lacked that
        /// this replica held: counted by version vectors, so one side's "sent" is the other's
        /// "received" (operations compaction dropped count too: their effect travels).
        public var operationsReceived: Int
        public var operationsSent: Int
        public var bytesSent: Int
        public var bytesReceived: Int
        public var missingAssets: Int
        public var seconds: Double
    }

    public enum Failure: Error, CustomStringConvertible {
        case unreachable(String)
        case closed(String)
        /// The server ended the session with an ERROR (the code and message).
        case refused(SessionError)
        /// This side ended the session: the server broke the protocol, or went silent.
        case abandoned(SessionError)
        /// Nothing decided within the timeout; the text says what was still awaited.
        case timedOut(Double, waitingFor: String)
        /// The server said the token expired (`SessionError.Code.tokenExpired`): a fresh token
        /// would be let in.
        case tokenExpired(String)

        public var description: String {
            switch self {
            case .tokenExpired(let why): return "the token expired (\(why)): get a fresh token (`board-sync token`) and sync again"
            case .unreachable(let why): return "cannot reach the server: \(why)"
            case .closed(let why): return "the server closed the connection: \(why)"
            case .refused(let error): return "the server refused: \(error.summary)"
            case .abandoned(let error): return "closed the connection to the server: \(error.summary)"
            case .timedOut(let seconds, let awaited):
                return "no result after \(Int(seconds)) s (still waiting for \(awaited)); the server may be overloaded or unreachable"
            }
        }

        /// The server turned the sync away for now (its storage, its load): worth a retry.
        public var isRetryable: Bool {
            if case .refused(let error) = self { return error.recovery == .retry }
            return false
        }
    }

    /// Why a session closed, as the failure to report: a server saying the token expired is
    /// told apart (a fresh token would be let in), and so is who ended it.
    private static func failure(closedFor reason: SessionError) -> Failure {
        if reason.remote { return reason.code == .tokenExpired ? .tokenExpired(reason.message) : .refused(reason) }
        return .abandoned(reason)
    }

    public static func run(package: BoardPackage, board: String, server: SocketAddress, timeout: Double = 60,
                           credentials: [UInt8] = [], tls: TLSContext? = nil, log: @escaping (String) -> Void = { _ in }) throws -> Report {
        let loop = try EventLoop()
        var options = SyncHost.Options()
        options.reconnect = false
        options.credentials = credentials
        options.clientTLS = tls
        options.log = log
        let host = try SyncHost(board: board, store: package, listen: nil, loop: loop, options: options)
        let start = EventLoop.now()
        let startVersion = package.replica.versionVector
        var failure: Failure?
        var done = false
        var sawOpen = false
        var bytes = (sent: 0, received: 0)
        var serverHad = VersionVector.empty
        let hub = host.boards[board]!.hub
        host.onProgress = {
            if let session = hub.sessionIDs.first.flatMap(hub.session) {
                if session.isOpen { sawOpen = true }
                bytes = (max(bytes.sent, session.bytesSent), max(bytes.received, session.bytesReceived))
            }
            guard !done, failure == nil else { return }
            guard let id = hub.sessionIDs.first, let session = hub.session(id) else {
                if host.connectionCount == 0 {
                    if let reason = host.lastCloseReason {
                        failure = Self.failure(closedFor: reason)
                    } else {
                        let why = host.lastTransportError
                        failure = sawOpen ? .closed(why ?? "before both sides were in sync")
                                          : .unreachable(why ?? "connection refused or closed")
                    }
                    loop.stop()
                }
                return
            }
            if session.isClosed {
                failure = session.closeReason.map(Self.failure(closedFor:)) ?? .closed("goodbye before both sides were in sync")
                loop.stop()
                return
            }
            guard session.isOpen, hub.hasSynced(id), let peer = session.peer else { return }
            let serverHolds = (hub.acknowledged(by: id) ?? .empty).merged(with: peer.version)
            guard serverHolds.dominates(package.replica.versionVector),
                  session.outstandingWants.isEmpty, host.isQuiet(board) else { return }
            done = true
            // Counted as received is: the operations the server held that this replica lacked
            // (its vector before the handshake against ours): the same count the other side's
            // "received" gives, probes and compaction notwithstanding.
            serverHad = peer.version
            host.shutdown(save: false)  // the caller's save below writes the view once
            loop.schedule(after: 0.01) { loop.stop() }
        }
        loop.schedule(after: timeout) {
            guard !done else { return }
            // What was still awaited, so a timeout says more than "no result".
            let awaited: String
            if let id = hub.sessionIDs.first, let session = hub.session(id), session.isOpen {
                if !hub.hasSynced(id) {
                    awaited = "the server's operations"
                } else if !session.outstandingWants.isEmpty {
                    awaited = "images asked for"
                } else if !(hub.acknowledged(by: id) ?? .empty).merged(with: session.peer?.version ?? .empty).dominates(package.replica.versionVector) {
                    awaited = "the server to acknowledge this replica's operations: it does so once its storage holds them"
                } else {
                    awaited = "the last bytes to be written"
                }
            } else {
                awaited = hub.sessionCount == 0 ? "the connection" : "the server's answer to the handshake"
            }
            failure = .timedOut(timeout, waitingFor: awaited)
            loop.stop()
        }
        host.connect(to: server)
        loop.run()
        if let failure { throw failure }
        host.finishViewSaves(waiting: true)  // a view save the host started has finished
        try package.save()
        let received = package.replica.versionVector.totalCount - startVersion.totalCount
        let sent = startVersion.entries.reduce(UInt64(0)) { $0 + ($1.value > serverHad[$1.key] ? $1.value - serverHad[$1.key] : 0) }
        return Report(operationsReceived: Int(received), operationsSent: Int(sent),
                      bytesSent: bytes.sent, bytesReceived: bytes.received,
                      missingAssets: package.replica.missingAssets.count, seconds: EventLoop.now() - start)
    }
}
