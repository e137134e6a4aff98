/// Every file operation storage code makes goes through this seam, so tests and the simulator can
/// count writes and inject crashes, lost unsynced writes and torn writes (`MemoryFileSystem`).
///
/// Paths are absolute or relative POSIX paths. The durability contract mirrors POSIX: data written
/// to a file is durable only after `syncFile`; a created, renamed or removed name is durable only
/// after `syncDirectory` on its parent.
public protocol FileSystem: Sendable {
    /// The whole file; throws `FileSystemError.notFound` when it does not exist.
    func readFile(_ path: String) throws -> [UInt8]
    /// Size in bytes, nil when there is no regular file at `path`.
    func fileSize(_ path: String) throws -> Int?
    func isDirectory(_ path: String) -> Bool
    /// Whether `path` itself is a symbolic link (not followed).
    func isSymbolicLink(_ path: String) -> Bool
    /// Names in a directory (no `.` or `..`), sorted.
    func listDirectory(_ path: String) throws -> [String]
    /// Creates one directory level; succeeds when it already exists.
    func createDirectory(_ path: String) throws
    /// Creates or truncates `path` and writes `bytes` (not synced).
    func writeFile(_ path: String, _ bytes: [UInt8]) throws
    /// Appends to `path`, creating it if needed (not synced).
    func appendFile(_ path: String, _ bytes: [UInt8]) throws
    func truncateFile(_ path: String, to size: Int) throws
    /// fsync: the file's data is durable when this returns.
    func syncFile(_ path: String) throws
    /// fsync on a directory: names created, renamed or removed in it are durable.
    func syncDirectory(_ path: String) throws
    /// Atomically replaces `to` with `from`.
    func rename(_ from: String, _ to: String) throws
    /// Removes a file; succeeds when it does not exist.
    func removeFile(_ path: String) throws
    /// An identity of the directory or file at `path` that a copy does not share (device and
    /// inode on POSIX). Nil when nothing is there.
    func identity(of path: String) throws -> String?
    /// Takes an exclusive advisory lock on `path` (created if needed) for as long as the returned
    /// lock lives; throws `FileSystemError.locked` when another holder has it.
    func lock(_ path: String) throws -> FileLock
}

/// Held while a package is open; `release()` (or deinit) lets another process open it.
public protocol FileLock: AnyObject, Sendable {
    func release()
}

public struct FileSystemError: Error, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case notFound, exists, notDirectory, locked, io, crashed
    }

    public let code: Code
    public let path: String
    public let message: String

    public init(_ code: Code, path: String, _ message: String) {
        self.code = code
        self.path = path
        self.message = message
    }

    public static func notFound(_ path: String) -> FileSystemError {
        FileSystemError(.notFound, path: path, "no such file or directory")
    }

    public var description: String { "\(path): \(message)" }
}

extension FileSystem {
    /// File systems without links (`MemoryFileSystem`) have none.
    public func isSymbolicLink(_ path: String) -> Bool { false }

    /// Makes several files' data durable. The default fsyncs each; `PosixFileSystem` flushes the
    /// whole file system once when there are many (one `syncfs` instead of hundreds of fsyncs).
    public func syncFiles(_ paths: [String]) throws {
        for path in paths { try syncFile(path) }
    }

    public func exists(_ path: String) -> Bool {
        isDirectory(path) || ((try? fileSize(path)) ?? nil) != nil
    }

    /// Replaces `path` so that a crash at any point leaves either the old file or the new one
    /// under the final name, never a mix: write a temp file, fsync it, rename it over, fsync the
    /// directory.
    public func writeAtomically(_ path: String, _ bytes: [UInt8]) throws {
        let directory = Path.parent(of: path)
        let temp = Path.join(directory, ".\(Path.name(of: path)).tmp")
        do {
            try writeFile(temp, bytes)
            try syncFile(temp)
            try rename(temp, path)
        } catch {
            // A full disk must not leave a partial temp file behind.
            try? removeFile(temp)
            throw error
        }
        try syncDirectory(directory)
    }

    /// Creates `path` and any missing parents.
    public func createDirectories(_ path: String) throws {
        if isDirectory(path) { return }
        let parent = Path.parent(of: path)
        if parent != path, !parent.isEmpty, !isDirectory(parent) {
            try createDirectories(parent)
        }
        try createDirectory(path)
    }
}

/// Path string helpers (POSIX separators only).
public enum Path {
    public static func join(_ parts: String...) -> String {
        var result = ""
        for part in parts where !part.isEmpty {
            if result.isEmpty || result.hasSuffix("/") {
                result += part
            } else {
                result += "/" + part
            }
        }
        return result
    }

    /// The bytes of `path` without trailing slashes (a lone "/" stays).
    private static func trimmed(_ path: String) -> [UInt8] {
        var bytes = Array(path.utf8)
        while bytes.count > 1, bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
        return bytes
    }

    public static func parent(of path: String) -> String {
        let bytes = trimmed(path)
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        if slash == 0 { return "/" }
        return String(decoding: bytes[..<slash], as: UTF8.self)
    }

    public static func name(of path: String) -> String {
        let bytes = trimmed(path)
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return String(decoding: bytes, as: UTF8.self) }
        return String(decoding: bytes[(slash + 1)...], as: UTF8.self)
    }

    /// Whether `path` names an entry directly inside `directory`.
    public static func isEntry(_ path: String, of directory: String) -> Bool {
        let bytes = trimmed(path)
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return directory == "." }
        if slash == 0 { return directory == "/" && bytes.count > 1 }
        return bytes[..<slash].elementsEqual(directory.utf8)
    }
}
