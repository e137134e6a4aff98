import BoardCRDT
import BoardModel
import BoardNet
import BoardSync

// The history the server holds (docs/CLIENT.md, "History from the server"): asked on the live
// connection, answered in bounded pages, never sent unasked. A replica that joined late sees
// versions from before it joined (its own package's `history()` starts where it joined).
//
// ```swift
// let (total, versions) = try await board.serverVersions()            // numbered 1...total
// let past = try await board.serverBoard(at: versions[3].number)      // the board at version 4
// ```

extension LiveBoard {
    /// Why a request for the server's history failed: offline, a server that serves none (or
    /// an older build), a refusal (its status and text), a link that dropped before the answer,
    /// or an answer that does not check out.
    public struct ServerHistoryError: Error, Sendable, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// Versions of the server's history numbered `from...through`, in pages of at most
    /// `SessionLimits.maxHistoryAnswer` bytes, at most `maxVersions`; and how many versions
    /// the server holds. Needs a live connection (`run()`); any token that opens the board may
    /// ask. Throws `ServerHistoryError`.
    public func serverVersions(from: UInt64 = 1, through: UInt64 = HistoryRequest.maxNumber,
                               maxVersions: Int = 100_000) async throws -> (total: UInt64, versions: [HistoryVersionInfo]) {
        var versions: [HistoryVersionInfo] = []
        var request: HistoryRequest? = HistoryRequest(id: 0, what: .versions, from: max(1, from), to: through)
        var total: UInt64 = 0
        var pages = 0
        while let next = request {
            let answer = try await askServer(next)
            total = answer.total
            pages += 1
            guard pages <= HistoryFetch.maxAnswers else { throw ServerHistoryError("the server's history does not end") }
            do {
                request = try HistoryFetch.collect(answer, into: &versions, from: from, through: through, maxVersions: maxVersions)
            } catch {
                throw ServerHistoryError("\(error)")
            }
        }
        return (total, versions)
    }

    /// The board at version `number` of the server's history (0: the empty board; nil: the
    /// latest), with that version's number and time. Images are those this board holds (the
    /// server sends operations only). Throws `ServerHistoryError`.
    public func serverBoard(at number: UInt64?) async throws -> (snapshot: BoardSnapshot, number: UInt64, time: Int64?) {
        var wanted = number
        if wanted == nil {
            let size = try await askServer(HistoryRequest(id: 0, what: .versions, from: 1, to: 1, maxBytes: 0))
            guard size.status == .ok else { throw ServerHistoryError("the server refused (\(size.status)): \(size.message)") }
            wanted = size.total
        }
        let at = wanted ?? 0
        let answer = try await askServer(HistoryRequest(id: 0, what: .records, from: at, to: at))
        var past: (replica: Replica, time: Int64?)
        do {
            past = try HistoryFetch.pastBoard(in: answer, at: at)
        } catch {
            throw ServerHistoryError("\(error)")
        }
        if let images = store?.replica.assets {
            for hash in past.replica.missingAssets { if let data = images.data(for: hash) { past.replica.assets.insert(data) } }
        }
        return (past.replica.snapshot(), at, past.time)
    }

    /// Sends one history request on the live connection and waits for its answer; a `busy`
    /// answer (the server's requests per second or in flight on this connection) is asked again
    /// after `historyRetryDelay`, up to `historyRetries` times, on the board's clock. The
    /// connection's limit in flight is one: a second caller is refused until the first is
    /// answered. Fails when the link drops first.
    public func askServer(_ request: HistoryRequest) async throws -> HistoryAnswer {
        var attempt = 0
        while true {
            let answer = try await askServerOnce(request)
            guard answer.status == .busy, attempt < Self.historyRetries else { return answer }
            attempt += 1
            try await clock.sleep(until: clock.now() + Self.historyRetryDelay)
        }
    }

    /// A `busy` history answer is asked again this many times, this many seconds apart (a
    /// server's default rate is 4 requests a second, bursts of 8).
    public static let historyRetries = 20
    public static let historyRetryDelay = 0.3

    private func askServerOnce(_ request: HistoryRequest) async throws -> HistoryAnswer {
        guard store != nil else { throw LiveBoardError.closed }
        guard let endpoint, let session = endpoint.session(sessionID), session.isOpen else {
            throw ServerHistoryError("not connected to the server (the history is asked on the live connection: run() first)")
        }
        guard session.peerSupportsHistory else { throw ServerHistoryError("the server does not serve history (a build from before history on demand)") }
        nextHistoryRequest += 1
        var numbered = request
        numbered.id = nextHistoryRequest
        guard endpoint.requestHistory(sessionID, numbered) else {
            throw ServerHistoryError("a history request is already waiting on this connection; ask again once it is answered")
        }
        signal()  // the run loop writes it
        return try await withCheckedThrowingContinuation { waiter in
            historyWaiters[numbered.id] = waiter
        }
    }

    /// An answer arrived (from `drainEvents`).
    func historyAnswered(_ answer: HistoryAnswer) {
        historyWaiters.removeValue(forKey: answer.id)?.resume(returning: answer)
    }

    /// The link that carried the requests is gone: nobody will answer them.
    func failHistoryWaiters(_ why: String) {
        let waiters = historyWaiters
        historyWaiters = [:]
        for waiter in waiters.values { waiter.resume(throwing: ServerHistoryError(why)) }
    }
}
