import BoardCRDT
import BoardStore
import BoardSync
import Dispatch
import Foundation

/// History on demand (docs/PROTOCOL.md, "History on demand"): a session's history request,
/// already bounded by the session (capability, `historyRequestsInFlight`,
/// `historyRequestsPerSecond`), is answered from the board package's archive and log. What it
/// costs the host, and the bounds (`Options` fields):
/// - the history is captured on the loop (`BoardPackage.historyReading()`: the live log and the
///   index, which compaction keeps small) and read and parsed off the loop, on the host's one
///   history queue (history work never takes more than one core), for at most
///   `maxHistoryBoards` boards at once (the least recently used is dropped); a history over
///   `maxHistoryBytes` on disk is refused (`tooLarge`), unread;
/// - a board's history is read again only when the board changed and the last read is older
///   than `historyRefreshInterval` (a request sooner is answered from the history read then:
///   its `total` says how far it goes);
/// - each answer is made on that queue too: at most `SessionLimits.maxHistoryAnswer` bytes of
///   entries (and one view, the board at a records range's start, from the nearest checkpoint);
/// - requests wait for a read in flight per board; they are at most one per session
///   (`historyRequestsInFlight`), so bounded by the connections;
/// - a connection with more than `maxHistoryAnswer` bytes of output unread (in the session and
///   the transport) is answered `busy`, unread: a client that never reads holds at most about
///   one answer on the server;
/// - `servesHistory = false` answers every request `unavailable`, reading nothing.
extension SyncHost {
    /// One board's history as this host read it.
    final class HistoryServing {
        var history: BoardHistory?
        var version: VersionVector = .empty
        var readAt = -Double.infinity
        var reading = false
        var waiting: [(SessionID, HistoryRequest)] = []
        var lastUsed: Double = 0
    }

    func historyRequested(board: String, session id: SessionID, _ request: HistoryRequest) {
        guard options.servesHistory, let package = endpoint.boards[board]?.store as? BoardPackage else {
            return answerHistory(id, .refusal(request, .unavailable, "this host keeps no history for board '\(board)'"))
        }
        // A connection that does not read its answers gets no more of them: at most about one
        // answer waits in its output, whatever it asks.
        let queued = (connections[id]?.queuedBytes ?? 0) + (endpoint.session(id)?.pendingOutputCount ?? 0)
        if queued > options.limits.maxHistoryAnswer {
            return answerHistory(id, .refusal(request, .busy, "\(queued) bytes of output wait unread on this connection; read them first"))
        }
        let now = EventLoop.now()
        let serving = historyServing[board] ?? HistoryServing()
        historyServing[board] = serving
        serving.lastUsed = now
        serving.waiting.append((id, request))
        if serving.reading { return }
        let current = package.replica.versionVector
        if serving.history != nil, serving.version == current || now - serving.readAt < options.historyRefreshInterval {
            return answerWaiting(board, serving)
        }
        let reading: HistoryReading
        do {
            reading = try package.historyReading()
        } catch {
            options.log("board '\(board)': history could not be read: \(error)")
            return refuseWaiting(serving, .unavailable, "the server could not read this board's history (its log says why)")
        }
        let bytes = reading.approximateBytes()
        guard bytes <= options.maxHistoryBytes else {
            return refuseWaiting(serving, .tooLarge, "this board's history is \(bytes) bytes, over the \(options.maxHistoryBytes) this server reads for a peer")
        }
        serving.reading = true
        historyReads += 1
        evictHistories(keeping: board)
        let box = WeakHost(self)
        let loop = self.loop
        historyQueue.async {
            let result = Result { try reading.read() }
            loop.execute { box.host?.historyRead(board, result, version: current) }
        }
    }

    private func historyRead(_ board: String, _ result: Result<BoardHistory, any Error>, version: VersionVector) {
        guard let serving = historyServing[board] else { return }
        serving.reading = false
        serving.readAt = EventLoop.now()
        switch result {
        case .success(let history):
            serving.history = history
            serving.version = version
            answerWaiting(board, serving)
        case .failure(let error):
            options.log("board '\(board)': history could not be read: \(error)")
            serving.history = nil
            refuseWaiting(serving, .unavailable, "the server could not read this board's history (its log says why)")
        }
    }

    /// Makes the answers of the requests waiting on the history queue, then sends them.
    private func answerWaiting(_ board: String, _ serving: HistoryServing) {
        guard let history = serving.history else { return }
        let waiting = serving.waiting
        serving.waiting = []
        let limits = options.limits
        let box = WeakHost(self)
        let loop = self.loop
        historyQueue.async {
            let answers = waiting.map { ($0.0, history.answer($0.1, limits: limits)) }
            loop.execute {
                guard let host = box.host else { return }
                for (id, answer) in answers { host.answerHistory(id, answer) }
            }
        }
    }

    private func refuseWaiting(_ serving: HistoryServing, _ status: HistoryAnswer.Status, _ message: String) {
        let waiting = serving.waiting
        serving.waiting = []
        for (id, request) in waiting { answerHistory(id, .refusal(request, status, message)) }
    }

    func answerHistory(_ id: SessionID, _ answer: HistoryAnswer) {
        endpoint.answerHistory(id, answer)
        flushNoted()
        flush(id)
        armTimer()
        onProgress?()
    }

    /// Keeps at most `maxHistoryBoards` histories (the least recently used goes first; one
    /// being read stays).
    private func evictHistories(keeping board: String) {
        while historyServing.values.filter({ $0.history != nil || $0.reading }).count > options.maxHistoryBoards {
            guard let oldest = historyServing.filter({ $0.key != board && !$0.value.reading && $0.value.waiting.isEmpty })
                .min(by: { $0.value.lastUsed < $1.value.lastUsed })?.key else { return }
            historyServing[oldest] = nil
        }
    }

    /// Forgets the history of a board that closed.
    func forgetHistory(_ board: String) {
        if let serving = historyServing[board], !serving.reading, serving.waiting.isEmpty { historyServing[board] = nil }
    }
}

