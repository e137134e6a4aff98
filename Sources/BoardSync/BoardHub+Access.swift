import BoardCRDT
import BoardModel

/// What a session may send: nothing (a read-only token), or live operations at a bounded rate.
/// Who may author which replica's operations is BoardHub+Authorship.swift.
extension BoardHub {
    /// A read-only session tried to write: it receives everything, but operations or image
    /// bytes it sends are refused (the session closes with `readOnly`), never applied or
    /// relayed, and no image is ever requested from it.
    func refuseWrite(_ id: SessionID, _ what: String) {
        log?("session \(id): refused \(what) from a read-only session")
        closeSession(id, SessionError(.readOnly, "this connection's token may only read board '\(board)'; its \(what) were not applied"))
    }

    /// Takes a live batch from the session's rate bucket (`maxOperationsPerSecond`, bursts of
    /// five seconds' worth); false, with the session closed (`tooFast`), when it has too few.
    func admitRate(of batch: OperationBatch, from id: SessionID) -> Bool {
        guard let rate = maxOperationsPerSecond, batch.base == nil, batch.covers == nil else { return true }
        let burst = rate * 5
        var bucket = peers[id]?.bucket ?? TokenBucket(rate: rate, burst: burst, now: now)
        defer { peers[id]?.bucket = bucket }
        guard bucket.take(Double(batch.operations.count), now: now) else {
            log?("session \(id): more than \(Int(rate)) operations per second; closed")
            closeSession(id, SessionError(.tooFast, "more than \(Int(rate)) operations per second (bursts of \(Int(burst)) allowed); slow down"))
            return false
        }
        return true
    }
}
