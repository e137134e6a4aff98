import BoardCRDT
import BoardModel
import Foundation

/// A board package on disk, open for editing: the storage engine under documents, the CLI, peers
/// and the sync server.
///
/// - The op log (`sync/oplog`) is the source of truth. `commit` and `merge` append to it and
///   fsync before they return: an operation counts as saved only then.
/// - Asset bytes live content-addressed in `sync/assets/<sha256>` (written before any operation
///   that names them is logged), so a deleted sticker's image survives for a restore.
/// - `manifest.json`, `background.png` and `stickers/` are a materialized view that `save`
///   brings up to date incrementally; `open` rebuilds it when it is missing or older than the log.
/// - An exclusive lock on `sync/lock` keeps two processes from editing one package at once.
///
/// Not thread-safe: one owner drives it (a document, a CLI command, a host's event loop).
public final class BoardPackage {
    public let path: String
    public let fileSystem: any FileSystem
    public internal(set) var replica: Replica
    /// What `open` found and repaired, in words for a log or a user.
    public internal(set) var notices: [String] = []

    // Internal rather than private: the package's work is split by concern over
    // BoardPackage+Editing.swift (commit, merge, save) and BoardPackage+Assets.swift.
    var log: OpLog
    var lock: FileLock?
    var lastView: ViewIndex?
    var undoSaved: UndoHistory?
    var storedAssets: Set<AssetHash> = []
    var assetDirectoryDirty = false
    /// Counts prepared view writes (`ViewWrite.serial`).
    var viewWrites = 0
    /// The serial of the `ViewWrite` prepared and not finished yet: finishing any other changes nothing.
    var viewWriteInFlight: Int?

    /// Records beyond which `save` considers compacting the log.
    public var compactionRecordThreshold = 512
    /// The log's would-be size after compaction when `save` last looked and did not compact.
    var stateBytesLastChecked: Int?

    /// Whether compaction moves the records it replaces into the history archive
    /// (`sync/history`, docs/ARCHITECTURE.md "History"). Off: compaction drops them, as before
    /// history existed, and the history begins again at the next compaction that keeps it.
    public var keepsHistory = true
    /// Operations archived between two checkpoints of the board in the history archive.
    public var checkpointInterval = BoardHistory.defaultCheckpointInterval
    /// The wall time, in milliseconds since 1970, recorded with each log record as history
    /// metadata (never used to decide anything); nil records no time. Tests and simulators
    /// pass their own clock.
    public var historyClock: () -> Int64? = BoardHistory.wallClock
    /// Times of log records appended since the history index was last written.
    var pendingTimes: [HistoryIndex.Entry] = []

    init(path: String, fileSystem: any FileSystem, replica: Replica, log: OpLog, lock: FileLock) {
        self.path = path
        self.fileSystem = fileSystem
        self.replica = replica
        self.log = log
        self.lock = lock
    }

    deinit { lock?.release() }

    /// Releases the lock. The package must not be used afterwards.
    public func close() {
        if lock != nil { try? syncMerges(); try? syncAssetDirectoryIfNeeded(); try? flushHistoryTimes() }
        lock?.release()
        lock = nil
    }

    func requireOpen() throws {
        guard lock != nil else { throw StoreError.closed(path: path) }
    }

    /// Bytes and records in the op log.
    public var logSize: Int { log.size }
    public var logRecordCount: Int { log.recordCount }

    // MARK: Create and open

    /// Creates a new, empty package owned by a replica with `replicaID`. Fails if anything exists
    /// at `path`.
    public static func create(at path: String, fileSystem: any FileSystem, replicaID: ReplicaID) throws -> BoardPackage {
        if fileSystem.exists(path) { throw StoreError.alreadyExists(path: path) }
        try fileSystem.createDirectories(path)
        try fileSystem.syncDirectory(Path.parent(of: path))
        let package = try startSyncData(at: path, fileSystem: fileSystem, replicaID: replicaID)
        try package.save()
        return package
    }

    /// Creates `sync/` in an existing directory (identity, empty log, asset store) and returns
    /// the package, locked, with an empty replica.
    private static func startSyncData(at path: String, fileSystem: any FileSystem, replicaID: ReplicaID) throws -> BoardPackage {
        try fileSystem.createDirectory(Path.join(path, PackageLayout.sync))
        try fileSystem.createDirectory(Path.join(path, PackageLayout.assets))
        try fileSystem.syncDirectory(path)
        let lock = try takeLock(path, fileSystem)
        try Identity(replicaID: replicaID, directory: fileSystem.identity(of: path)).write(to: path, fileSystem)
        let (log, _, _) = try OpLog.open(Path.join(path, PackageLayout.opLog), fileSystem: fileSystem)
        return BoardPackage(path: path, fileSystem: fileSystem, replica: Replica(id: replicaID), log: log, lock: lock)
    }

