import BoardNet
import Foundation
import Synchronization

/// TCP, plain or TLS, over BoardNet: each connection gets its own event loop on its own thread
/// (non-blocking sockets, the same `TCPConnection` and OpenSSL code the server uses), bridged to
/// async calls. Addresses are `"host:port"` with an IPv4 host or `localhost`.
public struct TCPTransport: BoardTransport {
    /// TLS for every connection (`TLSContext.client(ca:serverName:verifyPeer:)`); nil: plain TCP.
    public var tls: TLSContext?
    /// Seconds a connect (TCP, and the TLS handshake's start) may take before it fails.
    public var connectTimeout: Double = 10
    /// Bytes queued in the socket beyond which `send` waits for them to drain.
    public var highWater = 1 << 20

    public init(tls: TLSContext? = nil) {
        self.tls = tls
    }

    public func withConnection<T: Sendable>(to address: String, _ body: @Sendable (any BoardConnection) async throws -> T) async throws -> T {
        let socketAddress: SocketAddress
        do {
            socketAddress = try SocketAddress(parsing: address)
        } catch {
            throw TransportError("\(error)")
        }
        let connection = try LoopConnection(highWater: highWater)
        do {
            try await connection.connect(to: socketAddress, tls: tls, timeout: connectTimeout)
        } catch {
            await connection.shutdown()
            throw error
        }
        do {
            let result = try await body(connection)
            await connection.shutdown()
            return result
        } catch {
            await connection.shutdown()
            throw error
        }
    }
}

/// One TCP connection on a private event loop thread. `@unchecked Sendable`: every mutable
/// property is touched only on the loop thread (through `loop.execute`).
final class LoopConnection: BoardConnection, @unchecked Sendable {
    private let loop: EventLoop
    private let highWater: Int
    private var tcp: TCPConnection?
    private var inbound: [UInt8] = []
    private var ended = false
    private var failure: String?
    private var connectWaiter: CheckedContinuation<Void, Error>?
    private var receiver: (token: Int, continuation: CheckedContinuation<[UInt8]?, Error>)?
    private var writers: [CheckedContinuation<Void, Error>] = []
    private var closeWaiter: CheckedContinuation<Void, Never>?
    private var cancelledReceives: Set<Int> = []
    private let tokens = TokenCounter()

    init(highWater: Int) throws {
        loop = try EventLoop()
        self.highWater = highWater
        let loop = self.loop
        // After the last run the loop's timers go (a connect timeout or a close deadline holds
        // this connection, which holds the loop: each connection leaked three descriptors).
        let thread = Thread {
            loop.run()
            loop.discardTimers()
        }
        thread.name = "BoardClient TCP"
        thread.start()
    }

    func connect(to address: SocketAddress, tls: TLSContext?, timeout: Double) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            loop.execute { [self] in
                connectWaiter = continuation
                do {
                    let tcp = try TCPConnection.connect(to: address, on: loop)
                    if let tls { tcp.useTLS(try tls.stream(host: address.host)) }
                    self.tcp = tcp
                    tcp.onConnect = { [self] in
                        connectWaiter?.resume()
                        connectWaiter = nil
                    }
                    tcp.onData = { [self] bytes in
                        if let receiver {
                            self.receiver = nil
                            receiver.continuation.resume(returning: bytes)
                        } else {
                            inbound += bytes
                        }
                    }
                    tcp.onWritable = { [self] in
                        let waiting = writers
                        writers = []
                        for writer in waiting { writer.resume() }
                    }
                    tcp.onClose = { [self] error in transportClosed(error) }
                    loop.schedule(after: timeout) { [self] in
                        guard connectWaiter != nil else { return }
                        self.tcp?.close(immediately: true)
                        transportClosed("cannot connect to \(address): no answer within \(timeout) s")
                    }
                } catch {
                    transportClosed("\(error)")
                }
            }
        }
    }

    /// Loop thread: the connection ended; everyone waiting hears it.
    private func transportClosed(_ error: String?) {
        ended = true
        if failure == nil { failure = error }
        let message = error ?? "the connection closed"
        connectWaiter?.resume(throwing: TransportError(message))
        connectWaiter = nil
        if let receiver {
            self.receiver = nil
            if let error { receiver.continuation.resume(throwing: TransportError(error)) } else { receiver.continuation.resume(returning: nil) }
        }
        let waiting = writers
        writers = []
        for writer in waiting { writer.resume(throwing: TransportError(message)) }
        closeWaiter?.resume()
        closeWaiter = nil
    }

    func send(_ bytes: [UInt8]) async throws {
        guard !bytes.isEmpty else { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            loop.execute { [self] in
                guard let tcp, !ended, !tcp.isClosed else {
                    return continuation.resume(throwing: TransportError(failure ?? "the connection closed"))
                }
                tcp.send(bytes)
                if tcp.isClosed { return continuation.resume(throwing: TransportError(failure ?? "the connection closed")) }
                if tcp.queuedBytes > highWater {
                    writers.append(continuation)
                } else {
                    continuation.resume()
                }
            }
        }
    }

    func receive() async throws -> [UInt8]? {
        let token = tokens.next()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8]?, Error>) in
                loop.execute { [self] in
                    if cancelledReceives.remove(token) != nil { return continuation.resume(throwing: CancellationError()) }
                    if !inbound.isEmpty {
                        let bytes = inbound
                        inbound = []
                        return continuation.resume(returning: bytes)
                    }
                    if ended {
                        if let failure { return continuation.resume(throwing: TransportError(failure)) }
                        return continuation.resume(returning: nil)
                    }
                    receiver = (token, continuation)
                }
            }
        } onCancel: {
            loop.execute { [self] in
                if let receiver, receiver.token == token {
                    self.receiver = nil
                    receiver.continuation.resume(throwing: CancellationError())
                } else {
                    cancelledReceives.insert(token)
                }
            }
        }
    }

    /// Closes (after what was sent is written, at most 2 s) and stops the loop thread.
    func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.execute { [self] in
                guard let tcp, !tcp.isClosed else { return continuation.resume() }
                closeWaiter = continuation
                tcp.close()
                loop.schedule(after: 2) { tcp.close(immediately: true) }
            }
        }
        loop.stop()
    }
}

/// Distinct numbers from any thread.
final class TokenCounter: Sendable {
    private let value = Mutex(0)
    func next() -> Int { value.withLock { $0 += 1; return $0 } }
}
