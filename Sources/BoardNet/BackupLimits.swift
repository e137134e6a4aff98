import BoardModel
import BoardStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Every size bound on the backup path, in one place, read by both sides: the writer
/// (`BackupWorker`: what it copies, what the S3 uploader sends) and `BackupRestore` (what it
/// reads back). A backup the writer accepts is one restore accepts; a board over a bound is
/// refused by the writer, loudly (a log line, `BackupReport.tooLarge`, the
/// `boardsync_backup_boards_too_large` metric), never written for restore to refuse later.
/// Tests inject small values (`BackupTarget.limits`); servers and `restore` use `standard`.
public struct BackupLimits: Sendable, Equatable {
    /// The largest op log (its whole records) backed up and restored: 1 GiB.
    public var maxLogBytes = 1 << 30
    /// The largest image (one record's worth, `OpLog.maxRecordSize`).
    public var maxImageBytes = OpLog.maxRecordSize
    /// The largest manifest (about 200,000 images' names).
    public var maxManifestBytes = 16 << 20
    /// Keys one listing may bring in all.
    public var maxListedKeys = 10_000_000
    /// The largest answer to one listing request (a page of 1,000 keys is about 300 KB).
    public var maxListPageBytes = 16 << 20
    /// Bytes of listing answers one listing reads in all: a bucket paging forever with fresh
    /// tokens ends here with an error (1 GiB).
    public var maxListedBytes = 1 << 30
    /// The largest answer read to a PUT, POST or DELETE, or to a refused request (an error).
    public var maxReplyBytes = 1 << 20
    /// Bytes read, hashed, written or handed on at a time when copying.
    public var chunkBytes = 1 << 20
    /// S3: an object above this goes up as a multipart upload (`partBytes` a part, the last
    /// smaller); at or below it, one PUT.
    public var multipartThreshold = 16 << 20
    /// S3: one part of a multipart upload (S3 wants 5 MiB at least but for the last part).
    public var partBytes = 16 << 20

    public init() {}

    /// What servers and `restore` use.
    public static let standard = BackupLimits()
}

/// A board over one of the `BackupLimits`: the writer refuses it (its previous backup, if any,
/// stays), and says which bound and by how much.
public struct BackupTooLarge: Error, CustomStringConvertible, Sendable {
    public var what: String
    public var bytes: Int
    public var limit: Int
    public var bound: String

    public var description: String {
        "TOO LARGE TO BACK UP: \(what) is \(bytes) bytes, over the \(limit) a backup may hold (BackupLimits.\(bound)); it is not backed up (compact the board, `board-sync admin compact`, or split it)"
    }
}

/// Bytes a backup copies, read `count` bytes at a time at an offset: an op log held open by
/// descriptor (`BackupSource`), an image file, or bytes in memory. Reading is the only way to
/// them, so a copy holds one chunk at a time.
public struct BackupReader: Sendable {
    public let count: Int
    private let readAt: @Sendable (_ offset: Int, _ count: Int) throws -> [UInt8]

    public init(count: Int, read: @escaping @Sendable (_ offset: Int, _ count: Int) throws -> [UInt8]) {
        self.count = count
        readAt = read
    }

    public static func bytes(_ bytes: [UInt8]) -> BackupReader {
        BackupReader(count: bytes.count) { offset, count in Array(bytes[offset..<(offset + count)]) }
    }

    /// Exactly `count` bytes at `offset` (inside `self.count`).
    public func read(_ offset: Int, _ count: Int) throws -> [UInt8] { try readAt(offset, count) }

    /// Every byte, in pieces of at most `chunk` bytes, in order.
    public func chunks(of chunk: Int, _ body: ([UInt8]) throws -> Void) throws {
        var offset = 0
        while offset < count {
            let piece = try read(offset, min(chunk, count - offset))
            try body(piece)
            offset += piece.count
        }
    }

    /// The first `count` bytes only.
    public func prefix(_ count: Int) -> BackupReader {
        BackupReader(count: min(count, self.count), read: readAt)
    }

    /// The hex SHA-256 of every byte, read in chunks.
    public func sha256(chunk: Int) throws -> String {
        var hash = SHA256Stream()
        try chunks(of: chunk) { hash.update($0) }
        return hash.hex()
    }
}

/// A file opened for reading (O_NOFOLLOW, a regular file), closed with the value.
final class BackupFile: Sendable {
    let path: String
    let size: Int
    private let fd: Int32

    init(_ path: String) throws {
        let fd = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw BackupError("cannot open \(path): \(String(cString: strerror(errno)))") }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            Glibc.close(fd)
            throw BackupError("\(path) is not a regular file")
        }
        self.path = path
        self.fd = fd
        size = Int(info.st_size)
    }

    deinit { Glibc.close(fd) }

    var reader: BackupReader { BackupReader(count: size) { offset, count in try self.read(offset, count) } }

    func read(_ offset: Int, _ count: Int) throws -> [UInt8] {
        try BackupFile.pread(fd, path: path, offset: offset, count: count)
    }

    /// Exactly `count` bytes at `offset` of `fd` (a file shorter than that is an error).
    static func pread(_ fd: Int32, path: String, offset: Int, count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = bytes.withUnsafeMutableBytes { Glibc.pread(fd, $0.baseAddress! + done, count - done, off_t(offset + done)) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else {
                throw BackupError("cannot read \(path): \(got == 0 ? "it is shorter than the \(offset + count) bytes it had" : String(cString: strerror(errno)))")
            }
            done += got
        }
        return bytes
    }
}

/// SHA-256 over pieces, for copies that never hold the whole.
struct SHA256Stream {
    private var state = SHA256()
    mutating func update(_ bytes: [UInt8]) { state.update(bytes) }
    mutating func hex() -> String { SigV4.hex(state.finalize()) }
}
