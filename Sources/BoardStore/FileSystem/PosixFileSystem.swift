#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The real file system, through POSIX calls. Each call retries `EINTR`, loops short writes,
/// closes its descriptor on every path, and names the call, path and errno when it fails.
public struct PosixFileSystem: FileSystem {
    public init() {}

    public func readFile(_ path: String) throws -> [UInt8] {
        let fd = try open(path, O_RDONLY)
        defer { _ = close(fd) }
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { raw in retrying { read(fd, raw.baseAddress, raw.count) } }
            if count < 0 { throw error("read", path) }
            if count == 0 { return result }
            result.append(contentsOf: buffer[0..<count])
        }
    }

    public func fileSize(_ path: String) throws -> Int? {
        var info = stat()
        if stat(path, &info) != 0 {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw error("stat", path)
        }
        return (info.st_mode & S_IFMT) == S_IFREG ? Int(info.st_size) : nil
    }

    public func isSymbolicLink(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK
    }

    public func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    public func listDirectory(_ path: String) throws -> [String] {
        guard let dir = opendir(path) else { throw error("opendir", path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    public func createDirectory(_ path: String) throws {
        if mkdir(path, 0o755) != 0 && !(errno == EEXIST && isDirectory(path)) {
            throw error("mkdir", path)
        }
    }

    public func writeFile(_ path: String, _ bytes: [UInt8]) throws {
        let fd = try open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        defer { _ = close(fd) }
        try writeAll(fd, bytes, path)
    }

    public func appendFile(_ path: String, _ bytes: [UInt8]) throws {
        let fd = try open(path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { _ = close(fd) }
        try writeAll(fd, bytes, path)
    }

    public func truncateFile(_ path: String, to size: Int) throws {
        if retrying({ truncate(path, off_t(size)) }) != 0 { throw error("truncate", path) }
    }

    public func syncFile(_ path: String) throws {
        let fd = try open(path, O_RDONLY)
        defer { _ = close(fd) }
        if retrying({ fsync(fd) }) != 0 { throw error("fsync", path) }
    }

    /// Many files: one `syncfs` on their file system. Few: an fsync each.
    public func syncFiles(_ paths: [String]) throws {
        guard paths.count > 8, let first = paths.first else {
            for path in paths { try syncFile(path) }
            return
        }
        let fd = try open(first, O_RDONLY)
        defer { _ = close(fd) }
        if retrying({ boardsync_syncfs(fd) }) != 0 { throw error("syncfs", first) }
    }

    public func syncDirectory(_ path: String) throws {
        let fd = try open(path, O_RDONLY | O_DIRECTORY)
        defer { _ = close(fd) }
        if retrying({ fsync(fd) }) != 0 { throw error("fsync", path) }
    }

    public func rename(_ from: String, _ to: String) throws {
        if Glibc.rename(from, to) != 0 { throw error("rename to \(to)", from) }
    }

    public func removeFile(_ path: String) throws {
        if unlink(path) != 0 && errno != ENOENT { throw error("unlink", path) }
    }

    public func identity(of path: String) throws -> String? {
        var info = stat()
        if stat(path, &info) != 0 {
            if errno == ENOENT { return nil }
            throw error("stat", path)
        }
        return "\(info.st_dev):\(info.st_ino)"
    }

    public func lock(_ path: String) throws -> FileLock {
        let fd = try open(path, O_RDWR | O_CREAT, 0o644)
        if retrying({ flock(fd, LOCK_EX | LOCK_NB) }) != 0 {
            let code = errno
            _ = close(fd)
            if code == EWOULDBLOCK {
                throw FileSystemError(.locked, path: path, "locked by another process (is a peer or server using this package?)")
            }
            throw FileSystemError(.io, path: path, "flock failed: \(String(cString: strerror(code)))")
        }
        return PosixFileLock(fd: fd)
    }

    // MARK: Helpers

    /// Every open refuses a symbolic link as the last component (O_NOFOLLOW): a link planted
    /// inside a package must never make BoardSync read or write a file outside it.
    /// Opens without following a link; a file (not a folder) must be a regular one: a FIFO,
    /// device or socket planted at a name BoardSync reads or writes (a predictable temp name, a
    /// package's file) is refused at once instead of blocking the open or the read forever.
    private func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0) throws -> Int32 {
        let isDirectory = flags & O_DIRECTORY != 0
        let fd = retrying { Glibc.open(path, flags | O_NOFOLLOW | O_CLOEXEC | (isDirectory ? 0 : O_NONBLOCK), mode) }
        if fd < 0 { throw error("open", path) }
        guard !isDirectory else { return fd }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            _ = close(fd)
            throw FileSystemError(.io, path: path, "open refused: not a regular file (a FIFO, device or socket is never read or written)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return fd
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8], _ path: String) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw in
                retrying { write(fd, raw.baseAddress! + offset, raw.count - offset) }
            }
            if written < 0 { throw error("write", path) }
            offset += written
        }
    }

    private func retrying<T: BinaryInteger>(_ call: () -> T) -> T {
        while true {
            let result = call()
            if result < 0 && errno == EINTR { continue }
            return result
        }
    }

    private func error(_ call: String, _ path: String) -> FileSystemError {
        let code = errno
        let message = "\(call) failed: \(String(cString: strerror(code)))"
        switch code {
        case ENOENT: return FileSystemError(.notFound, path: path, message)
        case EEXIST: return FileSystemError(.exists, path: path, message)
        case ENOTDIR: return FileSystemError(.notDirectory, path: path, message)
        default: return FileSystemError(.io, path: path, message)
        }
    }
}

/// syncfs(2) is a GNU extension the Glibc module does not export; the symbol is in every glibc
/// since 2.14.
@_silgen_name("syncfs")
private func boardsync_syncfs(_ fd: Int32) -> Int32

/// Owns the descriptor holding an flock; releasing closes it.
final class PosixFileLock: FileLock {
    private let fd: Mutex<Int32?>

    init(fd: Int32) {
        self.fd = Mutex(fd)
    }

    func release() {
        fd.withLock { fd in
            if let open = fd { _ = close(open) }
            fd = nil
        }
    }

    deinit { release() }
}
