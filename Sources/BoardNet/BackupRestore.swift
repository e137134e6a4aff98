import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `board-sync restore`: every board backed up at a target, into a data directory a server
/// then serves. Everything is fetched and checked first (each manifest, the log's size, hash and
/// records, each image's hash) into a staging directory inside the data directory, and each
/// board opened there once (which writes its view and gives it a new replica identity, as a
/// restored copy must have, and every image its log shows must be there); only when every board
/// checked out are they moved into place, all or none (`moveIntoPlace`). A damaged, truncated
/// or incomplete backup changes nothing.
public enum BackupRestore {
    public struct Options: Sendable {
        /// Restore into a data directory that holds something (existing boards of the same
        /// names are moved aside, never deleted).
        public var force = false
        /// Only these boards (nil: every board in the backup).
        public var boards: [String]?
        public init() {}
    }

    public struct Restored: Sendable {
        public var board: String
        public var operations: Int
        public var images: Int
        public var takenAt: String
    }

    public struct Outcome: Sendable {
        public var restored: [Restored] = []
        /// Existing packages moved aside (with --force).
        public var movedAside: [String] = []
    }

    public static func restore(from target: any BackupTarget, into data: String, options: Options = Options()) throws -> Outcome {
        let fileSystem = PosixFileSystem()
        var boards = try target.list("boards/").compactMap { key -> String? in
            let parts = key.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[2] == "manifest.json", Hello.isValidBoardName(String(parts[1])) else { return nil }
            return String(parts[1])
        }.sorted()
        if let wanted = options.boards {
            for name in wanted where !boards.contains(name) { throw BackupError("the backup at \(target) holds no board '\(name)'") }
            boards = boards.filter(wanted.contains)
        }
        guard !boards.isEmpty else { throw BackupError("no board backups at \(target) (expected boards/NAME/manifest.json)") }
        if fileSystem.isDirectory(data) {
            let entries = try fileSystem.listDirectory(data).filter { !$0.hasPrefix(".restore-") }
            if !entries.isEmpty, !options.force {
                throw BackupError("the data directory \(data) is not empty (\(entries.count) entries); restore into an empty or new directory, or give --force (boards of the same names are then moved aside, never deleted)")
            }
        } else if fileSystem.exists(data) {
            throw BackupError("\(data) is not a directory")
        }
        try fileSystem.createDirectories(data)
        let staging = Path.join(data, ".restore-\(getpid())-\(Int(Date().timeIntervalSince1970))")
        try fileSystem.createDirectories(staging)
        var outcome = Outcome()
        do {
            for board in boards {
                outcome.restored.append(try stage(board, from: target, into: Path.join(staging, "\(board).boardpkg"), fileSystem))
            }
            // Every board checked out: into place, all or none.
            let stamp = BackupManifest.timestamp(Date().timeIntervalSince1970).replacingOccurrences(of: ":", with: "")
            let moves = boards.map { board in
                Move(staged: Path.join(staging, "\(board).boardpkg"), destination: Path.join(data, "\(board).boardpkg"),
                     aside: Path.join(data, "\(board).boardpkg.before-restore-\(stamp)"))
            }
            outcome.movedAside = try moveIntoPlace(moves, data: data, fileSystem, rename: fileSystem.rename)
        } catch {
            try? FileManager.default.removeItem(atPath: staging)
            throw error
        }
        try? FileManager.default.removeItem(atPath: staging)
        return outcome
    }

    /// One board's way into place: the staged package to `destination`, what was there (if
    /// anything) to `aside` first.
    struct Move: Sendable {
        var staged: String
        var destination: String
        var aside: String
    }

    /// Restore could not undo a failed move into place: says exactly what is where.
    public struct PartlyRestored: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Moves every staged board into place, all or none. Every destination's lock is taken
    /// first and held through every rename (a server holding one refuses the whole restore
    /// before anything moved); if a rename fails, the ones done are undone in reverse (each
    /// restored board back to staging, each board moved aside back). Returns the asides made.
    /// If undoing fails too, throws `PartlyRestored` naming every package moved and where.
    static func moveIntoPlace(_ moves: [Move], data: String, _ fileSystem: PosixFileSystem, rename: (String, String) throws -> Void) throws -> [String] {
        var locks: [FileLock] = []
        defer { for lock in locks { lock.release() } }
        for move in moves where fileSystem.exists(move.destination) {
            // A server still serving it holds its lock: never pull a package from under it.
            if let lock = try BoardPackage.takeLockForRestore(move.destination, fileSystem) { locks.append(lock) }
        }
        var done: [(from: String, to: String)] = []
        do {
            for move in moves {
                if fileSystem.exists(move.destination) {
                    try rename(move.destination, move.aside)
                    done.append((move.destination, move.aside))
                }
                try rename(move.staged, move.destination)
                done.append((move.staged, move.destination))
            }
            try fileSystem.syncDirectory(data)
        } catch {
            var undone = 0
            for step in done.reversed() {
                do {
                    try rename(step.to, step.from)
                    undone += 1
                } catch let undoError {
                    let left = done.dropLast(undone).map { "\($0.from) -> \($0.to)" }.joined(separator: "; ")
                    throw PartlyRestored(description: "moving the restored boards into place failed (\(error)) and undoing it failed too (\(undoError)); these moves stand: \(left) (a package renamed to *.before-restore-* is the board that was there; one under .restore-* was not restored)")
                }
            }
            try? fileSystem.syncDirectory(data)
            throw error
        }
        return done.filter { $0.to.contains(".before-restore-") }.map(\.to)
    }

