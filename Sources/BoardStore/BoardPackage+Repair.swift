import BoardCRDT
import BoardModel
import Foundation

/// What `BoardPackage.repair` found and did.
public struct RepairReport: Sendable, Equatable {
    /// Records kept, and byte ranges of the log that were dropped (with why).
    public var keptRecords = 0
    public var dropped: [Dropped] = []
    /// Where the damaged log was kept, byte for byte.
    public var damagedLogCopy: String?
    /// Where the view (manifest and images) was kept when the salvaged log knew less than it.
    public var viewCopy: String?
    /// The replica id the package edits under from now on (nil when nothing needed repair).
    public var newReplica: ReplicaID?
    /// Whether the salvaged log lacks operations the view reflected (its version vector does not
    /// cover the view's): then the changes below are values the log lost, not newer edits.
    public var logKnowsLess = false
    /// Whether the board the package showed before (`manifest.json` and its images) was read and
    /// compared with the salvaged one. False for a healthy package (nothing was repaired) and
    /// when the manifest could not be read: then `changes` and `lost` are empty because there was
    /// nothing to compare with, not because nothing changed (a note says why).
    public var comparedWithView = false
    /// Every register whose value the repair changed, from what the package showed before to
    /// what the salvaged log holds (the package shows the latter from now on): canvas,
    /// background, and each item's registers. Empty when the repair changed nothing a board shows.
    public var changes: [RegisterChange] = []
    /// Items the old view showed that the salvaged log does not hold (a peer may still have them).
    public var lost: [LostItem] = []
    public var missingItems: [UUID] { lost.map(\.id) }
    public var notes: [String] = []
    /// Byte ranges of the history archive (`sync/history`) that were dropped, and where the
    /// damaged archive was kept (nil when it needed no repair).
    public var archiveDropped: [Dropped] = []
    public var damagedArchiveCopy: String?

    public struct Dropped: Sendable, Equatable {
        public var offset: Int
        public var length: Int
        public var reason: String
    }

    public var changedAnything: Bool { newReplica != nil || damagedArchiveCopy != nil }
}

extension BoardPackage {
    /// Salvages a package whose op log is damaged (or knows less than its view): keeps every
    /// log record that still checks out, keeps the damaged log and, when needed, the old view as
    /// copies under `sync/`, and gives the package a new replica identity, because records lost
    /// may have held this replica's own operations and a sequence number must never be reused.
    /// Undo history is dropped with the old identity. A healthy package is left untouched.
    public static func repair(at path: String, fileSystem: any FileSystem,
                              newReplicaID: () -> ReplicaID) throws -> RepairReport {
        guard fileSystem.isDirectory(Path.join(path, PackageLayout.sync)) else {
            throw StoreError.notAPackage(path: path, "no sync data to repair (opening it imports it)")
        }
        try requireNoLinks(in: path, fileSystem)
        var report = RepairReport()
        let logPath = Path.join(path, PackageLayout.opLog)
        let lock = try takeLock(path, fileSystem)
        defer { lock.release() }
        let bytes = (try? fileSystem.readFile(logPath)) ?? []
        let salvaged = OpLog.salvage(bytes)
        report.dropped = salvaged.dropped.map { RepairReport.Dropped(offset: $0.offset, length: $0.length, reason: $0.reason) }
        // Replay what survived (the decoder validated every operation of each record).
        var replica = Replica(id: ReplicaID(0))
        for batch in salvaged.batches { try replica.apply(batch, from: .ownLog) }
        report.keptRecords = salvaged.batches.count
        let view = ViewIndex.read(from: path, fileSystem)
        let viewAhead = view?.versionVector.map { !replica.versionVector.dominates($0) } ?? false
        try repairHistoryArchive(of: path, fileSystem, into: &report)
        // A torn tail alone is what `open` cuts by itself: nothing to repair then.
        if !OpLog.isDamaged(bytes) && !viewAhead {
            report.notes.append("the op log and the view are consistent: nothing was changed in them")
            return report
        }
        report.logKnowsLess = viewAhead
        // "Before" is the board the package showed: its view, the last board a save wrote (the
        // only record of the board besides the log). The damaged records themselves cannot be
        // read, so this is the best the package knows of what they held.
        var unreadableView: String?
        do {
            let shown = try PackageReader(fileSystem: fileSystem).read(path)
            (report.changes, report.lost) = RepairReport.compare(shown: shown, salvaged: replica)
            report.comparedWithView = true
        } catch {
            unreadableView = "\(error)"
        }
        let viewDiffers = viewAhead || !report.changes.isEmpty || !report.lost.isEmpty
        /// `base`, or `base-2`, `base-3`, ... : the first name not taken under `sync/`.
        func freeName(_ base: String) -> String {
            var name = Path.join(path, PackageLayout.sync, base)
            var suffix = 1
            while fileSystem.exists(name) {
                suffix += 1
                name = Path.join(path, PackageLayout.sync, "\(base)-\(suffix)")
            }
            return name
        }

        // Keep the damaged log as it was.
        let copy = freeName("oplog.damaged")
        try fileSystem.writeFile(copy, bytes)
        try fileSystem.syncFile(copy)
        report.damagedLogCopy = copy
        // The view shows what the salvaged log does not: keep a copy of it, and have `open`
        // rebuild it (it rebuilds a view whose `view.json` is missing), so the package shows
        // what the report calls "after".
        if viewDiffers {
            let directory = freeName("view-before-repair")
            try fileSystem.createDirectories(Path.join(directory, PackageLayout.stickers))
            var names = [PackageLayout.manifest, PackageLayout.background]
            names += ((try? fileSystem.listDirectory(Path.join(path, PackageLayout.stickers))) ?? []).map { Path.join(PackageLayout.stickers, $0) }
            for name in names {
                guard let data = try? fileSystem.readFile(Path.join(path, name)) else { continue }
                try fileSystem.writeFile(Path.join(directory, name), data)
                try fileSystem.syncFile(Path.join(directory, name))
            }
            try fileSystem.syncDirectory(Path.join(directory, PackageLayout.stickers))
            try fileSystem.syncDirectory(directory)
            report.viewCopy = directory
            try fileSystem.removeFile(Path.join(path, PackageLayout.view))
        }
        // The salvaged log, atomically; then a new identity.
        var log = OpLog(path: logPath, fileSystem: fileSystem, size: 0, recordCount: 0)
        try log.rewrite(salvaged.batches)
        let fresh = newReplicaID()
        try dropUndoHistory(of: path, fileSystem)
        try Identity(replicaID: fresh, directory: fileSystem.identity(of: path)).write(to: path, fileSystem)
        try fileSystem.syncDirectory(Path.join(path, PackageLayout.sync))
        report.newReplica = fresh
        report.notes.append("the package now edits as replica \(fresh), so no sequence number of the old identity is reused")
        if let unreadableView {
            report.notes.append("the board the package showed before could not be read (\(unreadableView)), so what the repair changed on it cannot be listed")
        } else if !viewDiffers {
            report.notes.append("the board shows what it showed before the repair: no canvas, background or item value changed")
        } else {
            var what: [String] = []
            if !report.changes.isEmpty { what.append("\(report.changes.count) value(s) differ from what the package showed before") }
            if !report.lost.isEmpty { what.append("\(report.lost.count) item(s) the view showed are not in the salvaged log") }
            if what.isEmpty { what.append("the salvaged log knows less than the view") }
            let back = viewAhead ? "; sync with a peer or the server to get back what they still have" : ""
            report.notes.append("\(what.joined(separator: " and "))\(back) (the old view is kept in \(report.viewCopy ?? "?"))")
        }
        return report
    }
}

