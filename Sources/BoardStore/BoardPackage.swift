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
    public private(set) var replica: Replica
    /// What `open` found and repaired, in words for a log or a user.
    public internal(set) var notices: [String] = []

    private var log: OpLog
    private var lock: FileLock?
    private var lastView: ViewIndex?
    private var undoSaved: UndoHistory?
    private var storedAssets: Set<AssetHash> = []
    private var assetDirectoryDirty = false

    /// Records beyond which `save` considers compacting the log.
    public var compactionRecordThreshold = 512

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
        if lock != nil { try? syncMerges(); try? syncAssetDirectoryIfNeeded() }
        lock?.release()
        lock = nil
    }

    private func requireOpen() throws {
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

    // MARK: Editing

    /// Runs a local edit on the replica and saves its operations durably (log append + fsync)
    /// before returning. If the edit throws or the log cannot be written, nothing changes.
    /// The edit works on the package's replica in place: `body` must use the replica it is
    /// given, not this package (reading `replica` from inside it is an overlapping access).
    @discardableResult
    public func commit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        try requireOpen()
        let before = storedAssets
        do {
            // In place, in a transaction: a failed edit, validation or log write puts back what
            // it changed. (Copying the replica to throw the copy away cost O(board) per edit:
            // ~2 ms on the workload board.)
            return try replica.transaction { replica in
                let edit = try body(&replica)
                // Write-read symmetry: never log an operation that this or any replica would refuse.
                for op in edit.operations { try op.validate() }
                if !edit.operations.isEmpty {
                    try storeAssets(referencedBy: edit.operations, from: replica)
                    try log.append(OperationBatch(operations: edit.operations))
                }
                return edit
            }
        } catch {
            // A failed commit changes nothing: images stored for it go again.
            for hash in storedAssets.subtracting(before) { try? fileSystem.removeFile(assetPath(hash)) }
            storedAssets = before
            throw error
        }
    }

    /// Merges a peer's operations and saves the new ones durably before returning; returns how
    /// many were new. Asset bytes should be added with `addAsset` as they arrive.
    @discardableResult
    public func merge(_ batch: OperationBatch) throws -> Int {
        try merge(batch, deferringSync: false)
    }

    /// `merge`, but the log record is durable only after `syncMerges()`: a host merging many
    /// peers' frames in one turn of its loop pays one fsync for all of them, and acknowledges
    /// them after it (group commit). Until then a crash may lose them; nobody was told they
    /// were saved.
    @discardableResult
    public func merge(_ batch: OperationBatch, deferringSync: Bool) throws -> Int {
        try merging(batch, deferringSync: deferringSync).count
    }

    /// `merge`, returning the operations that were new (what the log took of the batch).
    ///
    /// One path: admission validates the operations (unless a decoder already did) and picks
    /// the new ones in the same pass; the log takes those; the replica integrates them without
    /// checking them again. Applying an admitted batch cannot fail, so a failed log write still
    /// changes nothing, and the replica is never copied (a copy of a large board per merged
    /// frame was most of a merge's cost).
    @discardableResult
    public func merging(_ batch: OperationBatch, deferringSync: Bool) throws -> [Op] {
        try requireOpen()
        let fresh = try replica.admitted(batch)
        let raisesVector = batch.covers.map { !replica.versionVector.dominates($0) } ?? false
        guard !fresh.isEmpty || raisesVector else { return [] }
        let record = OperationBatch(operations: fresh, base: batch.base, covers: batch.covers)
        try log.append(record, sync: !deferringSync)
        try replica.apply(record, from: .ownLog)
        return fresh
    }

    /// Makes every deferred merge durable (one fsync of the log).
    public func syncMerges() throws {
        try requireOpen()
        try log.sync()
    }

    /// Stores asset bytes durably and makes them available to snapshots. With `claimedHash`,
    /// bytes that do not match are refused.
    @discardableResult
    public func addAsset(_ data: Data, claimedHash: AssetHash? = nil) throws -> AssetHash {
        try addAsset(data, claimedHash: claimedHash, syncDirectory: true)
    }

    /// Stores bytes a peer sent: the file is fsynced and renamed into place, but the directory
    /// fsync waits for the next `save` or `close` (a received asset lost to a crash before then
    /// is simply fetched again), so a replica catching up on 100 images pays one directory sync.
    @discardableResult
    public func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash {
        try addAsset(data, claimedHash: claimedHash, syncDirectory: false)
    }

    private func addAsset(_ data: Data, claimedHash: AssetHash?, syncDirectory: Bool) throws -> AssetHash {
        try requireOpen()
        let hash = AssetHash.of(data)
        if let claimedHash, claimedHash != hash {
            throw AssetStoreError.hashMismatch(claimed: claimedHash, actual: hash)
        }
        try storeAsset(hash, data, syncDirectory: syncDirectory)
        replica.assets.insert(data)
        return hash
    }

    // MARK: Saving the view

    /// Brings the view (manifest, background, sticker images) up to date with the replica,
    /// writing only what changed, then records what the view now reflects. Also saves the undo
    /// history and compacts the log when it has grown well past the state it holds.
    @discardableResult
    public func save(progress: (PackageWriter.Progress) -> Void = { _ in }) throws -> PackageWriter.Report {
        try requireOpen()
        try syncMerges()  // the view never shows what the log does not durably hold
        try syncAssetDirectoryIfNeeded()
        let board = replica.snapshot()
        let writer = PackageWriter(fileSystem: fileSystem)
        let report = try writer.write(board, to: path, previous: lastView?.snapshot, progress: progress)
        let history = replica.undoHistory
        if history != undoSaved {
            try fileSystem.writeAtomically(Path.join(path, PackageLayout.undo), history.encoded())
            undoSaved = history
        }
        let index = ViewIndex(board: board, version: replica.versionVector)
        try index.write(to: path, fileSystem)
        lastView = index
        try compactIfWorthwhile()
        return report
    }

    /// Rewrites the log as one record of the replica's surviving operations.
    public func compactLog() throws {
        try log.compact(to: replica.fullState())
    }

    private func compactIfWorthwhile() throws {
        guard log.recordCount > compactionRecordThreshold else { return }
        let state = replica.fullState()
        if log.size > 2 * (state.encoded().count + OpLog.magic.count + 8) {
            try log.compact(to: state)
        }
    }

    // MARK: Assets

    private func assetPath(_ hash: AssetHash) -> String {
        Path.join(path, PackageLayout.assets, hash.hex)
    }

    private func storeAsset(_ hash: AssetHash, _ data: Data, syncDirectory: Bool = true) throws {
        guard !storedAssets.contains(hash) else { return }
        if try fileSystem.fileSize(assetPath(hash)) != data.count {
            let path = assetPath(hash)
            let temp = Path.join(Path.parent(of: path), ".\(hash.hex).tmp")
            do {
                try fileSystem.writeFile(temp, Array(data))
                try fileSystem.syncFile(temp)
                try fileSystem.rename(temp, path)
            } catch {
                try? fileSystem.removeFile(temp)  // no partial image stays behind on a full disk
                throw error
            }
            if syncDirectory || assetDirectoryDirty {
                try fileSystem.syncDirectory(Path.parent(of: path))
                assetDirectoryDirty = false
            } else {
                assetDirectoryDirty = true
            }
        }
        storedAssets.insert(hash)
    }

    private func syncAssetDirectoryIfNeeded() throws {
        guard assetDirectoryDirty else { return }
        try fileSystem.syncDirectory(Path.join(path, PackageLayout.assets))
        assetDirectoryDirty = false
    }

    private func storeAssets(referencedBy operations: [Op], from replica: Replica) throws {
        for op in operations {
            if let hash = op.payload.asset, let data = replica.assets.data(for: hash) { try storeAsset(hash, data) }
        }
    }

    /// Loads `sync/assets`, dropping files whose bytes do not match their name, and recovers
    /// referenced assets that only the view still holds.
    private func loadAssets() throws {
        let directory = Path.join(path, PackageLayout.assets)
        for name in try fileSystem.listDirectory(directory) {
            guard let hash = AssetHash(hex: name) else { continue }
            let bytes = try fileSystem.readFile(Path.join(directory, name))
            if AssetHash.of(bytes) == hash {
                replica.assets.insert(Data(bytes))
                storedAssets.insert(hash)
            } else {
                notices.append("asset \(name) was damaged and has been removed; a peer can send it again")
                try fileSystem.removeFile(Path.join(directory, name))
            }
        }
        let missing = Set(replica.missingAssets)
        guard !missing.isEmpty else { return }
        var candidates = [Path.join(path, PackageLayout.background)]
        if let names = try? fileSystem.listDirectory(Path.join(path, PackageLayout.stickers)) {
            candidates += names.map { Path.join(path, PackageLayout.stickers, $0) }
        }
        for file in candidates {
            guard let bytes = try? fileSystem.readFile(file) else { continue }
            let hash = AssetHash.of(bytes)
            if missing.contains(hash), !replica.assets.contains(hash) {
                // A full disk must not keep the board closed: the bytes serve from memory, and
                // the view file still holds them for the next open to store.
                do {
                    try storeAsset(hash, Data(bytes))
                    notices.append("recovered asset \(hash.hex.prefix(12)) from \(Path.name(of: file))")
                } catch {
                    notices.append("recovered asset \(hash.hex.prefix(12)) from \(Path.name(of: file)) in memory only; it could not be stored in \(PackageLayout.assets) (\(error)), the view still holds it")
                }
                replica.assets.insert(Data(bytes))
            }
        }
    }

    private func viewNeedsRebuild() throws -> Bool {
        guard let view = lastView, view.versionVector == replica.versionVector else { return true }
        guard try fileSystem.fileSize(Path.join(path, PackageLayout.manifest)) != nil else { return true }
        if view.background != nil, try fileSystem.fileSize(Path.join(path, PackageLayout.background)) == nil { return true }
        for id in view.stickers.keys {
            if try fileSystem.fileSize(Path.join(path, PackageLayout.stickers, "\(id).png")) == nil { return true }
        }
        return false
    }
}