    /// Fetches and checks one board's backup into `path`, then opens it once. The log and the
    /// images are streamed into their files (hashed and counted as they come), never held
    /// whole; every bound is the writer's (`target.limits`).
    static func stage(_ board: String, from target: any BackupTarget, into path: String, _ fileSystem: PosixFileSystem) throws -> Restored {
        let limits = target.limits
        guard let manifestBytes = try target.get(BackupManifest.key(board: board), maxBytes: limits.maxManifestBytes) else {
            throw BackupError("board '\(board)': its manifest vanished from \(target)")
        }
        let manifest = try BackupManifest.decode(manifestBytes, board: board, limits: limits)
        try fileSystem.createDirectories(Path.join(path, PackageLayout.assets))
        let logKey = BackupManifest.logKey(board: board, log: manifest.log)
        let logPath = Path.join(path, PackageLayout.opLog)
        guard let (logCount, logSHA) = try download(logKey, maxBytes: manifest.logBytes, to: logPath, from: target) else {
            throw BackupError("board '\(board)': the backup's op log \(logKey) is missing; the backup is damaged")
        }
        guard logCount == manifest.logBytes else {
            throw BackupError("board '\(board)': the backup's op log is \(logCount) bytes, not the \(manifest.logBytes) its manifest names (truncated)")
        }
        guard logSHA == manifest.logSHA256 else {
            throw BackupError("board '\(board)': the backup's op log does not match its SHA-256 (damaged)")
        }
        let logFile = try BackupFile(logPath)
        let check = try OpLog.check(size: logFile.size, read: logFile.read)
        guard check.damage == nil, check.tornTail == nil, check.validBytes == logFile.size else {
            throw BackupError("board '\(board)': the backup's op log is damaged: \(check.damage ?? check.tornTail ?? "trailing bytes")")
        }
        for hex in manifest.assets {
            let file = Path.join(path, PackageLayout.assets, hex)
            guard let (_, sha) = try download(BackupManifest.assetKey(hex), maxBytes: limits.maxImageBytes, to: file, from: target) else {
                throw BackupError("board '\(board)': image \(hex.prefix(12)) named by its manifest is missing from \(target)")
            }
            guard sha == hex else {
                throw BackupError("board '\(board)': image \(BackupManifest.assetKey(hex)) at \(target) does not match its SHA-256 (damaged)")
            }
        }
        try fileSystem.syncDirectory(Path.join(path, PackageLayout.assets))
        try fileSystem.syncDirectory(Path.join(path, PackageLayout.sync))
        // Opening takes a new identity (no replica.json: a restored package must never make
        // operations under the id of the one backed up) and writes the view.
        let package = try BoardPackage.open(at: path, fileSystem: fileSystem, newReplicaID: {
            var generator = SystemRandomNumberGenerator()
            return ReplicaID(UInt64.random(in: 1...UInt64.max, using: &generator))
        })
        let operations = Int(clamping: package.replica.versionVector.totalCount)
        // Every image the board shows must have come with it (but those the board itself did
        // not hold when backed up, which the manifest names).
        let missing = package.replica.missingAssets.map(\.hex).filter { !(manifest.imagesNotHeld ?? []).contains($0) }
        package.close()
        guard missing.isEmpty else {
            throw BackupError("board '\(board)': its op log shows \(missing.count) image(s) its backup does not hold: \(missing.prefix(8).joined(separator: ", "))\(missing.count > 8 ? ", …" : "") (the backup is incomplete)")
        }
        return Restored(board: board, operations: operations, images: manifest.assets.count, takenAt: manifest.takenAt)
    }
}

extension BackupRestore {
    /// One object streamed into a new file at `path` (fsynced): its size and hex SHA-256, or
    /// nil when the target has no such object.
    static func download(_ key: String, maxBytes: Int, to path: String, from target: any BackupTarget) throws -> (Int, String)? {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BackupError("cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var hash = SHA256Stream()
        var count = 0
        let found = try target.get(key, maxBytes: maxBytes) { piece in
            hash.update(piece)
            count += piece.count
            var done = 0
            while done < piece.count {
                let wrote = piece.withUnsafeBytes { write(fd, $0.baseAddress! + done, piece.count - done) }
                if wrote < 0, errno == EINTR { continue }
                guard wrote > 0 else { throw BackupError("cannot write \(path): \(String(cString: strerror(errno)))") }
                done += wrote
            }
        }
        guard found else { return nil }
        guard fsync(fd) == 0 else { throw BackupError("cannot sync \(path): \(String(cString: strerror(errno)))") }
        return (count, hash.hex())
    }
}

extension BoardPackage {
    /// Takes a package's lock to check nobody holds it (nil when the package has no sync/).
    static func takeLockForRestore(_ path: String, _ fileSystem: any FileSystem) throws -> FileLock? {
        guard fileSystem.isDirectory(Path.join(path, PackageLayout.sync)) else { return nil }
        do {
            return try fileSystem.lock(Path.join(path, PackageLayout.lock))
        } catch {
            throw BackupError("\(path) is open in another process (a server still running on this data directory?): \(error)")
        }
    }
}
