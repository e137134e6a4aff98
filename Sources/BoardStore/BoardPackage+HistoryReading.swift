import BoardCRDT
import Foundation

// Reading a package's history away from the thread that owns the package (a `LiveBoard`'s
// actor, the sync server's event loop), so that a long history's read never holds the live
// path: the owner captures, in O(log + index) bytes, what can change under a reader (the live
// op log, which compaction rewrites; the history index, which names the archive's committed
// size; the times noted and not yet written), and the reader then reads the archive itself,
// whose first `archiveSize` bytes no compaction rewrites (compaction appends past them, and
// cuts only bytes past them that an unfinished compaction left), and parses everything.

/// A package's history captured for reading on another thread (`BoardPackage.historyReading()`).
/// `read()` may run anywhere, at any time, while the package goes on being edited, merged and
/// compacted: it sees the history exactly as it was when captured. Pruning the archive
/// (`pruneHistory(before:)`, which rewrites it) while a reading is outstanding may make that
/// reading fail with a damaged-archive error or miss records; nothing else does.
public struct HistoryReading: Sendable {
    public let packagePath: String
    let fileSystem: any FileSystem
    /// The log's and the index's bytes as captured (nil: no such file).
    let logBytes: [UInt8]?
    let indexBytes: [UInt8]?
    let pendingTimes: [HistoryIndex.Entry]
    /// Bytes captured on the owner's thread (the log and the index).
    public var capturedBytes: Int { (logBytes?.count ?? 0) + (indexBytes?.count ?? 0) }

    /// The history as captured: reads the archive's committed bytes and parses them and the
    /// captured log (O(history)). Throws what `BoardHistory.read(package:fileSystem:)` throws.
    public func read() throws -> BoardHistory {
        let frozen = CapturedFileSystem(base: fileSystem, captured: [
            Path.join(packagePath, PackageLayout.opLog): logBytes,
            Path.join(packagePath, PackageLayout.historyIndex): indexBytes,
        ])
        return try BoardHistory.read(package: packagePath, fileSystem: frozen, pendingTimes: pendingTimes)
    }

    /// Bytes of history a read would parse: the captured log plus the archive's size now (an
    /// upper bound of what `read()` parses), for callers that bound what they read.
    public func approximateBytes() -> Int {
        let archive = (try? fileSystem.fileSize(Path.join(packagePath, PackageLayout.history))) ?? nil
        return (archive ?? 0) + (logBytes?.count ?? 0)
    }
}

extension BoardPackage {
    /// Captures what `HistoryReading.read()` needs from this package, on the package's own
    /// thread: the op log's and the history index's bytes (reads of two files the package keeps
    /// small: compaction bounds the log) and the record times not yet written. The archive is
    /// not read here.
    public func historyReading() throws -> HistoryReading {
        try requireOpen()
        func bytes(_ path: String) throws -> [UInt8]? {
            guard try fileSystem.fileSize(path) != nil else { return nil }
            return try fileSystem.readFile(path)
        }
        let logPath = Path.join(path, PackageLayout.opLog)
        if let size = try fileSystem.fileSize(logPath), size > BoardHistory.maxBytes {
            throw StoreError.damagedLog(path: logPath, offset: 0, "\(size) bytes (at most \(BoardHistory.maxBytes) are read)")
        }
        return HistoryReading(packagePath: path, fileSystem: fileSystem, logBytes: try bytes(logPath),
                              indexBytes: try bytes(historyIndexPath), pendingTimes: pendingTimes)
    }
}

/// The package's file system with some files frozen as captured (read-only: a history read
/// writes nothing).
struct CapturedFileSystem: FileSystem {
    let base: any FileSystem
    let captured: [String: [UInt8]?]

    func readFile(_ path: String) throws -> [UInt8] {
        if let frozen = captured[path] {
            guard let frozen else { throw FileSystemError.notFound(path) }
            return frozen
        }
        return try base.readFile(path)
    }

    func fileSize(_ path: String) throws -> Int? {
        if let frozen = captured[path] { return frozen?.count }
        return try base.fileSize(path)
    }

    func isDirectory(_ path: String) -> Bool { base.isDirectory(path) }
    func isSymbolicLink(_ path: String) -> Bool { base.isSymbolicLink(path) }
    func listDirectory(_ path: String) throws -> [String] { try base.listDirectory(path) }
    func identity(of path: String) throws -> String? { try base.identity(of: path) }

    private func refuse(_ path: String) -> FileSystemError {
        FileSystemError(.io, path: path, "a history reading writes nothing")
    }

    func createDirectory(_ path: String) throws { throw refuse(path) }
    func writeFile(_ path: String, _ bytes: [UInt8]) throws { throw refuse(path) }
    func appendFile(_ path: String, _ bytes: [UInt8]) throws { throw refuse(path) }
    func truncateFile(_ path: String, to size: Int) throws { throw refuse(path) }
    func syncFile(_ path: String) throws { throw refuse(path) }
    func syncDirectory(_ path: String) throws { throw refuse(path) }
    func rename(_ from: String, _ to: String) throws { throw refuse(to) }
    func removeFile(_ path: String) throws { throw refuse(path) }
    func lock(_ path: String) throws -> FileLock { throw refuse(path) }
}
