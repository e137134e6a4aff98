import BoardCRDT
import BoardModel
import BoardSync
import Foundation

/// Fetching the history a server holds for a board (docs/CLIENT.md, "History from the server";
/// docs/PROTOCOL.md, "History on demand"): dials, says HELLO as a fresh replica that holds
/// nothing (so the server's handshake delta, the board as it is now, comes as in any first
/// sync, and is dropped; its images are never asked for), then sends the requests `next` makes one at a time, each answer
/// handed back to `next`, until it returns nil. Runs its own event loop on the caller's thread.
///
/// What a hostile server can make it hold: one answer at a time (a frame, at most
/// `SessionLimits.maxFrame`), what `next` keeps of them (the callers bound it: `maxVersions`,
/// `maxAnswers`), and one catch-up delta; it gives up after `timeout` seconds in all.
public enum HistoryFetch {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// Answers taken in one fetch at most (a server that never says the range is done).
    public static let maxAnswers = 10_000

    public static func run(server: SocketAddress, board: String, options given: SyncHost.Options = SyncHost.Options(),
                           timeout: Double = 60, next: @escaping (HistoryAnswer?) throws -> HistoryRequest?) throws {
        var options = given
        options.reconnect = false
        options.viewSaveThreads = 0
        options.servesHistory = false
        options.fetchesImages = false  // the catch-up's operations are dropped; its images are not fetched
        let loop = try EventLoop()
        let host = try SyncHost(board: board, store: MemoryReplicaStore(replica: Replica(id: options.newReplicaID())),
                                listen: nil, loop: loop, options: options)
        var outcome: Result<Void, any Error>?
        var session: SessionID?
        var requestID: UInt64 = 0
        var answers = 0
        var lastRequest: HistoryRequest?
        var busyRetries = 0
        func finish(_ result: Result<Void, any Error>) {
            guard outcome == nil else { return }
            outcome = result
            host.shutdown(save: false)
            loop.stop()
        }
        func send(_ request: HistoryRequest?) {
            guard let request, let session else { return finish(.success(())) }
            requestID += 1
            var numbered = request
            numbered.id = requestID
            lastRequest = request
            guard host.endpoint.requestHistory(session, numbered) else {
                return finish(.failure(Failure("the server does not serve history (a build from before history on demand)")))
            }
            host.refresh()
        }
        host.onHistoryAnswer = { id, answer in
            guard id == session, answer.id == requestID else { return }
            answers += 1
            guard answers <= maxAnswers else { return finish(.failure(Failure("the server sent more than \(maxAnswers) answers for one fetch"))) }
            if answer.status == .busy, busyRetries < 20, let again = lastRequest {
                // Over the server's requests per second: the same request a little later.
                busyRetries += 1
                _ = loop.schedule(after: 0.3) { if outcome == nil { send(again) } }
                return
            }
            do { send(try next(answer)) } catch { finish(.failure(error)) }
        }
        host.onProgress = {
            guard outcome == nil else { return }
            if session == nil, let id = host.endpoint.sessions(of: board).first, let open = host.endpoint.session(id), open.isOpen {
                session = id
                guard open.peerSupportsHistory else {
                    return finish(.failure(Failure("the server does not serve history (a build from before history on demand)")))
                }
                do { send(try next(nil)) } catch { finish(.failure(error)) }
                return
            }
            // The link ended (a refusal at the HELLO, an error, a drop): the session is gone
            // from the endpoint, and the host kept why.
            let live = host.endpoint.sessions(of: board).contains { host.endpoint.session($0)?.isClosed == false }
            guard !live else { return }
            if let reason = host.lastCloseReason {
                finish(.failure(Failure(reason.remote ? "the server refused: \(reason.summary)" : "closed the connection: \(reason.summary)")))
            } else if let error = host.lastTransportError {
                finish(.failure(Failure("cannot connect: \(error)")))
            } else if session != nil {
                finish(.failure(Failure("the server closed the connection")))
            }
        }
        _ = loop.schedule(after: timeout) {
            finish(.failure(Failure("no answer within \(Int(timeout)) s")))
        }
        host.connect(to: server)  // this thread runs the loop below
        loop.run()
        try outcome?.get()
    }

