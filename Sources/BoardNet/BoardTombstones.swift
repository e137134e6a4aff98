import BoardSync
import Foundation

/// Deleted boards' tombstones: `DATA/.deleted/NAME`, a line of JSON (board, deletedAt,
/// subject). While one exists the server refuses every HELLO (and web view) naming the board
/// with `boardDeleted`, so a lagging peer reconnecting with its copy cannot bring the board back
/// silently. The operator re-creates a name with `board-sync admin undelete NAME` (or by
/// removing the file): from then on the next HELLO creates an empty board, or a peer that kept
/// a copy uploads it. With `--redis` tombstones live in Redis instead, for every server
/// (`SharedTombstones`, BoardRedis's `RedisBoardLog+Deletion.swift`); a file here still counts.
public enum BoardTombstones {
    public static let directoryName = ".deleted"

    public static func path(_ data: String, _ board: String) -> String {
        "\(data)/\(directoryName)/\(board)"
    }

    /// When the board was deleted (ISO 8601), or nil when it has no tombstone. A tombstone
    /// that cannot be read still counts (an unreadable file must not resurrect a board).
    public static func deletedAt(_ data: String, _ board: String) -> String? {
        let file = path(data, board)
        guard FileManager.default.fileExists(atPath: file) else { return nil }
        guard let bytes = FileManager.default.contents(atPath: file), bytes.count <= 4096,
              let object = try? JSONSerialization.jsonObject(with: bytes) as? [String: Any],
              let at = object["deletedAt"] as? String else { return "an unknown time" }
        return at
    }

    /// Writes the tombstone durably (written, synced, renamed into place, directory synced).
    public static func write(_ data: String, _ board: String, subject: String?) throws -> String {
        let directory = "\(data)/\(directoryName)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let at = ISO8601DateFormatter().string(from: Date())
        var object: [String: String] = ["board": board, "deletedAt": at]
        if let subject { object["subject"] = subject }
        let bytes = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) + Data("\n".utf8)
        let temporary = "\(directory)/.\(board).\(getpid()).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw AdminError("cannot write the tombstone \(temporary): \(String(cString: strerror(errno)))") }
        let wrote = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        _ = Glibc.close(fd)
        guard wrote == bytes.count, synced == 0, rename(temporary, path(data, board)) == 0 else {
            unlink(temporary)
            throw AdminError("cannot write the tombstone \(path(data, board)): \(String(cString: strerror(errno)))")
        }
        let dfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 { _ = fsync(dfd); _ = Glibc.close(dfd) }
        return at
    }

    public enum PackageRemoval: Equatable { case none, removed, failed(String) }

    /// Removes a board's package: renamed out of the way first (atomic: the name is free at
    /// once, in `.deleted/`), then its files removed.
    public static func removePackage(_ data: String, _ board: String) -> PackageRemoval {
        let path = "\(data)/\(board).boardpkg"
        guard FileManager.default.fileExists(atPath: path) else { return .none }
        let directory = "\(data)/\(directoryName)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let trash = "\(directory)/.\(board).\(getpid()).\(UInt32.random(in: .min ... .max)).removing"
        guard rename(path, trash) == 0 else { return .failed("cannot move \(path) away: \(String(cString: strerror(errno)))") }
        do { try FileManager.default.removeItem(atPath: trash) } catch { return .failed("some files of \(trash) could not be removed: \(error)") }
        return .removed
    }

    /// Removes the tombstone; false when there was none.
    public static func remove(_ data: String, _ board: String) -> Bool {
        unlink(path(data, board)) == 0
    }
}

/// An admin call's failure: an HTTP status and a message for the operator.
public struct AdminError: Error, CustomStringConvertible, Sendable {
    public let status: Int
    public let description: String

    public init(_ description: String, status: Int = 500) {
        self.status = status
        self.description = description
    }
}

/// Tombstones every server of a cluster sees (with `--redis`: BoardRedisNet's `RedisCluster`,
/// keeping them in Redis). The admin API deletes and undeletes through it; each answer comes
/// once, on the loop thread.
public protocol SharedTombstones: AnyObject {
    /// Where they are kept, for messages ("Redis at 127.0.0.1:6379").
    var tombstoneStore: String { get }
    func deleteBoard(_ board: String, deletedAt: String, subject: String?, hasCopy: Bool, done: @escaping (SharedTombstoneAnswer) -> Void)
    func undeleteBoard(_ board: String, done: @escaping (SharedTombstoneAnswer) -> Void)
}

/// What a shared delete or undelete came to.
public enum SharedTombstoneAnswer: Equatable, Sendable {
    case done(deletedAt: String)
    /// A delete of a board deleted already (its time), or an undelete with no tombstone (nil).
    case unchanged(deletedAt: String?)
    case noSuchBoard
    /// The bound on tombstones is reached (this many).
    case full(count: Int)
    case failed(String)
}
