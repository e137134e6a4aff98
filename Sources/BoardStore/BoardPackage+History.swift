import BoardCRDT
import BoardModel
import Foundation

// Keeping history (docs/ARCHITECTURE.md, "History"): the live path only notes each log record's
// time in memory; compaction moves the records it replaces into `sync/history` before it
// rewrites the log, and writes a checkpoint every `checkpointInterval` operations.

extension BoardPackage {
    var historyPath: String { Path.join(path, PackageLayout.history) }
    var historyIndexPath: String { Path.join(path, PackageLayout.historyIndex) }

    /// Notes when a log record was appended (memory only: written with the next save or close).
    func noteTime(of mark: OpLog.RecordMark) {
        guard keepsHistory, let time = historyClock() else { return }
        pendingTimes.append(HistoryIndex.Entry(mark: mark, time: time))
    }

    /// Appends the noted times to the history index (no fsync: they are metadata).
    func flushHistoryTimes() throws {
        guard !pendingTimes.isEmpty else { return }
        if try fileSystem.fileSize(historyIndexPath) == nil || HistoryIndex.read(historyIndexPath, fileSystem) == nil {
            // No index yet (or a damaged one): start one naming the archive as it is.
            var size = try fileSystem.fileSize(historyPath) ?? 0
            if size > 0 { try cutTornArchiveTail(&size) }  // the index must not name a torn tail as committed
            let index = HistoryIndex(archiveSize: size, sinceCheckpoint: 0, head: nil, entries: pendingTimes)
            try fileSystem.writeAtomically(historyIndexPath, index.encoded())
        } else {
            try fileSystem.appendFile(historyIndexPath, HistoryIndex.encode(pendingTimes))
        }
        pendingTimes = []
    }

    /// Cuts a torn tail off the archive (`size` its size, updated); damage is left for reads to
    /// report and repair to salvage. Reads the whole archive: only when the index cannot vouch
    /// for its end.
    private func cutTornArchiveTail(_ size: inout Int) throws {
        let parsed = HistoryArchive.parse(try fileSystem.readFile(historyPath))
        guard case .torn = parsed.end, parsed.validBytes >= HistoryArchive.magic.count else { return }
        try fileSystem.truncateFile(historyPath, to: parsed.validBytes)
        size = parsed.validBytes
    }

    /// Rewrites the log as `state`, first moving the records it replaces into the history
    /// archive (when `keepsHistory`).
    ///
    /// Order, so that a crash anywhere loses nothing and archives nothing twice for long:
    /// 1. the records go to the end of `sync/history` (cut first to its committed size, dropping
    ///    what an unfinished compaction appended), which is fsynced;
    /// 2. the index is rewritten atomically: the archive's new committed size, and the state
    ///    record as the log's head (archived already);
    /// 3. the log is rewritten atomically as the state.
    /// A crash after 1 leaves the records in the log, and the next compaction cuts and appends
    /// them again; after 2, it archives the old log's records a second time (readers skip
    /// operations they have seen).
    func compact(to state: OperationBatch) throws {
        let framed = OpLog.frame(state.encoded())
        guard keepsHistory else {
            try log.compact(toFramed: framed)
            pendingTimes = []
            try? fileSystem.removeFile(historyIndexPath)
            return
        }
        let logBytes = try fileSystem.readFile(log.path)
        let records = OpLog.records(in: logBytes)
        let stored = HistoryIndex.read(historyIndexPath, fileSystem)
        var times = stored?.times ?? [:]
        for entry in pendingTimes { times[entry.mark] = entry.time }

        var committed = try fileSystem.fileSize(historyPath) ?? 0
        var created = false
        if committed < HistoryArchive.magic.count {
            try fileSystem.writeFile(historyPath, HistoryArchive.magic)
            committed = HistoryArchive.magic.count
            created = true
        } else if let known = stored?.archiveSize, known >= HistoryArchive.magic.count, known < committed {
            try fileSystem.truncateFile(historyPath, to: known)
            committed = known
        } else if stored?.archiveSize != committed {
            // The index names more bytes than the archive holds, or there is none: the archive may
            // end torn (a copy taken while a compaction appended, as the admin API's tar export
            // can be); cut the torn tail so that what is appended does not follow it as damage.
            try cutTornArchiveTail(&committed)
        }
        var since = stored?.sinceCheckpoint ?? 0
        var archived: [(batch: OperationBatch, time: Int64?)] = []
        for (mark, batch) in records {
            if let head = stored?.head, head == mark { continue }  // the state an earlier compaction archived
            archived.append((batch, times[mark]))
            since += batch.operations.count
        }
        // One segment for the records this compaction replaces (a record of its own each would
        // repeat a batch header and a replica table, most of a small record's bytes).
        var appended = HistoryArchive.segments(archived)
        if since >= max(1, checkpointInterval) {
            // As a change from the archive's last checkpoint (read back, its other records
            // skipped undecoded), or whole when there is none or the archive does not read cleanly.
            let base = committed > HistoryArchive.magic.count
                ? HistoryArchive.lastBase(in: Array(try fileSystem.readFile(historyPath).prefix(committed))) : nil
            appended += HistoryArchive.checkpointRecord(time: historyClock(), state: state.operations,
                                                        covers: replica.highestSeen, after: base).bytes
            since = 0
        }
        if !appended.isEmpty {
            try fileSystem.appendFile(historyPath, appended)
        }
        try fileSystem.syncFile(historyPath)
        if created { try fileSystem.syncDirectory(Path.join(path, PackageLayout.sync)) }
        let head = OpLog.RecordMark(offset: OpLog.magic.count, length: framed.count, crc: OpLog.readU32(framed, 4))
        let index = HistoryIndex(archiveSize: committed + appended.count, sinceCheckpoint: since, head: head)
        try fileSystem.writeAtomically(historyIndexPath, index.encoded())
        try log.compact(toFramed: framed)
        pendingTimes = []
    }

