import BoardCRDT

/// History on demand (docs/PROTOCOL.md, "History on demand"): a hub reads no history (it is
/// sans-IO and its store may keep none). A peer's request, already bounded by its session
/// (capability, requests in flight and per second), goes to whoever drives the hub as an
/// event; the answer comes back through `answerHistory`. Any session the hub let in may ask:
/// every role that opens a board reads it, and history shows nothing the board did not.
extension BoardHub {
    func historyRequested(_ request: HistoryRequest, from id: SessionID) {
        emit(.historyRequested(session: id, request))
    }

    func historyAnswered(_ answer: HistoryAnswer, from id: SessionID) {
        emit(.historyAnswered(session: id, answer))
    }

    /// Answers a session's history request (ignored when the session closed meanwhile or no
    /// such request waits).
    package func answerHistory(_ id: SessionID, _ answer: HistoryAnswer) {
        _ = withSession(id) { $0.answerHistory(answer) }
    }

    /// Asks the peer of a session for history; false when the session cannot (see
    /// `SyncSession.requestHistory`).
    package func requestHistory(_ id: SessionID, _ request: HistoryRequest) -> Bool {
        withSession(id) { $0.requestHistory(request) } ?? false
    }
}
