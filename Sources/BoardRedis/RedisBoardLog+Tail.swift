import BoardCRDT
import BoardSync

/// The tail: every caught-up board's stream is read by one blocking `XREAD` on the tail link,
/// and what other servers wrote is merged. A read that returned entries is checked against the
/// trim point before it counts toward a checkpoint (`verify`).
extension RedisBoardLog {
    /// The tail read (`pump`): a new `XREAD` when none is out, or `CLIENT UNBLOCK` when the one
    /// out does not cover the boards tailed now.
    func sendTailRead() {
        let tailing = boards.filter { $0.value.phase.isTailing }.map { (name: $0.key, lastID: $0.value.lastID) }.sorted { $0.name < $1.name }
        let names = tailing.map(\.name)
        guard up.contains(.tail), let id = tailState.clientID, !tailing.isEmpty else { return }
        switch tailState {
        case .idle(_, let notBefore) where notBefore <= now:
            let keys = names.map { streamKey($0) }
            let ids = tailing.map(\.lastID)
            let parts = ["XREAD", "COUNT", String(options.readCount), "BLOCK", String(options.blockMilliseconds), "STREAMS"] + keys + ids
            send(.read(Dictionary(uniqueKeysWithValues: zip(names, ids))), strings: parts, on: .tail)
            tailState = .reading(clientID: id, unblocking: false)
        case .reading(_, unblocking: false) where up.contains(.commands):
            guard let reading = tailChannel.requests.values.compactMap({ entry -> [String]? in
                if case .read(let starts) = entry.request { return starts.keys.sorted() }
                return nil
            }).first, reading != names else { return }
            // A board caught up (or closed) while the read blocks: end the read early so the
            // next one covers it.
            send(.unblock, strings: ["CLIENT", "UNBLOCK", String(id)])
            tailState = .reading(clientID: id, unblocking: true)
        default:
            break
        }
    }

    /// What the tail read returned (`XREAD`, each board's stream from `starts`).
    func tailRead(_ starts: [String: String], _ value: RESPValue) {
        tailState.readEnded()
        guard case .array(let streams?) = value else { return }
        for stream in streams {
            guard case .array(let pair?) = stream, pair.count == 2, let key = pair[0].text,
                  let board = boards.keys.first(where: { streamKey($0) == key }) else { continue }
            let entries = Self.entries(pair[1])
            for entry in entries { apply(entry, to: board, catchingUp: false) }
            guard !entries.isEmpty, let start = starts[board], boards[board]?.phase.isTailing == true else { continue }
            // Entries trimmed between `start` and the first one returned would be missed
            // silently: check the trim point before trusting this read for a checkpoint.
            if up.contains(.commands) {
                send(.verify(board, start), strings: ["HMGET", checkpointKey(board), "minid", "id"])
                boards[board]?.checkpoint.unverifiedReads += 1
            } else {
                reload(board, because: "a tail read could not be checked against the trim point")
            }
        }
    }

    /// The checkpoint's trim point and id after a tail read from `start` (`HMGET`).
    func verified(_ board: String, from start: String, _ value: RESPValue) {
        guard boards[board] != nil else { return }
        boards[board]?.checkpoint.unverifiedReads -= 1
        guard case .array(let items?) = value, items.count == 2 else { return }
        if let id = items[1].text, id != boards[board]?.checkpoint.id {
            // Another server wrote a checkpoint: count from there (one compactor is enough).
            boards.modify(board) { state in
                state.checkpoint.id = id
                state.checkpoint.entriesSince = 0
            }
        }
        // Trim points only move forward: one at or before `start` now was so during the read.
        if let minID = items[0].text, Self.streamID(minID) > Self.streamID(start) {
            reload(board, because: "the stream was trimmed past \(start) (this server fell behind)")
        }
    }

    /// Merges one stream entry (catch-up or tail) into the board's hub.
    func apply(_ entry: StreamEntry, to board: String, catchingUp: Bool) {
        let hub = boards.modify(board) { state in
            state.lastID = entry.id
            state.checkpoint.entriesSince += 1
            return state.hub
        }
        guard let hub else { return }
        // Live: entries this server wrote are already merged here.
        if !catchingUp, entry.node == options.node { return }
        guard let bytes = entry.bytes else {
            options.log("board '\(board)': stream entry \(entry.id) has no operations; skipped")
            return
        }
        let batch: OperationBatch
        do {
            batch = try OperationBatch(decoding: bytes)
        } catch {
            options.log("board '\(board)': stream entry \(entry.id) does not decode (\(error)); skipped")
            return
        }
        if catchingUp { boards[board]?.phase.raiseStreamVector(by: batch) }
        do {
            entriesMerged += 1
            try hub.mergeReplicated(batch, now: now)
        } catch {
            options.log("board '\(board)': stream entry \(entry.id) refused (\(error)); skipped")
        }
    }
}
