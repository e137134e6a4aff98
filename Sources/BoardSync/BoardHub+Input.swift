import BoardCRDT

/// Input: a session's bytes, its events each to the file that deals with it.
extension BoardHub {
    /// Feeds bytes from a session's connection; returns the session's events (for the host's
    /// logs and for one-shot clients that watch for completion).
    @discardableResult
    package func receive(_ id: SessionID, _ bytes: [UInt8], now: Double) -> [SessionEvent] {
        self.now = now
        guard let events = withSession(id, { $0.receive(bytes, now: now) }) else { return [] }
        // Group commit: consecutive live OPS frames from one read merge as one batch (one log
        // append, one fsync, one ACK, one relay). Complete deltas keep their own batch.
        var pending: [Op] = []
        for event in events {
            if case .operations(let batch) = event, batch.base == nil, batch.covers == nil {
                pending += batch.operations
                continue
            }
            if !pending.isEmpty {
                mergeFromPeer(id, OperationBatch(operations: pending))
                pending = []
            }
            handle(id, event)
        }
        if !pending.isEmpty { mergeFromPeer(id, OperationBatch(operations: pending)) }
        return events
    }

    /// One session event, to the file that deals with it.
    private func handle(_ id: SessionID, _ event: SessionEvent) {
        switch event {
        case .hello(let hello): receiveHello(hello, from: id)
        case .operations(let batch): mergeFromPeer(id, batch)
        case .acknowledged(let vector):
            withPeer(id) { peer in
                peer.deltaInFlight = 0
                peer.acknowledged = (peer.acknowledged ?? .empty).merged(with: vector)
                peer.known = (peer.known ?? .empty).merged(with: vector)
            }
        case .synced: peers[id]?.synced = true
        case .assetsWanted(let requests):
            for request in requests { serve(request, to: id) }
        case .assetChunk(let chunk): receiveChunk(chunk, from: id)
        case .assetUnavailable(let hash): peerLacks(hash, id)
        case .presence(let presence): receivePresence(presence, from: id)
        case .refused(let error, let operations): noteRefused(operations, error, from: id)
        case .historyRequested(let request): historyRequested(request, from: id)
        case .history(let answer): historyAnswered(answer, from: id)
        case .closed(let error):
            if let error { log?("session \(id) closed: \(error)") }
        }
    }
}
