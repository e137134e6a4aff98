import BoardCRDT
import BoardModel
import BoardStore
import Dispatch
import Foundation

// History on the live board (docs/CLIENT.md, "History"): the package's history read off the
// board's actor. On the actor a read costs one capture (`BoardPackage.historyReading()`: the
// live op log's and the history index's bytes, which compaction keeps small); the archive is
// read and everything parsed on a dispatch thread, so edits, merges and updates go on while a
// long history is read. A restore's past board is made off the actor too; only its edits
// (`Replica.edits(toReturnTo:)`, O(board)) are made on it, as one ordinary edit.
//
// ```swift
// let history = try await board.history()                    // versions, sessions()
// let then = history.snapshot(at: history.versions[3].vector)  // the board at version 4
// let changes = history.diff(from: history.versions[3].vector, to: history.latest)
// try await board.restore(to: history.versions[3].vector)     // one undoable step, synced
// try await board.fork(at: history.versions[3].vector, to: "copy.boardpkg")
// ```

extension LiveBoard {
    /// The board's history as its package holds it now: `versions` (each with its time,
    /// authors and operation count), `sessions()`, `snapshot(at:)`, `replica(at:)`,
    /// `diff(from:to:)`. A value: keep it to look at many versions (each view starts from the
    /// nearest checkpoint); read it again to see edits made since. Read off the board's actor
    /// (see above). A memory board keeps no history (`HistoryError`); a closed board throws
    /// `LiveBoardError.closed`.
    public func history() async throws -> BoardHistory {
        let reading = try historyReading()
        return try await Self.offActor { try reading.read() }
    }

    /// Sets the board back to how it was at `version` (a vector of `history().versions`, or
    /// any vector the history covers), as ordinary new operations made by this replica in one
    /// undo step: saved like any edit, sent to the server like any edit, merged with
    /// concurrent edits by the contract, and undone by one `undo()`. What a restore cannot set
    /// back is in `Replica.edits(toReturnTo:)`. Throws `HistoryError` for a version this
    /// history does not reach or has pruned.
    @discardableResult
    public func restore(to version: VersionVector) async throws -> LocalEdit {
        let reading = try historyReading()
        let past = try await Self.offActor { () throws -> Replica in
            let history = try reading.read()
            try Self.check(version, in: history)
            return history.replica(at: version)
        }
        return try edit { replica in try replica.edits(toReturnTo: past) }
    }

    /// A new package at `path` holding the board as it was at `version` (its operations up to
    /// there as one full-state record, and the images it shows), whose history starts there,
    /// editing as `replicaID` (nil: a fresh random id). Written off the actor, then closed:
    /// open it with `LiveBoard.open(storage: .package(path:))`, under another board name to
    /// sync it. Fails if anything exists at `path`.
    public func fork(at version: VersionVector, to path: String, replicaID: ReplicaID? = nil) async throws {
        let reading = try historyReading()
        let id = replicaID ?? Self.randomReplicaID()
        try await Self.offActor {
            let history = try reading.read()
            try Self.check(version, in: history)
            let fileSystem = PosixFileSystem()
            try fileSystem.createDirectories(Path.parent(of: path))
            let package = try BoardPackage.fork(history, at: version, to: path, fileSystem: fileSystem, replicaID: id)
            package.close()
        }
    }

    /// The capture a history read needs, on the actor.
    func historyReading() throws -> HistoryReading {
        guard let saving = savingStore else { throw LiveBoardError.closed }
        guard let package = saving.package else {
            throw HistoryError("a memory board keeps no history: open the board from a package to have one")
        }
        return try package.historyReading()
    }

    static func check(_ version: VersionVector, in history: BoardHistory) throws {
        guard history.latest.dominates(version) else {
            throw HistoryError("version \(version) is not in this board's history (its latest is \(history.latest))")
        }
        if let horizon = history.horizon, !version.dominates(horizon) {
            throw HistoryError("version \(version) is before the history's horizon \(horizon) (pruned)")
        }
    }

    /// Runs `body` on a dispatch thread (file reads and parsing: not on the concurrency pool's
    /// threads, which must not block).
    static func offActor<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}
