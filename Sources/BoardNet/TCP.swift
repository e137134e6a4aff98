#if canImport(Glibc)
import Glibc
#endif
import CBoardNet

/// An IPv4 address and port.
public struct SocketAddress: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT` (HOST an IPv4 address or `localhost`).
    public init(parsing text: String) throws {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            throw NetError.badAddress(text)
        }
        var host = String(text[..<colon])
        if host == "localhost" || host.isEmpty { host = "127.0.0.1" }
        var probe = in_addr()
        guard inet_pton(AF_INET, host, &probe) == 1 else { throw NetError.badAddress(text) }
        self.init(host: host, port: port)
    }

    public var description: String { "\(host):\(port)" }

    func sockaddr() -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        _ = inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }
}

/// A non-blocking TCP connection on an event loop, with a bounded send queue.
///
/// Loop thread only. `send` queues bytes and writes what the socket takes; when more than
/// `maxQueuedBytes` are waiting, the peer is not reading and the connection closes with an error
/// instead of buffering without limit.
public final class TCPConnection: EventSource {
    public let loop: EventLoop
    public let remote: String
    private var fd: Int32
    private var sendBuffer: [UInt8] = []
    private var sendOffset = 0
    private var connecting: Bool
    private var closeAfterFlush = false
    public var maxQueuedBytes = 64 << 20
    /// Bytes read per readiness event at most: the loop is level-triggered, so what is left
    /// is read on its next turn, after every other ready socket and every due timer had theirs.
    /// A peer that sends faster than it is handled cannot hold the loop (fairness).
    public var maxReadPerEvent = 64 << 10
    /// While true nothing is read from the socket (backpressure: a consumer that cannot keep up
    /// stops the peer through TCP's flow control instead of buffering without bound). A hang-up
    /// is still read, so that the connection ends.
    public var isReadingPaused = false {
        didSet { if isReadingPaused != oldValue { updateInterest() } }
    }
    public private(set) var isClosed = false
    /// TLS over this connection, when `useTLS` was called: every byte through the socket is
    /// ciphertext, and `send`/`onData` carry plaintext.
    public private(set) var tls: TLSStream?

    public var onConnect: (() -> Void)?
    public var onData: (([UInt8]) -> Void)?
    /// After the send queue drained (a chance to queue more, such as asset chunks).
    public var onWritable: (() -> Void)?
    /// Exactly once: nil for an orderly close, else what went wrong.
    public var onClose: ((String?) -> Void)?
    /// The `errno` of the socket call that ended the connection, when one did
    /// (`ECONNREFUSED` for a refused connect, `ECONNRESET` or `EPIPE` for a reset).
    public private(set) var failureCode: Int32?
    /// The other side reset the connection (`ECONNRESET`, `EPIPE`): what a peer that closes
    /// with unread bytes causes, so after a goodbye it is an ordinary end, not an error.
    public var wasResetByPeer: Bool { failureCode == ECONNRESET || failureCode == EPIPE }

    init(loop: EventLoop, fd: Int32, remote: String, connecting: Bool) throws {
        self.loop = loop
        self.fd = fd
        self.remote = remote
        self.connecting = connecting
        self.isDialed = connecting
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), 1 /* TCP_NODELAY */, &one, socklen_t(MemoryLayout<Int32>.size))
        try loop.register(fd, self, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (connecting ? EPOLLOUT.rawValue : 0))
    }

    /// Starts connecting to `address`; `onConnect` or `onClose` follows. Loop thread only.
    public static func connect(to address: SocketAddress, on loop: EventLoop) throws -> TCPConnection {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw NetError.system("socket", errno) }
        var address4 = address.sockaddr()
        let result = withUnsafePointer(to: &address4) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if result != 0 && errno != EINPROGRESS {
            let code = errno
            _ = Glibc.close(fd)
            throw NetError.connectFailed(address.description, String(cString: strerror(code)))
        }
        return try TCPConnection(loop: loop, fd: fd, remote: address.description, connecting: true)
    }

    /// Speaks TLS from now on (call before any byte is sent or received: at accept, or right
    /// after `connect`). A client's handshake starts once the TCP connection is up.
    public func useTLS(_ stream: TLSStream) {
        precondition(tls == nil && sendBuffer.isEmpty, "TLS must be set up before any byte is sent")
        tls = stream
    }

    /// An accepted connection speaks TLS as a server with `context`; on a failure to set it up
    /// the connection is closed at once and the error thrown (for the caller to log).
    public func acceptTLS(_ context: TLSContext) throws {
        do {
            useTLS(try context.stream(host: remote))
        } catch {
            close(immediately: true)
            throw error
        }
    }

    /// Bytes queued and not yet taken by the socket (plaintext waiting for a TLS handshake
    /// included).
    public var queuedBytes: Int { rawQueued + (tls?.waitingBytes ?? 0) }
    /// Bytes in the send buffer (ciphertext under TLS).
    private var rawQueued: Int { sendBuffer.count - sendOffset }
    private var receivedAny = false

    /// After this side closes in order (`close()`), the socket stays up to this long with its
    /// write side shut, reading and discarding what the peer still sends, until the peer closes
    /// too. Closing a socket that holds unread bytes resets the connection, and a reset throws
    /// away what the kernel had not yet delivered: the end of an image a client uploaded just
    /// before its goodbye (found under load: the server got the sticker but not its image), or
    /// the error a server ends a session with. `onClose` comes when the lingering starts (the
    /// connection is closed for its owner: a server frees its place at once) unless
    /// `reportsCloseAfterLingering`; the loop keeps the socket meanwhile.
    public static let lingerSeconds = 5.0
    /// `onClose` comes when the lingering ends, not when it starts: for an owner that stops the
    /// loop once told (a client transport's private loop), which would otherwise leave the
    /// socket unread and reset it after all.
    public var reportsCloseAfterLingering = false
    /// Bytes read and discarded while lingering, at most: a peer that keeps sending is reset.
    public static let maxLingerBytes = 4 << 20
    private var lingering = false
    private var lingerTimer: Int?
    private var lingerBytes = 0
    private var lingerCallback: ((String?) -> Void)?
    /// This side dialed (rather than accepted) the connection.
    private let isDialed: Bool

    /// Queues bytes. Returns false (and closes) when the queue limit is exceeded.
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        guard !isClosed, !bytes.isEmpty else { return !isClosed }
        if queuedBytes + bytes.count > maxQueuedBytes {
            fail("the peer is not reading: more than \(maxQueuedBytes) bytes queued")
            return false
        }
        if let tls {
            do { try tls.send(bytes) } catch { fail("\(error)"); return false }
            sendBuffer += tls.takeOutput()
        } else {
            sendBuffer += bytes
        }
        if !connecting { flush(notify: false) }
        return true
    }

    /// Closes after the queued bytes are written (or at once with `immediately`). A TLS session
    /// ends with a close_notify first.
    public func close(immediately: Bool = false) {
        if lingering {
            if immediately { endLinger() }
            return
        }
        guard !isClosed else { return }
        if let tls, !immediately, !connecting, tls.isHandshakeDone, !closeAfterFlush {
            tls.shutdown()
            sendBuffer += tls.takeOutput()
        }
        if immediately || connecting {
            finish(nil)
        } else if queuedBytes == 0 {
            finish(nil, linger: true)
        } else {
            closeAfterFlush = true
            // Written now, as far as the socket takes: the close_notify just queued may be all
            // there is, and with nothing queued before it no EPOLLOUT was asked for, so the
            // connection used to wait for its peer or a timeout (an HTTPS export's end).
            flush(notify: false)
        }
    }

    func handle(events: UInt32) {
        if lingering { return drainLinger() }
        if isClosed { return }
        if connecting && events & (EPOLLOUT.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 {
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 {
                failureCode = error
                fail("cannot connect to \(remote): \(String(cString: strerror(error)))")
                return
            }
            connecting = false
            if let tls {
                do { try tls.start() } catch { fail("\(error)"); return }
                sendBuffer.insert(contentsOf: tls.takeOutput(), at: sendOffset)
            }
            onConnect?()
            updateInterest()
            flush(notify: true)
            if isClosed { return }
        }
        let readable = events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue) != 0
        if readable && (!isReadingPaused || events & EPOLLHUP.rawValue != 0) {
            readAvailable()
            if isClosed { return }
        }
        if events & EPOLLOUT.rawValue != 0 {
            flush(notify: true)
        }
        if events & EPOLLERR.rawValue != 0 && !isClosed {
            fail("socket error")
        }
    }

    private func readAvailable() {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var budget = maxReadPerEvent
        while !isClosed && budget > 0 {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, min($0.count, budget), 0) }
            if count > 0 {
                budget -= count
                defer { receivedAny = true }
                if !receivedAny, tls == nil, count >= 3, (0x14...0x17).contains(buffer[0]), buffer[1] == 3, buffer[2] <= 4 {
                    // A TLS record header: a peer's first frame (HELLO) is far shorter than the
                    // 64 KiB and more these bytes would read as its length.
                    fail("the other side speaks TLS and this side does not (give --tls, or --tls-cert and --tls-key)")
                    return
                }
                guard let tls else {
                    onData?(Array(buffer[0..<count]))
                    continue
                }
                let wasDone = tls.isHandshakeDone
                let received: (plaintext: [UInt8], closed: Bool)
                do {
                    received = try tls.receive(Array(buffer[0..<count]))
                } catch {
                    sendBuffer += tls.takeOutput()  // the alert, best effort
                    flush(notify: false)
                    fail("\(error)")
                    return
                }
                sendBuffer += tls.takeOutput()
                if !received.plaintext.isEmpty { onData?(received.plaintext) }
                if isClosed { return }
                if received.closed { finish(nil); return }
                // Handshake replies, and plaintext that waited for the handshake; a writer
                // that stopped at its high-water mark hears the queue drained.
                flush(notify: !wasDone && tls.isHandshakeDone)
            } else if count == 0 {
                if let tls, !tls.isHandshakeDone {
                    fail("the other side closed the connection during the TLS handshake (does it speak TLS?)")
                } else if !receivedAny && !connecting && isDialed {
                    fail("the other side closed the connection without answering (if it expects TLS, give --tls)")
                } else {
                    finish(nil)
                }
                return
            } else {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return }
                failureCode = errno
                fail("recv: \(String(cString: strerror(errno)))")
                return
            }
        }
    }

    /// Writes what the socket takes. `notify`: report a drained queue through `onWritable`
    /// (only from readiness events, never from inside `send`, so writers cannot recurse).
    private func flush(notify: Bool) {
        while rawQueued > 0 && !isClosed {
            let written = sendBuffer.withUnsafeBytes { raw in
                Glibc.send(fd, raw.baseAddress! + sendOffset, raw.count - sendOffset, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                sendOffset += written
            } else if written < 0 && errno == EINTR {
                continue
            } else if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                break
            } else {
                failureCode = errno
                fail("send: \(String(cString: strerror(errno)))")
                return
            }
        }
        if sendOffset > 0 && (rawQueued == 0 || sendOffset > 1 << 20) {
            sendBuffer.removeFirst(sendOffset)
            sendOffset = 0
        }
        if rawQueued == 0 {
            if closeAfterFlush { finish(nil, linger: true); return }
            if notify { onWritable?() }
        }
        updateInterest()
    }

    private func updateInterest() {
        guard !isClosed else { return }
        var events = isReadingPaused && !connecting ? 0 : EPOLLIN.rawValue | EPOLLRDHUP.rawValue
        if connecting || rawQueued > 0 { events |= EPOLLOUT.rawValue }
        loop.modify(fd, events: events)
    }

    private func fail(_ message: String) {
        finish(message)
    }

    /// Ends the connection. `linger` (an orderly close by this side): the write side is shut
    /// and the socket read until the peer closes (`lingerSeconds`, `maxLingerBytes`) before it
    /// is closed.
    private func finish(_ error: String?, linger: Bool = false) {
        guard !isClosed else { return }
        isClosed = true
        let callback = onClose
        onClose = nil
        onData = nil
        onWritable = nil
        onConnect = nil
        if linger, error == nil, shutdown(fd, Int32(SHUT_WR)) == 0 {
            lingering = true
            loop.modify(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
            lingerTimer = loop.schedule(after: Self.lingerSeconds) { [weak self] in self?.endLinger() }
            if reportsCloseAfterLingering { lingerCallback = callback } else { callback?(nil) }
            return
        }
        loop.unregister(fd)
        _ = Glibc.close(fd)
        fd = -1
        callback?(error)
    }

    /// Reads and drops what the peer sends after this side closed, until it closes too.
    private func drainLinger() {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while lingering {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                lingerBytes += count
                if lingerBytes > Self.maxLingerBytes { return endLinger() }
            } else if count < 0, errno == EINTR {
                continue
            } else if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                return
            } else {
                return endLinger()  // the peer closed (or reset): done
            }
        }
    }

    private func endLinger() {
        guard lingering else { return }
        lingering = false
        if let lingerTimer { loop.cancelTimer(lingerTimer) }
        lingerTimer = nil
        loop.unregister(fd)
        _ = Glibc.close(fd)
        fd = -1
        let callback = lingerCallback
        lingerCallback = nil
        callback?(nil)
    }
}
