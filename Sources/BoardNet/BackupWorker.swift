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
            } catch {
                report.failed.append((source.board, "\(error)"))
            }
        }
    }

    /// One board: true when a new backup was written, false when the destination held it.
    private func backUp(_ source: BackupSource) throws -> Bool {
        let board = source.board
        let bytes = try source.readLog()
        let check = OpLog.check(bytes)
        if let damage = check.damage {
            throw BackupError("its op log \(source.point.logPath) is damaged (\(damage)); nothing was written")
        }
        let log = Array(bytes[0..<check.validBytes])
        let sha = SigV4.hex(SHA256.hash(log))
        let assetNames = ((try? fileSystem.listDirectory(source.point.assetsPath)) ?? []).filter(BackupManifest.isHex64).sorted()
        if known[board] == nil, let existing = try target.get(BackupManifest.key(board: board), maxBytes: BackupManifest.maxBytes) {
            known[board] = try? BackupManifest.decode(existing, board: board)
        }
        let previous = known[board]
        if let previous, previous.logSHA256 == sha, Set(previous.assets).isSuperset(of: assetNames) { return false }
        var assets: [String] = []
        for name in assetNames {
            if storedAssets?.contains(name) == true { assets.append(name); continue }
            // Read now: an image is written whole under its name (temp file, rename) and never
            // changed. One that cannot be read or fails its hash fails the board for this run
            // (never a backup silently without it); its previous backup stays.
            let file = Path.join(source.point.assetsPath, name)
            let data: [UInt8]
            do {
                data = try fileSystem.readFile(file)
            } catch {
                throw BackupError("its image \(name) cannot be read (\(error)); nothing was written")
            }
            guard SigV4.hex(SHA256.hash(data)) == name else {
                throw BackupError("its image \(file) does not match its SHA-256 (damaged); nothing was written")
            }
            try target.put(BackupManifest.assetKey(name), data)
            storedAssets?.insert(name)
            assets.append(name)
        }
        let logName = "log-\(sha)"
        if previous?.log != logName { try target.put(BackupManifest.logKey(board: board, log: logName), log) }
        var manifest = BackupManifest(format: BackupManifest.formatName, board: board, log: logName, logBytes: log.count, logSHA256: sha,
                                      records: check.records, operations: check.operations, assets: assets,
                                      takenAt: BackupManifest.timestamp(source.takenAt))
        let notHeld = check.images.subtracting(assetNames).sorted()
        if !notHeld.isEmpty { manifest.imagesNotHeld = notHeld }
        try target.put(BackupManifest.key(board: board), manifest.encoded())
        known[board] = manifest
        if let previous, previous.log != logName {
            // The old log is named by no manifest any more (a failure here leaves litter, never harm).
            try? target.delete(BackupManifest.logKey(board: board, log: previous.log))
        }
        return true
    }
}
