import BoardCRDT
import BoardModel
import Foundation

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
public struct ViewWrite: Sendable {
    let path: String
    let fileSystem: any FileSystem
    let board: BoardSnapshot
    let previous: BoardSnapshot?
    /// The undo history to write, when it changed since the last write.
    let undo: UndoHistory?
    let index: ViewIndex
    /// Which write of its package this is (`finishViewWrite` ignores any but the last prepared).
    let serial: Int

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
        try requireOpen()
        try requireNoViewWrite()
        try syncMerges()
        try syncAssetDirectoryIfNeeded()
        let board = replica.snapshot()
        let history = replica.undoHistory
        let write = ViewWrite(path: path, fileSystem: fileSystem, board: board, previous: lastView?.snapshot,
                              undo: history == undoSaved ? nil : history,
                              index: ViewIndex(board: board, version: replica.versionVector),
                              serial: viewWrites + 1)
        viewWrites += 1
        viewWriteInFlight = write.serial
        return write
    }

    /// The second half, on the owner, once `write.run()` returned (`error` nil) or threw: a
    /// write that succeeded becomes the view the next one compares against; after one that
    /// failed the next write compares against the last view that was written whole, as before.
    /// Then compacts the log when it has grown well past the state it holds.
    public func finishViewWrite(_ write: ViewWrite, error: (any Error)?) throws {
        guard write.serial == viewWriteInFlight else { return }
        viewWriteInFlight = nil
        guard error == nil else { return }
        if let undo = write.undo { undoSaved = undo }
        lastView = write.index
        try requireOpen()
        try compactIfWorthwhile()
    }

    func requireNoViewWrite() throws {
        if viewWriteInFlight != nil { throw StoreError.viewWriteInFlight(path: path) }
    }
}