    /// Opens a package, repairing what a crash or a copy left behind (see `notices`).
    ///
    /// - A package without `sync/` (written by a seed app) is imported: its items keep their ids.
    /// - A package copied from another place gets a new replica id from `newReplicaID`, so the copy
    ///   and its original never make operations under one id.
    /// - A torn last log record (never acknowledged) is cut off.
    /// - The view is rebuilt when it is missing, damaged or older than the log.
    public static func open(at path: String, fileSystem: any FileSystem,
                            newReplicaID: () -> ReplicaID) throws -> BoardPackage {
        guard fileSystem.isDirectory(path) else { throw StoreError.notAPackage(path: path, "no such directory") }
        try requireNoLinks(in: path, fileSystem)
        if !fileSystem.isDirectory(Path.join(path, PackageLayout.sync)) {
            return try importSeedPackage(at: path, fileSystem: fileSystem, newReplicaID: newReplicaID)
        }
        if !fileSystem.isDirectory(Path.join(path, PackageLayout.assets)) {
            try fileSystem.createDirectory(Path.join(path, PackageLayout.assets))
        }
        let lock = try takeLock(path, fileSystem)
        var notices: [String] = []
        let directory = try fileSystem.identity(of: path)
        var copied = false
        var replicaID = ReplicaID(0)
        /// A new identity, durable before anything else is written under it; the undo history
        /// belonged to the old one.
        func takeNewIdentity(_ why: (ReplicaID) -> String) throws {
            replicaID = newReplicaID()
            copied = true
            notices.append(why(replicaID))
            try dropUndoHistory(of: path, fileSystem)
            try Identity(replicaID: replicaID, directory: directory).write(to: path, fileSystem)
        }
        switch Identity.read(from: path, fileSystem) {
        case .success(let identity) where identity.directory == directory:
            replicaID = identity.replica
        case .success(let identity):
            try takeNewIdentity { "this package is a copy (or was restored from a backup): it now edits as replica \($0), not \(identity.replica)" }
        case .failure(let why):
            try takeNewIdentity { "the replica identity was \(why): it now edits as a new replica \($0)" }
        }
        let (log, batches, recovery) = try OpLog.open(Path.join(path, PackageLayout.opLog), fileSystem: fileSystem) {
            // The torn record was never acknowledged, but its sequence number must not come
            // back under this id all the same: take a new identity before cutting it.
            guard !copied else { return }
            try takeNewIdentity { "it now edits as a new replica \($0), so the torn record's sequence number is never reused" }
        }
        if recovery.truncatedBytes > 0 {
            notices.append("cut \(recovery.truncatedBytes) bytes of a torn last log record (\(recovery.truncatedReason ?? "incomplete")); it had never been saved")
        }
        if recovery.upgraded { notices.append("rewrote the op log in the current format (record headers now carry their own checksum)") }
        var replica = Replica(id: replicaID)
        for (index, batch) in batches.enumerated() {
            do {
                try replica.apply(batch, from: .ownLog)
            } catch {
                throw StoreError.damagedLog(path: Path.join(path, PackageLayout.opLog), offset: 0,
                                            "record \(index + 1) holds an invalid operation: \(error); run `board-sync repair` on the package",
                                            cause: error)
            }
        }
        // The view is never rebuilt from a log that knows less than the view shows.
        let view = ViewIndex.read(from: path, fileSystem)
        if let shown = view?.versionVector, !replica.versionVector.dominates(shown) {
            throw StoreError.viewAheadOfLog(path: Path.join(path, PackageLayout.opLog),
                "the view (manifest and images) reflects operations \(shown) but the op log holds only \(replica.versionVector)")
        }
        let package = BoardPackage(path: path, fileSystem: fileSystem, replica: replica, log: log, lock: lock)
        package.notices = notices
        try package.loadAssets()
        if !copied, let bytes = try? fileSystem.readFile(Path.join(path, PackageLayout.undo)) {
            if let history = try? UndoHistory(decoding: bytes) {
                package.replica.undoHistory = history
                package.undoSaved = history
            } else {
                package.notices.append("the undo history was damaged and has been reset")
            }
        }
        package.lastView = view
        if try package.viewNeedsRebuild() {
            package.lastView = nil
            do {
                try package.save()
                package.notices.append("rebuilt manifest.json and images from the op log")
            } catch {
                // The log holds everything; a full disk must not keep the board from opening.
                package.notices.append("the view (manifest.json and images) is out of date and could not be rebuilt: \(error)")
            }
        }
        return package
    }

    /// Undo and redo belong to the replica that made the edits: a new identity starts with none
    /// (the next command would otherwise undo the original's edits under the copy's id).
    static func dropUndoHistory(of path: String, _ fileSystem: any FileSystem) throws {
        let undo = Path.join(path, PackageLayout.undo)
        guard try fileSystem.fileSize(undo) != nil else { return }
        try fileSystem.removeFile(undo)
        try fileSystem.syncDirectory(Path.join(path, PackageLayout.sync))
    }

    static func takeLock(_ path: String, _ fileSystem: any FileSystem) throws -> FileLock {
        do {
            return try fileSystem.lock(Path.join(path, PackageLayout.lock))
        } catch let error as FileSystemError where error.code == .locked {
            throw StoreError.locked(path: path, cause: error)
        }
    }
}
