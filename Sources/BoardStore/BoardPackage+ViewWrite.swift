import BoardCRDT
import BoardModel
import Foundation
import Synchronization

/// A view save in two halves, so its file writes (and their fsyncs) can run off the thread that
/// owns the package: `prepareViewWrite()` reads the replica on the owner's thread and returns a
/// `ViewWrite` holding everything the files need (a snapshot is a value); `ViewWrite.run()`
/// writes them anywhere; `finishViewWrite(_:error:)`, back on the owner's thread, records what
/// the view now reflects and compacts the log when it is worth it. `save()` is the three in a
/// row. A sync server saves this way (`SyncEndpoint.Options.viewSavesOffThread`), so a board's
/// view save delays no other board's reads, merges or relays.
///
/// One write at a time per package: preparing another before the last one finished, or saving
/// meanwhile, throws `StoreError` (`.viewWriteInFlight`); finishing a write that is not the one
/// in flight (a stale outcome) changes nothing. `close()` does not wait for a write running
/// elsewhere: its owner finishes it first (`SyncHost` waits for its save threads). The op log and the asset
/// store are never touched by a `ViewWrite`; it writes `manifest.json`, `background.png`,
/// `stickers/`, `sync/undo.bin` and `sync/view.json`, in that order (the index last, so it
/// never claims more than the files hold).
///
/// The snapshot to write is the replica's when the write is prepared, or one the owner already
/// has in the making (`prepareViewWrite(version:board:)`: a live client's published board,
/// made off its owner's thread in `run()` rather than on it).
public struct ViewWrite: Sendable {
    let path: String
    let fileSystem: any FileSystem
    let made: MadeView
    let previous: BoardSnapshot?
    /// The undo history to write, when it changed since the last write.
    let undo: UndoHistory?
    /// Which write of its package this is (`finishViewWrite` ignores any but the last prepared).
    let serial: Int

    var board: BoardSnapshot { made.value.board }
    var index: ViewIndex { made.value.index }

    /// Writes the view's files (only what differs from the last saved view) and then the index.
    @discardableResult
    public func run(progress: (PackageWriter.Progress) -> Void = { _ in }) throws -> PackageWriter.Report {
        let report = try PackageWriter(fileSystem: fileSystem).write(board, to: path, previous: previous, progress: progress)
        if let undo { try fileSystem.writeAtomically(Path.join(path, PackageLayout.undo), undo.encoded()) }
        try index.write(to: path, fileSystem)
        return report
    }
}

extension BoardPackage {
    /// The first half of a view save, on the package's owner: makes deferred merges and
    /// received images durable (the view never shows what the log does not hold), then takes
    /// the snapshot to write.
    public func prepareViewWrite() throws -> ViewWrite {
        try prepare(MadeView(replica.snapshot(), version: replica.versionVector))
    }

    /// `prepareViewWrite()` for an owner that already has the replica's snapshot in the making:
    /// `board` gives it (the replica's board as of now: at `version`, which must be the
    /// replica's version vector, with every image the replica holds) and is called once, by
    /// `ViewWrite.run()`, on whatever thread runs the write. So the O(board) snapshot is not
    /// taken on the owner's thread. A `version` that is not the replica's takes the snapshot
    /// here, as `prepareViewWrite()` does.
    public func prepareViewWrite(version: VersionVector, board: @escaping @Sendable () -> BoardSnapshot) throws -> ViewWrite {
        guard version == replica.versionVector else { return try prepareViewWrite() }
        return try prepare(MadeView(version: version, making: board))
    }

    private func prepare(_ made: @autoclosure () -> MadeView) throws -> ViewWrite {
        try requireOpen()
        try requireNoViewWrite()
        try syncMerges()
        try syncAssetDirectoryIfNeeded()
        let history = replica.undoHistory
        let write = ViewWrite(path: path, fileSystem: fileSystem, made: made(), previous: lastView?.snapshot,
                              undo: history == undoSaved ? nil : history, serial: viewWrites + 1)
        viewWrites += 1
        viewWriteInFlight = write.serial
        return write
    }

    /// The second half, on the owner, once `write.run()` returned (`error` nil) or threw: a
    /// write that succeeded becomes the view the next one compares against. After one that
    /// failed the next write is whole (every image and the undo history written again): the
    /// failed one may have renamed some files into place, so no earlier view describes the
    /// disk any more (an image changed and changed back to one of the same size would otherwise
    /// be kept as the failed write left it). Then compacts the log when it has grown well past
    /// the state it holds.
    public func finishViewWrite(_ write: ViewWrite, error: (any Error)?) throws {
        guard write.serial == viewWriteInFlight else { return }
        viewWriteInFlight = nil
        guard error == nil else {
            lastView = nil
            undoSaved = nil
            return
        }
        if let undo = write.undo { undoSaved = undo }
        lastView = write.index
        try requireOpen()
        try compactIfWorthwhile()
        // History times are metadata: failing to write them never fails a save.
        try? flushHistoryTimes()
    }

    func requireNoViewWrite() throws {
        if viewWriteInFlight != nil { throw StoreError.viewWriteInFlight(path: path) }
    }
}

/// A view write's snapshot and index: made when the write is prepared, or on first use (by
/// `ViewWrite.run()`, off the owner's thread) from the owner's maker, then kept.
final class MadeView: Sendable {
    private let made: Mutex<(board: BoardSnapshot, index: ViewIndex)?>
    private let make: (@Sendable () -> BoardSnapshot)?
    private let version: VersionVector

    init(_ board: BoardSnapshot, version: VersionVector) {
        made = Mutex((board, ViewIndex(board: board, version: version)))
        make = nil
        self.version = version
    }

    init(version: VersionVector, making board: @escaping @Sendable () -> BoardSnapshot) {
        made = Mutex(nil)
        make = board
        self.version = version
    }

    var value: (board: BoardSnapshot, index: ViewIndex) {
        made.withLock { made in
            if let made { return made }
            let board = make!()
            let value = (board, ViewIndex(board: board, version: version))
            made = value
            return value
        }
    }
}
