import BoardModel
import BoardStore
import Dispatch
import Foundation

/// What one backup run did.
public struct BackupReport: Sendable {
    public var run: Int
    /// Boards whose new backup was written.
    public var written: [String] = []
    /// Boards whose backup at the destination already held this point.
    public var unchanged: [String] = []
    /// Boards that could not be backed up, and why (their previous backup stays whole).
    public var failed: [(board: String, error: String)] = []
    /// Of `failed`, the boards over a `BackupLimits` bound (tried again each run they change,
    /// refused until they are back under it).
    public var tooLarge: [String] = []
    /// When the run's points were taken: every operation acknowledged before then, on every
    /// board written or unchanged, is at the destination.
    public var takenAt: Double
    public var finishedAt: Double = 0
    /// Boards whose points were taken, and the longest a turn of the loop spent taking them.
    public var captured = 0
    public var longestLoopHold: Double = 0
}

/// The backup's file work, on a thread of its own (never the loop): reads each captured op log
/// prefix and the images beside it, and writes what the destination lacks, the manifest last.
/// Its state (what the destination holds) is touched only on its serial queue.
final class BackupWorker: @unchecked Sendable {
    let target: any BackupTarget
    let queue = DispatchQueue(label: "board-sync.backup")
    private let fileSystem = PosixFileSystem()
    /// The manifest at the destination, per board, as this process last wrote or read it.
    private var known: [String: BackupManifest] = [:]
    /// Images at the destination (listed on the first run).
    private var storedAssets: Set<String>?

    init(target: any BackupTarget) {
        self.target = target
    }

    /// On `queue`.
    func backUp(_ sources: [BackupSource], report: inout BackupReport) {
        if storedAssets == nil {
            do {
                storedAssets = Set(try target.list("assets/").map { String($0.dropFirst("assets/".count)) }.filter(BackupManifest.isHex64))
            } catch {
                for source in sources { report.failed.append((source.board, "\(error)")) }
                return
            }
        }
        for source in sources {
            do {
                if try backUp(source) { report.written.append(source.board) } else { report.unchanged.append(source.board) }
            } catch let error as BackupTooLarge {
                report.failed.append((source.board, "\(error)"))
                report.tooLarge.append(source.board)
            } catch {
                report.failed.append((source.board, "\(error)"))
            }
        }
    }

    /// One board: true when a new backup was written, false when the destination held it.
    /// Everything is read in chunks (`limits.chunkBytes`): the log's records one at a time to
    /// check them, then its bytes to hash them, then again to copy them; nothing whole.
    private func backUp(_ source: BackupSource) throws -> Bool {
        let board = source.board
        let limits = target.limits
        guard source.point.logBytes <= limits.maxLogBytes else {
            throw BackupTooLarge(what: "its op log", bytes: source.point.logBytes, limit: limits.maxLogBytes, bound: "maxLogBytes")
        }
        // A log of one chunk or less is read once (most boards); a bigger one a piece at a time.
        var whole = source.log
        if whole.count <= limits.chunkBytes { whole = .bytes(try whole.read(0, whole.count)) }
        let check = try OpLog.check(size: whole.count, read: whole.read)
        if let damage = check.damage {
            throw BackupError("its op log \(source.point.logPath) is damaged (\(damage)); nothing was written")
        }
        let log = whole.prefix(check.validBytes)
        let sha = try log.sha256(chunk: limits.chunkBytes)
        let assetNames = ((try? fileSystem.listDirectory(source.point.assetsPath)) ?? []).filter(BackupManifest.isHex64).sorted()
        if known[board] == nil, let existing = try target.get(BackupManifest.key(board: board), maxBytes: limits.maxManifestBytes) {
            known[board] = try? BackupManifest.decode(existing, board: board, limits: limits)
        }
        let previous = known[board]
        if let previous, previous.logSHA256 == sha, Set(previous.assets).isSuperset(of: assetNames) { return false }
        var assets: [String] = []
        for name in assetNames {
            if storedAssets?.contains(name) == true { assets.append(name); continue }
            // An image is written whole under its name (temp file, rename) and never changed:
            // hashed in a first pass, copied in a second. One that cannot be read or fails its
            // hash fails the board for this run (never a backup silently without it); its
            // previous backup stays.
            let path = Path.join(source.point.assetsPath, name)
            let file: BackupFile
            do {
                file = try BackupFile(path)
            } catch {
                throw BackupError("its image \(name) cannot be read (\(error)); nothing was written")
            }
            guard file.size <= limits.maxImageBytes else {
                throw BackupTooLarge(what: "its image \(name.prefix(12))", bytes: file.size, limit: limits.maxImageBytes, bound: "maxImageBytes")
            }
            let reader: BackupReader
            let imageSHA: String
            do {
                reader = file.size <= limits.chunkBytes ? BackupReader.bytes(try file.read(0, file.size)) : file.reader
                imageSHA = try reader.sha256(chunk: limits.chunkBytes)
            } catch {
                throw BackupError("its image \(name) cannot be read (\(error)); nothing was written")
            }
            guard imageSHA == name else {
                throw BackupError("its image \(path) does not match its SHA-256 (damaged); nothing was written")
            }
            try target.put(BackupManifest.assetKey(name), from: reader)
            storedAssets?.insert(name)
            assets.append(name)
        }
        let logName = "log-\(sha)"
        var manifest = BackupManifest(format: BackupManifest.formatName, board: board, log: logName, logBytes: log.count, logSHA256: sha,
                                      records: check.records, operations: check.operations, assets: assets,
                                      takenAt: BackupManifest.timestamp(source.takenAt))
        let notHeld = check.images.subtracting(assetNames).sorted()
        if !notHeld.isEmpty { manifest.imagesNotHeld = notHeld }
        let encoded = manifest.encoded()
        guard encoded.count <= limits.maxManifestBytes else {
            throw BackupTooLarge(what: "its manifest (naming \(assets.count) images)", bytes: encoded.count, limit: limits.maxManifestBytes, bound: "maxManifestBytes")
        }
        if previous?.log != logName { try target.put(BackupManifest.logKey(board: board, log: logName), from: log) }
        try target.put(BackupManifest.key(board: board), encoded)
        known[board] = manifest
        if let previous, previous.log != logName {
            // The old log is named by no manifest any more (a failure here leaves litter, never harm).
            try? target.delete(BackupManifest.logKey(board: board, log: previous.log))
        }
        return true
    }
}