// MARK: Authors (servers with access control)

extension BoardPackage {
    /// The largest `sync/authors` that loads. A hub binds at most
    /// `BoardHub.defaultMaxAuthorsPerBoard` (65,536) replicas per board, each line at most 82
    /// bytes (16 hex digits, a space, a 64-byte subject, a newline): 5.4 MB, well below it.
    public static let maxAuthorsFileBytes = 8 << 20

    /// Which token subject owns each replica id on this board (`sync/authors`: one line per
    /// binding, `<replica hex> <subject>`, appended and synced before the replica's first
    /// operation is accepted). An incomplete last line (a torn append) never took effect: it is
    /// cut off here, so the next binding starts on a line of its own.
    public func loadAuthors() throws -> [ReplicaID: String] {
        let path = Path.join(self.path, PackageLayout.authors)
        guard let size = try fileSystem.fileSize(path) else { return [:] }
        guard size <= Self.maxAuthorsFileBytes else {
            throw StoreError.damagedFile(path: path, "\(size) bytes is more than any board's authors take (\(Self.maxAuthorsFileBytes >> 20) MiB)")
        }
        let bytes = try fileSystem.readFile(path)
        if let last = bytes.last, last != UInt8(ascii: "\n") {
            let kept = (bytes.lastIndex(of: UInt8(ascii: "\n")) ?? -1) + 1
            try fileSystem.truncateFile(path, to: kept)
            try fileSystem.syncFile(path)
        }
        var authors: [ReplicaID: String] = [:]
        for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast() {
            let fields = String(decoding: line, as: UTF8.self).split(separator: " ")
            guard fields.count == 2, let raw = UInt64(fields[0], radix: 16) else {
                throw StoreError.damagedFile(path: path, "a line is not `<replica hex> <subject>`")
            }
            if authors[ReplicaID(raw)] == nil { authors[ReplicaID(raw)] = String(fields[1]) }
        }
        return authors
    }

    /// Records durably that `replica` belongs to `subject`.
    public func bindAuthor(_ replica: ReplicaID, to subject: String) throws {
        let path = Path.join(self.path, PackageLayout.authors)
        let existed = try fileSystem.fileSize(path) != nil
        try fileSystem.appendFile(path, Array("\(String(replica.rawValue, radix: 16)) \(subject)\n".utf8))
        try fileSystem.syncFile(path)
        if !existed { try fileSystem.syncDirectory(Path.join(self.path, PackageLayout.sync)) }
    }
}
