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
    /// Bytes queued in the socket beyond which `send` waits for them to drain (a cancelled
    /// task's `send` stops waiting and throws `CancellationError`).
    public var highWater = 1 << 20
    /// Bytes received and not yet taken by `receive` beyond which the connection stops reading
    /// the socket until they are taken (backpressure through TCP's flow control: a server that
    /// streams faster than the board takes its bytes cannot make this process buffer more than
    /// about this plus one read of 64 KiB). Nothing is dropped.
    public var maxBufferedInbound = 1 << 20

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
        let connection = try LoopConnection(highWater: highWater, maxBufferedInbound: maxBufferedInbound)
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
    private let maxBufferedInbound: Int
    private var tcp: TCPConnection?
    private var inbound: [UInt8] = []
    private var ended = false
    private var failure: String?
    private var connectWaiter: CheckedContinuation<Void, Error>?
    private var receiver: (token: Int, continuation: CheckedContinuation<[UInt8]?, Error>)?
    private var writers: [(token: Int, continuation: CheckedContinuation<Void, Error>)] = []
    private var cancelledSends: Set<Int> = []
    private var connectCancelled = false
    private var closeWaiter: CheckedContinuation<Void, Never>?
    private var cancelledReceives: Set<Int> = []
    private let tokens = TokenCounter()

    init(highWater: Int, maxBufferedInbound: Int) throws {
        loop = try EventLoop()
        self.highWater = highWater
        self.maxBufferedInbound = max(1, maxBufferedInbound)
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

    /// Connects (the TCP handshake; a TLS handshake follows with the first bytes). Throws
    /// `CancellationError` when the task is cancelled meanwhile.
    func connect(to address: SocketAddress, tls: TLSContext?, timeout: Double) async throws {
        try await withTaskCancellationHandler {
            try await connect(address, tls, timeout)
        } onCancel: {
            loop.execute { [self] in
                connectCancelled = true
                guard let waiter = connectWaiter else { return }
                connectWaiter = nil
                tcp?.close(immediately: true)
                waiter.resume(throwing: CancellationError())
            }
        }
    }

    private func connect(_ address: SocketAddress, _ tls: TLSContext?, _ timeout: Double) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            loop.execute { [self] in
                if connectCancelled { return continuation.resume(throwing: CancellationError()) }
                connectWaiter = continuation
                do {
                    let tcp = try TCPConnection.connect(to: address, on: loop)
                    tcp.reportsCloseAfterLingering = true  // shutdown() waits for the server to close
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
                            // Backpressure: read no more until `receive` takes these.
                            if inbound.count >= maxBufferedInbound { self.tcp?.isReadingPaused = true }
                        }
                    }
                    tcp.onWritable = { [self] in
                        let waiting = writers
                        writers = []
                        for writer in waiting { writer.continuation.resume() }
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
        for writer in waiting { writer.continuation.resume(throwing: TransportError(message)) }
        closeWaiter?.resume()
        closeWaiter = nil
    }

    /// Queues `bytes`; waits while more than `highWater` bytes are queued. A cancelled task
    /// stops waiting (`CancellationError`; the bytes stay queued): a server that stops reading
    /// cannot hold the caller.
    func send(_ bytes: [UInt8]) async throws {
        guard !bytes.isEmpty else { return }
        let token = tokens.next()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                loop.execute { [self] in
                    let cancelled = cancelledSends.remove(token) != nil
                    guard let tcp, !ended, !tcp.isClosed else {
                        return continuation.resume(throwing: TransportError(failure ?? "the connection closed"))
                    }
                    tcp.send(bytes)
                    if tcp.isClosed { return continuation.resume(throwing: TransportError(failure ?? "the connection closed")) }
                    if tcp.queuedBytes > highWater {
                        if cancelled { return continuation.resume(throwing: CancellationError()) }
                        writers.append((token, continuation))
                    } else {
                        continuation.resume()
                    }
                }
            }
        } onCancel: {
            loop.execute { [self] in
                if let index = writers.firstIndex(where: { $0.token == token }) {
                    writers.remove(at: index).continuation.resume(throwing: CancellationError())
                } else {
                    cancelledSends.insert(token)
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
                        tcp?.isReadingPaused = false
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

    /// Closes (after what was sent is written and the server closed too, at most
    /// `TCPConnection.lingerSeconds`; at once when the task is cancelled) and stops the loop thread.
    func shutdown() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                loop.execute { [self] in
                    guard let tcp, !tcp.isClosed else { return continuation.resume() }
                    closeWaiter = continuation
                    tcp.close()
                    // The queue's writing and the lingering for the server's close together
                    // (TCPConnection.lingerSeconds) take this long at most.
                    loop.schedule(after: TCPConnection.lingerSeconds) { tcp.close(immediately: true) }
                }
            }
        } onCancel: {
            loop.execute { [self] in tcp?.close(immediately: true) }
        }
        loop.stop()
    }
}

/// Distinct numbers from any thread.
final class TokenCounter: Sendable {
    private let value = Mutex(0)
    func next() -> Int { value.withLock { $0 += 1; return $0 } }
}