    /// The board's history, read from disk (archive and log): this package's records as they are
    /// now, with the times noted and not yet written.
    public func history() throws -> BoardHistory {
        try requireOpen()
        try BoardHistory.checkArchiveLength(package: path, fileSystem: fileSystem)
        return try BoardHistory.read(package: path, fileSystem: fileSystem, pendingTimes: pendingTimes)
    }

    /// Sets the board back to how it was at `version`, as ordinary new operations in one undo
    /// step on this package's replica (saved like any edit; `Replica.edits(toReturnTo:)` says
    /// what a restore cannot set back). A version before the history's horizon is refused.
    @discardableResult
    public func restore(to version: VersionVector) throws -> LocalEdit {
        let past = try history().heldReplica(at: version)
        return try commit { replica in try replica.edits(toReturnTo: past) }
    }
}

extension BoardPackage {
    /// A new package at `path` holding the board as it was at `version` of `history` (its
    /// surviving operations, as one full-state record, and the images it shows), editing as
    /// `replicaID`. Its history starts there. Fails if anything exists at `path`, or if
    /// `version` is before the history's horizon.
    public static func fork(_ history: BoardHistory, at version: VersionVector, to path: String,
                            fileSystem: any FileSystem, replicaID: ReplicaID) throws -> BoardPackage {
        var past = try history.heldReplica(at: version)
        history.loadAssets(into: &past)
        let package = try create(at: path, fileSystem: fileSystem, replicaID: replicaID)
        do {
            for hash in past.referencedAssets.sorted() {
                if let data = past.assets.data(for: hash) { try package.addAsset(data) }
            }
            try package.merge(past.fullState())
            try package.save()
        } catch {
            package.close()
            throw error
        }
        return package
    }
}

/// Why a history operation was refused.
public struct HistoryError: Error, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

extension BoardPackage {
    /// Drops the history older than `version`: the archive is rewritten, atomically, as the board
    /// at `version` (a horizon record) followed by every archived operation `version` does not
    /// cover, with the records' times, and the checkpoints after the horizon. Versions before it
    /// are gone; the live log, the board and sync are untouched (sync never reads history).
    /// Returns the archive's bytes before and after.
    @discardableResult
    public func pruneHistory(before version: VersionVector) throws -> (before: Int, after: Int) {
        try requireOpen()
        let history = try self.history()
        guard history.latest.dominates(version) else {
            throw HistoryError("version \(version) is not in this history (its latest is \(history.latest))")
        }
        if let horizon = history.horizon, !version.dominates(horizon) {
            throw HistoryError("version \(version) is before the history's horizon \(horizon) (pruned already)")
        }
        let stored = HistoryIndex.read(historyIndexPath, fileSystem)
        var bytes = (try? fileSystem.readFile(historyPath)) ?? []
        if let committed = stored?.archiveSize, committed >= HistoryArchive.magic.count, committed < bytes.count {
            bytes.removeLast(bytes.count - committed)
        }
        let parsed = HistoryArchive.parse(bytes)
        let state = history.replica(at: version).fullState().operations
        var records = [HistoryArchive.Record(kind: .horizon, time: history.versions.last { version.dominates($0.vector) }?.time,
                                             batch: OperationBatch(operations: state, covers: version), offset: 0)]
        for var record in parsed.records {
            switch record.kind {
            case .operations:
                let kept = record.batch.operations.filter { !version.covers($0.id) }
                guard !kept.isEmpty || !(record.batch.covers.map(version.dominates) ?? true) else { continue }
                record.batch = OperationBatch(operations: kept, base: record.batch.base, covers: record.batch.covers)
                records.append(record)
            case .checkpoint:
                if let highest = record.batch.covers, highest.dominates(version) { records.append(record) }
            case .horizon, .segment:
                continue
            }
        }
        let rewritten = HistoryArchive.encode(records)
        try fileSystem.writeAtomically(historyPath, rewritten)
        var index = stored ?? HistoryIndex(archiveSize: 0, sinceCheckpoint: 0, head: nil)
        index.archiveSize = rewritten.count
        try fileSystem.writeAtomically(historyIndexPath, index.encoded())
        return (bytes.count, rewritten.count)
    }
}
