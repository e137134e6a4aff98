import BoardStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A command sent to the running `peer` that holds its package: the command line as the user
/// gave it, the working directory its relative paths mean, and the bytes of every image it
/// names (read by the client: the peer never reads a path a request names).
struct ControlRequest: Codable {
    var command: String
    var arguments: [String]
    var directory: String
    var images: [String: Data]
    /// The package folder the client means (its device and inode): a peer serves only its own
    /// package, so a socket planted in another package (a symbolic link to this peer's socket)
    /// cannot turn a command on that package into one on this peer's board.
    var package: ControlPackageID?
}

/// A package folder's device and inode, as `stat` gives them.
struct ControlPackageID: Codable, Equatable {
    var device: UInt64
    var inode: UInt64

    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}

/// What the command printed and its outcome, which the client reproduces as its own.
struct ControlResponse: Codable {
    /// An export's bytes, for the client to write at the path it asked for.
    struct File: Codable {
        var path: String
        var bytes: Data
    }
    enum Outcome: String, Codable {
        /// The command ran (exit 0).
        case done
        /// Bad usage (exit 64, with the command's usage line).
        case usage
        /// The command failed (exit 1).
        case failure
        /// The peer is stopping and did not run the command (the client waits and retries).
        case stopping
        /// The request was refused before it ran (too many connections, not this user, malformed).
        case refused
    }
    var outcome: Outcome
    var message: String = ""
    var stdout = Data()
    var stderr = Data()
    var file: File?
}

/// The control channel's bounds.
enum ControlLimits {
    /// Largest image a request carries (the peer may hold `connections` requests at once; a
    /// larger sticker is added with the peer stopped, up to the live client's 64 MiB).
    static let imageBytes = 16 << 20
    /// Largest request a peer reads (an image, base64, and the command line).
    static let requestBytes = 24 << 20
    /// Largest answer a client reads (an export at a large `--scale`).
    static let responseBytes = 512 << 20
    /// Seconds a peer waits for a whole request (a client that sends nothing or trickles is
    /// cut off then; the peer's other connections and its sync go on meanwhile).
    static let requestSeconds = 10.0
    /// Seconds a peer tries to deliver an answer to a client that does not read it.
    static let answerSeconds = 30.0
    /// Seconds a client waits for the answer (a large export renders for a while).
    static let clientSeconds = 120.0
    /// Control connections a peer serves at once; more are answered "busy" and closed.
    static let connections = 8
}

/// Frames (`BSC1`, a big-endian u32 length, JSON) over a Unix domain socket, with deadlines.
enum ControlSocket {
    /// The socket, inside the package it serves.
    static let relativePath = "sync/control.sock"
    static let magic: [UInt8] = Array("BSC1".utf8)

    struct Trouble: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func path(package: String) -> String { Path.join(package, relativePath) }

    /// Runs `body` with an address naming the socket at `path`: the path itself when it fits
    /// `sun_path` (108 bytes), else `/proc/self/fd/N/NAME` through a descriptor of its directory.
    static func withAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) throws -> T) throws -> T {
        var directoryFD: Int32 = -1
        defer { if directoryFD >= 0 { close(directoryFD) } }
        var name = path
        if path.utf8.count >= 108 {
            directoryFD = open(Path.parent(of: path), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard directoryFD >= 0 else { throw Trouble("cannot open \(Path.parent(of: path)): \(String(cString: strerror(errno)))") }
            name = "/proc/self/fd/\(directoryFD)/\(Path.name(of: path))"
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(name.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw Trouble("the socket path is too long: \(name)") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return try withUnsafePointer(to: &address) {
            try $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { try body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// The user id of the process at the other end.
    static func peerUID(_ fd: Int32) -> uid_t? {
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; } (Glibc shows it only under _GNU_SOURCE).
        var credentials: (pid: Int32, uid: uid_t, gid: gid_t) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, uid_t, gid_t)>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, length == 12 else { return nil }
        return credentials.uid
    }

    static func setNonBlocking(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// Closes a connection, first discarding what the client sent and nobody read (at most
    /// 1 MiB, without waiting): closing a Unix socket with unread bytes resets the connection,
    /// and the client would lose the answer it was given.
    static func drainAndClose(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        for _ in 0..<16 where recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 {}
        close(fd)
    }

    /// Waits until `fd` is ready for `events` or `deadline` (monotonic seconds) passes.
    private static func wait(_ fd: Int32, _ events: Int32, until deadline: Double, what: String) throws {
        while true {
            let left = deadline - now()
            guard left > 0 else { throw Trouble("\(what) took longer than its deadline") }
            var ready = pollfd(fd: fd, events: Int16(events), revents: 0)
            let result = poll(&ready, 1, Int32(min(left, 1) * 1000) + 1)
            if result > 0 { return }
            if result < 0, errno != EINTR { throw Trouble("poll: \(String(cString: strerror(errno)))") }
        }
    }

    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// Sends one frame of `payload` (the socket is non-blocking).
    static func send(_ fd: Int32, _ payload: Data, until deadline: Double) throws {
        guard var length = UInt32(exactly: payload.count)?.bigEndian else {
            throw Trouble("a frame of \(payload.count) bytes is over the 4 GiB a frame can say")
        }
        var frame = Data(magic)
        frame.append(Data(bytes: &length, count: 4))
        frame.append(payload)
        var sent = 0
        try frame.withUnsafeBytes { raw in
            while sent < raw.count {
                let count = Glibc.send(fd, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                if count > 0 { sent += count; continue }
                if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                    try wait(fd, Int32(POLLOUT), until: deadline, what: "sending")
                    continue
                }
                throw Trouble("the other end closed the connection (\(String(cString: strerror(errno))))")
            }
        }
    }

    /// Receives one frame of at most `limit` bytes, whole before `deadline`.
    static func receive(_ fd: Int32, limit: Int, until deadline: Double) throws -> Data {
        let header = try read(fd, count: 8, until: deadline, atStart: true)
        guard Array(header.prefix(4)) == magic else { throw Trouble("not a board-sync control frame") }
        let length = header.suffix(4).reduce(0) { $0 << 8 | Int($1) }
        guard length <= limit else { throw Trouble("a frame of \(length) bytes is over the limit of \(limit) bytes") }
        return try read(fd, count: length, until: deadline, atStart: false)
    }

    private static func read(_ fd: Int32, count: Int, until deadline: Double, atStart: Bool) throws -> Data {
        var data = Data(count: count)
        var got = 0
        while got < count {
            let result = data.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, count - got, 0) }
            if result > 0 { got += result; continue }
            if result == 0 {
                throw Trouble(atStart && got == 0 ? "the connection closed before a frame" : "the connection closed in the middle of a frame")
            }
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                try wait(fd, Int32(POLLIN), until: deadline, what: "receiving")
                continue
            }
            throw Trouble("receive: \(String(cString: strerror(errno)))")
        }
        return data
    }
}
