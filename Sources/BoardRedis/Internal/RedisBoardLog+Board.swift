import BoardCRDT
import BoardSync

extension RedisBoardLog {
    /// One attached board: its hub, how far its stream has been read, where it is in reading it
    /// (`phase`) and its checkpoints.
    struct BoardState {
        let hub: BoardHub
        /// The last stream entry read (the next `XRANGE` or `XREAD` starts after it).
        var lastID = "0-0"
        var phase = Phase.loadingCheckpoint(CatchUp(), asked: false)
        /// No catch-up read is asked of Redis for this board before then (a refused one waits
        /// `retryDelay`). Compaction keeps its own (`Checkpointing.leaseNotBefore`): a lease
        /// another server holds must not delay a reload.
        var notBefore = 0.0
        var checkpoint = Checkpointing()
        /// With `checksTombstones`: its catch-up starts once Redis said it has no tombstone.
        var tombstone = TombstoneCheck.clear

        init(hub: BoardHub) {
            self.hub = hub
        }
    }

    /// Where a board is in reading its stream. Catch-up reads the checkpoint, then the stream
    /// after it a range at a time, then checks the checkpoint did not move meanwhile; a board
    /// caught up is tailed. `reload` sends a tailed board back to the start.
    enum Phase {
        /// Catch-up, 1: the checkpoint (`HGETALL …:ckpt`); `asked` while that command is out.
        case loadingCheckpoint(CatchUp, asked: Bool)
        /// Catch-up, 2: the stream after the last entry read (`XRANGE`, `readCount` at a time);
        /// `asked` while a range is out (and while its entries merge: a hub calling back in
        /// must not start a second read of the same range).
        case readingStream(CatchUp, asked: Bool)
        /// Catch-up, 3: read to the end; is the checkpoint still `loaded` (`HGET …:ckpt id`)? A
        /// compactor may have trimmed what lay between it and what was read meanwhile.
        case rechecking(CatchUp, loaded: String?)
        /// Caught up: tailed, with every other caught-up board, by the one blocking `XREAD`.
        case tailing

        var isTailing: Bool {
            if case .tailing = self { return true }
            return false
        }

        /// A catch-up command was answered with an error or lost with its link: the step is
        /// asked again (a lost recheck reads on from the last entry, then rechecks).
        mutating func askAgain() {
            switch self {
            case .loadingCheckpoint(let progress, _): self = .loadingCheckpoint(progress, asked: false)
            case .readingStream(let progress, _), .rechecking(let progress, _): self = .readingStream(progress, asked: false)
            case .tailing: break
            }
        }

        /// Catch-up: what the stream read so far reaches, raised by `batch` (tailing: nothing).
        mutating func raiseStreamVector(by batch: OperationBatch) {
            switch self {
            case .loadingCheckpoint(var progress, let asked):
                progress.streamVector = progress.streamVector.raised(by: batch)
                self = .loadingCheckpoint(progress, asked: asked)
            case .readingStream(var progress, let asked):
                progress.streamVector = progress.streamVector.raised(by: batch)
                self = .readingStream(progress, asked: asked)
            case .rechecking(var progress, let loaded):
                progress.streamVector = progress.streamVector.raised(by: batch)
                self = .rechecking(progress, loaded: loaded)
            case .tailing: break
            }
        }
    }

    /// What a catch-up has found so far.
    struct CatchUp {
        /// What the checkpoint and the stream held: operations only this server's cache holds
        /// are appended once the stream has been read (`finishCatchUp`).
        var streamVector = VersionVector.empty
    }

    /// A board's checkpoints: the one known, and writing the next (orthogonal to the phase: a
    /// compaction under way goes on through a reload).
    struct Checkpointing {
        /// The checkpoint loaded, written or seen last (nil: none yet).
        var id: String?
        /// Entries seen since the last checkpoint (at `checkpointEvery`, a new one is tried).
        var entriesSince = 0
        var compaction = Compaction.idle
        /// No lease is asked for before then: another server held it, or Redis refused it or
        /// the commit (a lease's time).
        var leaseNotBefore = 0.0
        /// Tail reads whose start has not been checked against the trim point yet: until it is,
        /// this server may have missed trimmed entries, so it writes no checkpoint.
        var unverifiedReads = 0
    }

    /// Writing a checkpoint (`RedisBoardLog+Compaction.swift`).
    enum Compaction: Equatable {
        case idle
        /// `acquireScript` is out: the lease and a fencing epoch, or nil (another server holds it).
        case acquiringLease
        /// `commitScript` is out with the state up to the entry `upTo`.
        case committing(upTo: String)
    }
}

extension Dictionary {
    /// Changes the value for `key` in place, if there is one, and returns what `body` returns
    /// (nil: no such key). `body` must not reach the dictionary (nor call out to anything that
    /// might).
    @discardableResult
    mutating func modify<Result>(_ key: Key, _ body: (inout Value) -> Result) -> Result? {
        guard let index = index(forKey: key) else { return nil }
        return body(&values[index])
    }
}