    /// Every version the server's history lists (paged, `maxBytes` a page), at most `maxVersions`.
    public static func versions(server: SocketAddress, board: String, options: SyncHost.Options = SyncHost.Options(),
                                from: UInt64 = 1, through: UInt64 = HistoryRequest.maxNumber, maxVersions: Int = 1_000_000,
                                timeout: Double = 60) throws -> (total: UInt64, versions: [HistoryVersionInfo]) {
        var versions: [HistoryVersionInfo] = []
        var total: UInt64 = 0
        try run(server: server, board: board, options: options, timeout: timeout) { answer in
            guard let answer else { return HistoryRequest(id: 0, what: .versions, from: max(1, from), to: through) }
            total = answer.total
            return try collect(answer, into: &versions, from: from, through: through, maxVersions: maxVersions)
        }
        return (total, versions)
    }

    /// Takes one page of versions (checked: a refusal throws, numbers follow on from the
    /// versions already taken, pages advance, at most `maxVersions` in all) and returns the
    /// request for the next page, or nil when the range is complete.
    public static func collect(_ answer: HistoryAnswer, into versions: inout [HistoryVersionInfo], from: UInt64, through: UInt64,
                               maxVersions: Int) throws -> HistoryRequest? {
        try check(answer)
        guard answer.what == .versions else { throw Failure("the server answered a versions request with \(answer.what)") }
        if answer.total == 0 { return nil }
        var expected = versions.last.map { $0.number + 1 } ?? max(1, from)
        for version in answer.versions {
            guard version.number == expected else { throw Failure("the server listed version \(version.number) where \(expected) was due") }
            expected += 1
            versions.append(version)
            guard versions.count <= maxVersions else { throw Failure("the server lists more than \(maxVersions) versions") }
        }
        guard answer.next != 0 else { return nil }
        guard answer.next == expected, !answer.versions.isEmpty else { throw Failure("the server's page does not advance (next \(answer.next))") }
        return HistoryRequest(id: 0, what: .versions, from: answer.next, to: through)
    }

    /// The board a records answer starts with, which must be version `number`: decoded and
    /// validated as a peer's operations (a hostile server's bytes are refused, not trusted).
    public static func pastBoard(in answer: HistoryAnswer, at number: UInt64) throws -> (replica: Replica, time: Int64?) {
        try check(answer)
        guard let first = answer.records.first, first.number == number else { throw Failure("the server's answer holds no board at version \(number)") }
        var replica = Replica(id: ReplicaID(0))
        do {
            try replica.apply(try OperationBatch(decoding: first.batch))
        } catch {
            throw Failure("the server's board at version \(number) is invalid: \(error)")
        }
        return (replica, first.time)
    }

    /// The board at version `number` of the server's history (0: the empty board; nil: the
    /// latest), that version's number and time, and how many versions the history holds. The
    /// state is validated like any peer's operations. Images are not fetched.
    public static func board(at number: UInt64?, server: SocketAddress, board: String, options: SyncHost.Options = SyncHost.Options(),
                             timeout: Double = 60) throws -> (replica: Replica, number: UInt64, time: Int64?, total: UInt64) {
        var result: (Replica, UInt64, Int64?, UInt64)?
        try run(server: server, board: board, options: options, timeout: timeout) { answer in
            guard let answer else {
                if let number { return HistoryRequest(id: 0, what: .records, from: number, to: number) }
                return HistoryRequest(id: 0, what: .versions, from: 1, to: 1, maxBytes: 0)
            }
            try check(answer)
            if answer.what == .versions {
                // The latest: now that the history's size is known.
                return HistoryRequest(id: 0, what: .records, from: answer.total, to: answer.total)
            }
            let wanted = number ?? answer.total
            let (replica, time) = try pastBoard(in: answer, at: wanted)
            result = (replica, wanted, time, answer.total)
            return nil
        }
        guard let result else { throw Failure("no answer") }
        return result
    }

    static func check(_ answer: HistoryAnswer) throws {
        guard answer.status == .ok else {
            throw Failure("the server refused the history request (\(answer.status)): \(answer.message)")
        }
    }
}
