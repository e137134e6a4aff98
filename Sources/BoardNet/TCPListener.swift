#if canImport(Glibc)
import Glibc
#endif
import CBoardNet

/// A listening TCP socket that hands accepted connections to `onAccept`. Loop thread only.
public final class TCPListener: EventSource {
    public let loop: EventLoop
    public let address: SocketAddress
    private var fd: Int32
    public var onAccept: ((TCPConnection) -> Void)?
    /// Told when accepting fails for lack of descriptors or memory (the listener then pauses).
    public var onError: ((String) -> Void)?
    private var paused = false

    /// Binds and listens (port 0 picks a free port; `address` tells which).
    public init(address: SocketAddress, on loop: EventLoop) throws {
        self.loop = loop
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw NetError.system("socket", errno) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address4 = address.sockaddr()
        let bound = withUnsafePointer(to: &address4) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 128) == 0 else {
            let code = errno
            _ = Glibc.close(fd)
            throw NetError.system("bind/listen on \(address)", code)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.fd = fd
        self.address = SocketAddress(host: address.host, port: UInt16(bigEndian: actual.sin_port))
        try loop.register(fd, self, events: EPOLLIN.rawValue)
    }

    func handle(events: UInt32) {
        while fd >= 0 {
            var remote = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let client = withUnsafeMutablePointer(to: &remote) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(fd, $0, &length) }
            }
            guard client >= 0 else {
                let code = errno
                if code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM {
                    // The pending connection stays queued and the socket stays readable: without
                    // a pause the loop would spin. Try again in a moment.
                    pause(for: 0.1, because: String(cString: strerror(code)))
                }
                return
            }
            _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            var text = [CChar](repeating: 0, count: 32)
            var addr = remote.sin_addr
            inet_ntop(AF_INET, &addr, &text, 32)
            let host = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let name = "\(host):\(UInt16(bigEndian: remote.sin_port))"
            guard let connection = try? TCPConnection(loop: loop, fd: client, remote: name, connecting: false) else {
                _ = Glibc.close(client)
                continue
            }
            onAccept?(connection)
        }
    }

    private func pause(for seconds: Double, because why: String) {
        guard !paused, fd >= 0 else { return }
        paused = true
        loop.unregister(fd)
        onError?("not accepting for \(Int(seconds * 1000)) ms: \(why)")
        loop.schedule(after: seconds) { [weak self] in
            guard let self, self.fd >= 0 else { return }
            self.paused = false
            try? self.loop.register(self.fd, self, events: EPOLLIN.rawValue)
        }
    }

    /// Stops accepting.
    public func close() {
        guard fd >= 0 else { return }
        loop.unregister(fd)
        _ = Glibc.close(fd)
        fd = -1
    }
}
