import BoardModel
import BoardStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A board's backup at its destination (docs/DEPLOYMENT.md, "Backups"):
///
///     assets/<sha256>               images, content-addressed, shared by every board
///     boards/NAME/log-<sha256>      the op log's durable prefix when the backup was taken
///     boards/NAME/manifest.json     written last: names the log, its size and hash, the images
///
/// The images and the log are written first; the manifest, written last in one atomic put,
/// is what makes the backup exist. A destination holding a manifest holds everything it names
/// (a failure before it leaves the previous backup in place, whole).
public struct BackupManifest: Codable, Sendable, Equatable {
    public static let formatName = "boardsync-backup-1"

    public var format: String
    public var board: String
    /// The log object's name inside `boards/NAME/`.
    public var log: String
    public var logBytes: Int
    public var logSHA256: String
    public var records: Int
    public var operations: Int
    /// Hex SHA-256 of every image the backup holds for this board.
    public var assets: [String]
    /// When the point was taken (UTC, ISO 8601): every operation acknowledged before it is in.
    public var takenAt: String
    /// Images the log names that the board itself did not hold when the point was taken (a
    /// sticker whose image never reached the server): restore accepts a board missing these,
    /// and refuses one missing any other image its log shows. Absent in older manifests.
    public var imagesNotHeld: [String]?

    public static func key(board: String) -> String { "boards/\(board)/manifest.json" }
    public static func logKey(board: String, log: String) -> String { "boards/\(board)/\(log)" }
    public static func assetKey(_ hex: String) -> String { "assets/\(hex)" }

    public func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return Array((try? encoder.encode(self)) ?? Data())
    }

    /// Reads and checks a manifest (a clear error naming what is wrong).
    public static func decode(_ bytes: [UInt8], board: String, limits: BackupLimits = .standard) throws -> BackupManifest {
        let manifest: BackupManifest
        do {
            manifest = try JSONDecoder().decode(BackupManifest.self, from: Data(bytes))
        } catch {
            throw BackupError("the backup manifest of board '\(board)' is not readable (\(error)); the backup is damaged")
        }
        guard manifest.format == formatName else { throw BackupError("the backup of board '\(board)' is in format '\(manifest.format)', not \(formatName)") }
        guard manifest.board == board else { throw BackupError("the backup manifest under boards/\(board)/ names board '\(manifest.board)'") }
        guard manifest.log == "log-\(manifest.logSHA256)", isHex64(manifest.logSHA256), manifest.logBytes >= 0 else {
            throw BackupError("the backup manifest of board '\(board)' names a bad log ('\(manifest.log.prefix(80))', \(manifest.logBytes) bytes)")
        }
        guard manifest.logBytes <= limits.maxLogBytes else {
            throw BackupError("the backup manifest of board '\(board)' names a log of \(manifest.logBytes) bytes, over the \(limits.maxLogBytes) a backup may hold (BackupLimits.maxLogBytes)")
        }
        for asset in manifest.assets + (manifest.imagesNotHeld ?? []) where !isHex64(asset) {
            throw BackupError("the backup manifest of board '\(board)' names a bad image '\(asset.prefix(80))'")
        }
        return manifest
    }

    public static func isHex64(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }

    public static func timestamp(_ seconds: Double) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec)
    }
}

/// One board's backup point with its op log held open, captured on the loop thread (an open
/// and an fstat: O(1)). Holding the descriptor keeps the bytes it names: a compaction renames a
/// new log into place, which leaves this file as it was, and appends only add beyond
/// `point.logBytes`. Read off the loop (`readLog`); the descriptor closes with the value.
public final class BackupSource: Sendable {
    public let board: String
    public let point: BackupPoint
    public let takenAt: Double
    private let fd: Int32

    /// Opens the log of `point` (an open package's durable prefix).
    public init(board: String, point: BackupPoint, takenAt: Double) throws {
        self.board = board
        self.takenAt = takenAt
        fd = try BackupSource.open(point.logPath)
        self.point = point
    }

    /// A package nobody has open: its whole log (a torn tail, if any, is left out when read).
    public init(board: String, closedPackage path: String, takenAt: Double) throws {
        self.board = board
        self.takenAt = takenAt
        let logPath = BackupPoint.logPath(of: path)
        fd = try BackupSource.open(logPath)
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let error = String(cString: strerror(errno))
            Glibc.close(fd)
            throw BackupError("cannot read \(logPath): \(error)")
        }
        point = BoardPackage.backupPoint(ofClosedPackage: path, logBytes: Int(info.st_size))
    }

    deinit { Glibc.close(fd) }

    private static func open(_ path: String) throws -> Int32 {
        let fd = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw BackupError("cannot open \(path): \(String(cString: strerror(errno)))") }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            Glibc.close(fd)
            throw BackupError("\(path) is not a regular file")
        }
        return fd
    }

    /// The log's first `point.logBytes` bytes, read as a copy reads them: a chunk at a time.
    public var log: BackupReader {
        BackupReader(count: point.logBytes) { offset, count in try BackupFile.pread(self.fd, path: self.point.logPath, offset: offset, count: count) }
    }

    /// The log's first `point.logBytes` bytes, whole (tests; copies read `log` in chunks).
    public func readLog() throws -> [UInt8] { try log.read(0, point.logBytes) }
}

extension BackupPoint {
    static func logPath(of package: String) -> String { Path.join(package, PackageLayout.opLog) }
}
