import BoardModel
import BoardStore
import BoardSync
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where backups go: a directory or S3-compatible object storage, as keys ("assets/<sha256>",
/// "boards/NAME/manifest.json") holding bytes. Each `put` is whole or absent at the
/// destination (a directory's file is written to a temp name, fsynced and renamed; an S3 PUT,
/// or a multipart upload's completion, is atomic), so a board's backup, whose manifest is
/// written last, is whole or absent. Logs and images are copied in chunks
/// (`limits.chunkBytes`, S3 parts of `limits.partBytes`), never held whole. Called from backup
/// threads only (blocking).
public protocol BackupTarget: Sendable, CustomStringConvertible {
    /// The bounds the writer and restore both hold to (`BackupLimits.standard` but in tests).
    var limits: BackupLimits { get }
    /// A small object (a manifest), from memory.
    func put(_ key: String, _ bytes: [UInt8]) throws
    /// An object read from `source` a chunk at a time (a log, an image).
    func put(_ key: String, from source: BackupReader) throws
    /// The object's bytes, or nil when there is none. Refuses one over `maxBytes`.
    func get(_ key: String, maxBytes: Int) throws -> [UInt8]?
    /// The object's bytes handed to `sink` a chunk at a time; false when there is none.
    /// Refuses one over `maxBytes` (before or while reading it).
    func get(_ key: String, maxBytes: Int, into sink: ([UInt8]) throws -> Void) throws -> Bool
    /// Every key starting with `prefix` (at most `limits.maxListedKeys`; an S3 target keeps
    /// only the backup's own names: `S3BackupTarget.isBackupKey`).
    func list(_ prefix: String) throws -> [String]
    func delete(_ key: String) throws
}

/// A backup target refused or failed a request: says which target and what it said.
public struct BackupError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Backups in a local (or mounted) directory.
public struct DirectoryBackupTarget: BackupTarget {
    public let root: String
    public let limits: BackupLimits
    private let fileSystem = PosixFileSystem()

    public init(root: String, limits: BackupLimits = .standard) {
        self.root = root
        self.limits = limits
    }

    public var description: String { root }

    func path(_ key: String) -> String { Path.join(root, key) }

    public func put(_ key: String, _ bytes: [UInt8]) throws {
        let file = path(key)
        do {
            try fileSystem.createDirectories(Path.parent(of: file))
            try fileSystem.writeAtomically(file, bytes)
        } catch {
            throw BackupError("cannot write \(file): \(error)")
        }
    }

    /// Copied a chunk at a time into a temp file beside the destination, fsynced, renamed
    /// over it, the directory fsynced (as `writeAtomically`, without holding the whole).
    public func put(_ key: String, from source: BackupReader) throws {
        let file = path(key)
        let temp = Path.join(Path.parent(of: file), ".\(Path.name(of: file)).tmp")
        do {
            try fileSystem.createDirectories(Path.parent(of: file))
            let fd = Glibc.open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw BackupError(String(cString: strerror(errno))) }
            do {
                try source.chunks(of: limits.chunkBytes) { piece in
                    var done = 0
                    while done < piece.count {
                        let wrote = piece.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, piece.count - done) }
                        if wrote < 0, errno == EINTR { continue }
                        guard wrote > 0 else { throw BackupError(String(cString: strerror(errno))) }
                        done += wrote
                    }
                }
                guard fsync(fd) == 0 else { throw BackupError("fsync: \(String(cString: strerror(errno)))") }
            } catch {
                Glibc.close(fd)
                throw error
            }
            Glibc.close(fd)
            try fileSystem.rename(temp, file)
            try fileSystem.syncDirectory(Path.parent(of: file))
        } catch {
            try? fileSystem.removeFile(temp)  // a full disk leaves no partial temp file behind
            throw BackupError("cannot write \(file): \(error)")
        }
    }

    public func get(_ key: String, maxBytes: Int) throws -> [UInt8]? {
        var bytes: [UInt8] = []
        return try get(key, maxBytes: maxBytes) { bytes += $0 } ? bytes : nil
    }

    public func get(_ key: String, maxBytes: Int, into sink: ([UInt8]) throws -> Void) throws -> Bool {
        let file = path(key)
        guard try fileSystem.fileSize(file) != nil else { return false }
        let opened = try BackupFile(file)
        guard opened.size <= maxBytes else { throw BackupError("\(file) is \(opened.size) bytes, over the \(maxBytes) this backup expects") }
        try opened.reader.chunks(of: limits.chunkBytes, sink)
        return true
    }

    public func list(_ prefix: String) throws -> [String] {
        // Keys are at most three levels deep (boards/NAME/FILE): walk from the prefix's directory.
        var keys: [String] = []
        func walk(_ relative: String, depth: Int) throws {
            let directory = relative.isEmpty ? root : Path.join(root, relative)
            guard fileSystem.isDirectory(directory), depth < 4 else { return }
            for name in try fileSystem.listDirectory(directory).sorted() where !name.hasPrefix(".") {
                let key = relative.isEmpty ? name : "\(relative)/\(name)"
                if fileSystem.isDirectory(Path.join(root, key)) {
                    if prefix.hasPrefix(key + "/") || key.hasPrefix(prefix) || prefix.isEmpty { try walk(key, depth: depth + 1) }
                } else if key.hasPrefix(prefix) {
                    keys.append(key)
                    guard keys.count <= limits.maxListedKeys else { throw BackupError("listing '\(prefix)' in \(root) brought over \(limits.maxListedKeys) keys (BackupLimits.maxListedKeys)") }
                }
            }
        }
        // A directory not made yet holds nothing (the first put makes it).
        guard fileSystem.exists(root) else { return [] }
        guard fileSystem.isDirectory(root) else { throw BackupError("the backup destination \(root) is not a directory") }
        try walk("", depth: 0)
        return keys
    }

    public func delete(_ key: String) throws {
        let file = path(key)
        if try fileSystem.fileSize(file) != nil { try fileSystem.removeFile(file) }
    }
}

