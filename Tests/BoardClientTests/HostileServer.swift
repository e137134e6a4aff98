import BoardClientTesting
import BoardCRDT
import BoardModel
import BoardSync
import Foundation
import Glibc
import Synchronization
import Testing

/// A loopback TCP server that misbehaves the way a hostile one would, for the client's worst
/// cases: real sockets (blocking, one thread per connection), the handshake spoken through
/// BoardSync's sans-IO `SyncSession` where a behaviour needs one.
final class HostileServer: Sendable {
    enum Behaviour: Sendable {
        /// Accepts and never reads or writes (the connection stays open).
        case silent
        /// Answers HELLO, asks for `wants` (image hashes), then never reads again.
        case handshakeThenStopReading(wants: [AssetHash])
        /// Answers HELLO and SYNCED (the client goes live), then closes at once.
        case handshakeThenDrop
        /// Answers HELLO, never sends SYNCED, reads (and drops) whatever comes.
        case handshakeNeverSynced
    }

    let address: String
    let behaviour: Behaviour
    private let listener: Int32
    private let state = Mutex(State())
    private struct State {
        var accepted = 0
        var descriptors: [Int32] = []
        var stopped = false
    }

    /// Connections accepted so far.
    var accepted: Int { state.withLock { $0.accepted } }

    init(_ behaviour: Behaviour) throws {
        self.behaviour = behaviour
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        // A small receive buffer (inherited by accepted sockets): a server that stops reading
        // fills the client's buffers after a few MiB, not tens.
        var small: Int32 = 4096
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, 16) == 0 else {
            close(fd)
            throw GaveUp(description: "cannot listen on loopback")
        }
        listener = fd
        self.address = "127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "HostileServer"
        thread.start()
    }

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return  // the listener was shut down
            }
            let keep = state.withLock { state -> Bool in
                if state.stopped { return false }
                state.accepted += 1
                state.descriptors.append(fd)
                return true
            }
            guard keep else { close(fd); return }
            let thread = Thread { [self] in serve(fd) }
            thread.start()
        }
    }

    private func serve(_ fd: Int32) {
        switch behaviour {
        case .silent:
            return  // held open until stop()
        case .handshakeThenStopReading(let wants):
            guard var session = handshake(fd) else { return }
            session.want(wants.map { AssetRequest(hash: $0) })
            write(fd, session.takeOutput())
        case .handshakeThenDrop:
            guard var session = handshake(fd) else { return }
            session.sendSynced(VersionVector())
            write(fd, session.takeOutput())
            shutdown(fd, Int32(SHUT_RDWR))
        case .handshakeNeverSynced:
            guard var session = handshake(fd) else { return }
            write(fd, session.takeOutput())
            var buffer = [UInt8](repeating: 0, count: 4096)
            while recv(fd, &buffer, buffer.count, 0) > 0 {}
        }
    }

    /// Reads the client's HELLO and answers it (a server holding nothing).
    private func handshake(_ fd: Int32) -> SyncSession? {
        var session = SyncSession(role: .acceptor, localReplica: ReplicaID(0xBAD))
        session.listen(now: 0)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { return nil }
            for event in session.receive(Array(buffer[0..<count]), now: 0) {
                if case .hello = event {
                    session.accept(version: VersionVector())
                    return session
                }
            }
        }
    }

    private func write(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return }
            offset += written
        }
    }

    /// Closes the listener and every connection.
    func stop() {
        let descriptors = state.withLock { state -> [Int32]? in
            if state.stopped { return nil }  // once: a descriptor closed twice may be another's by then
            state.stopped = true
            defer { state.descriptors = [] }
            return state.descriptors
        }
        guard let descriptors else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in descriptors {
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
        }
    }

    deinit { stop() }
}

/// Runs CPU-bound `body` on a thread of its own: on the cooperative pool (two threads on two
/// cores) it would starve the boards of the tests running beside it (docs/CLIENT.md).
func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

/// Random bytes under a PNG signature: an image as large as wanted that no compression shrinks.
func incompressibleImage(bytes: Int, seed: UInt64) -> Data {
    var generator = SplitMix64(seed: seed)
    var data = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
    data.reserveCapacity(bytes)
    while data.count < bytes {
        withUnsafeBytes(of: generator.next()) { data.append(contentsOf: $0) }
    }
    return data
}

/// Runs `body`, failing the test with `what` unless it finishes within `seconds` (a bound on a
/// hang, not a performance figure). A body that never ends is left running, so a regression
/// fails the test instead of hanging the suite.
@discardableResult
func finishes<T: Sendable>(_ what: String, within seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let first = FirstResult<T>()
    let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, any Error>?, Never>) in
        first.arm(continuation)
        Task {
            do { first.finish(.success(try await body())) } catch { first.finish(.failure(error)) }
        }
        Task {
            try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            first.finish(nil)
        }
    }
    guard let result else {
        Issue.record("\(what) did not finish within \(seconds) s")
        throw GaveUp(description: "\(what) did not finish within \(seconds) s")
    }
    return try result.get()
}

final class FirstResult<T: Sendable>: Sendable {
    private let waiter = Mutex<CheckedContinuation<Result<T, any Error>?, Never>?>(nil)
    func arm(_ continuation: CheckedContinuation<Result<T, any Error>?, Never>) { waiter.withLock { $0 = continuation } }
    func finish(_ result: Result<T, any Error>?) {
        let continuation = waiter.withLock { waiter in
            defer { waiter = nil }
            return waiter
        }
        continuation?.resume(returning: result)
    }
}
