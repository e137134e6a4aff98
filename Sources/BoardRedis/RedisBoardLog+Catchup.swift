import BoardCRDT
import BoardSync

/// Catch-up: a board attached (or reloading) reads its checkpoint, then its stream after it a
/// range at a time, then checks the checkpoint is still the one loaded; then it is tailed
/// (`+Tail`). Hubs hold their HELLOs until then. The phases are in `Internal/RedisBoardLog+Board`.
extension RedisBoardLog {
    /// A board's next command (`pump`, board by board): its catch-up step, or when tailed, a
    /// checkpoint if one is due.
    func sendBoardCommand(_ name: String) {
        guard let state = boards[name] else { return }
        switch state.tombstone {
        case .unchecked(asked: false) where state.notBefore <= now:
            // No catch-up (nor greeting, nor append from this server's cache) before Redis
            // said the board has no tombstone.
            send(.tombstone(name), strings: ["GET", deletedKey(name)])
            boards[name]?.tombstone = .unchecked(asked: true)
            return
        case .unchecked, .deleted: return
        case .clear: break
        }
        switch state.phase {
        case .loadingCheckpoint(let progress, asked: false) where state.notBefore <= now:
            send(.loadCheckpoint(name), strings: ["HGETALL", checkpointKey(name)])
            boards[name]?.phase = .loadingCheckpoint(progress, asked: true)
        case .readingStream(let progress, asked: false) where state.notBefore <= now:
            send(.range(name), strings: ["XRANGE", streamKey(name), state.lastID == "0-0" ? "-" : "(" + state.lastID, "+",
                                         "COUNT", String(options.readCount)])
            boards[name]?.phase = .readingStream(progress, asked: true)
        case .tailing:
            startCompactionIfDue(name, state)
        case .loadingCheckpoint, .readingStream, .rechecking:
            break
        }
    }

    /// The checkpoint (`HGETALL`): merged, and the stream is read on from its entry.
    func checkpointLoaded(_ board: String, _ value: RESPValue) {
        guard let state = boards[board], case .loadingCheckpoint(let progress, _) = state.phase else { return }
        boards[board]?.phase = .readingStream(progress, asked: false)
        let fields = Self.fields(value)
        guard let id = fields["id"].flatMap({ String(validating: $0, as: UTF8.self) }), let stateBytes = fields["state"] else {
            boards[board]?.checkpoint.id = nil
            return
        }
        boards[board]?.checkpoint.id = id
        do {
            let checkpoint = try OperationBatch(decoding: stateBytes)
            boards[board]?.phase.raiseStreamVector(by: checkpoint)
            try state.hub.mergeReplicated(checkpoint, now: now)
            entriesMerged += 1
            if let lastID = boards[board]?.lastID, Self.streamID(id) > Self.streamID(lastID) { boards[board]?.lastID = id }
            options.log("board '\(board)': loaded the checkpoint at \(id) (\(checkpoint.operations.count) operations)")
        } catch {
            // A checkpoint that does not decode: read the whole stream that is left instead.
            options.log("board '\(board)': the checkpoint at \(id) is unusable (\(error)); reading the stream instead")
        }
    }

    /// A range of the stream (`XRANGE`): merged; a short one means the end was reached, and
    /// the checkpoint is checked again.
    func rangeRead(_ board: String, _ value: RESPValue) {
        guard let state = boards[board], case .readingStream = state.phase else { return }
        // Still "asked" while its entries merge: a hub calling back in (fetching an image, say)
        // must not start a second read of the same range.
        let entries = Self.entries(value)
        for entry in entries { apply(entry, to: board, catchingUp: true) }
        if entries.count < options.readCount, up.contains(.commands) {
            // Read to the end: is the checkpoint still the one loaded? A compactor may have
            // trimmed what lay between it and what was read meanwhile.
            send(.recheck(board), strings: ["HGET", checkpointKey(board), "id"])
            let loaded = state.checkpoint.id
            boards.modify(board) { state in
                if case .readingStream(let progress, _) = state.phase { state.phase = .rechecking(progress, loaded: loaded) }
            }
        } else {
            boards[board]?.phase.askAgain()
        }
    }

    /// The checkpoint's id after the stream was read to its end (`HGET`): a newer checkpoint
    /// is loaded (merging is idempotent) and read on from; the same one ends the catch-up.
    func rechecked(_ board: String, _ value: RESPValue) {
        guard case .rechecking(let progress, let loaded)? = boards[board]?.phase else { return }
        if value.text != loaded {
            boards[board]?.phase = .loadingCheckpoint(progress, asked: false)
        } else {
            finishCatchUp(board, progress)
        }
    }

    /// The stream was read to its end: operations only this server's cache holds (merged before
    /// a crash, or a board from before `--redis`) are appended now, then the board is tailed.
    func finishCatchUp(_ board: String, _ progress: CatchUp) {
        guard let state = boards[board] else { return }
        boards[board]?.phase = .tailing
        let local = state.hub.store.replica.versionVector
        let vector = progress.streamVector
        if !vector.dominates(local) {
            let delta = state.hub.store.replica.operations(since: vector)
            options.log("board '\(board)': appending \(delta.operations.count) operations the stream lacked (stream \(vector), here \(local))")
            nextAppend += 1
            appends[nextAppend] = Append(board: board, bytes: delta.encoded(), authors: Self.authors(of: delta))
        }
        if options.sharesAuthorship {
            // Replica ids whose operations the log may hold without the set knowing (appended
            // before authorship was shared): none of them can be bound to a write token.
            let known = local.entries.keys.sorted { $0.rawValue < $1.rawValue }.map(Self.hex)
            if !known.isEmpty { replicaMarks[board] = (known, false, 0) }
        }
        options.log("board '\(board)': caught up from Redis at \(state.lastID)")
        state.hub.holdsGreetings = false
    }

    /// Reads a tailed board again from its checkpoint (merging is idempotent): what this server
    /// read may have a gap. It writes no checkpoint until then.
    func reload(_ board: String, because why: String) {
        guard boards[board]?.phase.isTailing == true else { return }  // (else it is reloading)
        options.log("board '\(board)': reloading from the checkpoint: \(why)")
        boards[board]?.phase = .loadingCheckpoint(CatchUp(), asked: false)
    }
}