extension BoardPackage {
    /// Salvages a damaged history archive: keeps the damaged file as `sync/history.damaged`
    /// (or `-2`, ...), rewrites the archive with every record that still checks out, and names
    /// its new size in the index. The live state does not depend on the archive, so no new
    /// identity is needed. A clean archive (or a torn tail, which readers ignore) is left alone.
    static func repairHistoryArchive(of path: String, _ fileSystem: any FileSystem, into report: inout RepairReport) throws {
        let archivePath = Path.join(path, PackageLayout.history)
        guard try fileSystem.fileSize(archivePath) != nil else { return }
        var bytes = try fileSystem.readFile(archivePath)
        let indexPath = Path.join(path, PackageLayout.historyIndex)
        var index = HistoryIndex.read(indexPath, fileSystem)
        if let committed = index?.archiveSize, committed >= HistoryArchive.magic.count, committed < bytes.count {
            bytes.removeLast(bytes.count - committed)
        }
        // A record cut short inside the committed bytes is damage too, not a torn append.
        let cut = HistoryArchive.cutShort(bytes, committed: index?.archiveSize)
        guard HistoryArchive.isDamaged(bytes) || cut != nil else { return }
        let salvaged = HistoryArchive.salvage(bytes)
        report.archiveDropped = salvaged.dropped.map { RepairReport.Dropped(offset: $0.offset, length: $0.length, reason: $0.reason) }
        if let cut, !report.archiveDropped.contains(where: { $0.offset == cut.offset }) {
            report.archiveDropped.append(RepairReport.Dropped(offset: cut.offset, length: bytes.count - cut.offset, reason: cut.why))
        }
        var copy = archivePath + ".damaged"
        var suffix = 1
        while fileSystem.exists(copy) {
            suffix += 1
            copy = archivePath + ".damaged-\(suffix)"
        }
        try fileSystem.writeFile(copy, bytes)
        try fileSystem.syncFile(copy)
        let rewritten = HistoryArchive.encode(salvaged.records)
        try fileSystem.writeAtomically(archivePath, rewritten)
        if index != nil {
            index!.archiveSize = rewritten.count
            try fileSystem.writeAtomically(indexPath, index!.encoded())
        }
        report.damagedArchiveCopy = copy
        let lost = salvaged.dropped.reduce(0) { $0 + $1.length }
        report.notes.append("the history archive was damaged: kept \(salvaged.records.count) record(s) that check out and dropped \(lost) byte(s) in \(salvaged.dropped.count) range(s) (the damaged archive is kept in \(copy)); the board itself does not depend on it")
    }
}
