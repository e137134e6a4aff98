import BoardCRDT
import BoardNet
import BoardSync
import Foundation
import Synchronization

/// A sync server in this process with no sockets: the same sans-IO `SyncEndpoint` a real server
/// runs, its boards in memory (`MemoryReplicaStore`), reached through `MemoryTransport`. For
/// tests and previews; boards are lost with it. No access control.
public actor MemoryServer {
    private let endpoint: SyncEndpoint
    private var nextID: SessionID = 0
    private var mailboxes: [SessionID: Mailbox] = [:]

    private let clock: any BoardClock

    /// A server whose session timers read `clock` (a test's `TestClock` for boards on virtual
    /// time: keep-alives and idle timeouts then follow it too).
    public init(clock: any BoardClock = SystemBoardClock()) {
        let stores = StoreShelf()
        self.clock = clock
        endpoint = SyncEndpoint(opener: { name in stores.store(for: name) }, now: clock.now())
    }

    func connect(_ mailbox: Mailbox) -> SessionID {
        nextID += 1
        mailboxes[nextID] = mailbox
        endpoint.accept(nextID, now: clock.now())
        flush()
        return nextID
    }

    func receive(_ bytes: [UInt8], from id: SessionID) {
        guard mailboxes[id] != nil else { return }
        let now = clock.now()
        endpoint.receive(id, bytes, now: now)
        endpoint.handleTimers(now: now)
        flush()
    }

    func disconnect(_ id: SessionID) {
        guard let mailbox = mailboxes.removeValue(forKey: id) else { return }
        mailbox.close()
        endpoint.closed(id, now: clock.now())
        flush()
    }

    /// Every session's output to its mailbox; finished sessions closed.
    private func flush() {
        let now = clock.now()
        for (id, mailbox) in mailboxes.sorted(by: { $0.key < $1.key }) {
            let bytes = endpoint.output(for: id, now: now)
            if !bytes.isEmpty { mailbox.put(bytes) }
            if endpoint.isFinished(id) { disconnect(id) }
        }
    }
}

/// Boards by name, kept for the server's lifetime (the endpoint closes idle boards; reopening
/// one finds its store here).
private final class StoreShelf {
    var stores: [String: MemoryReplicaStore] = [:]
    func store(for name: String) -> MemoryReplicaStore {
        if let store = stores[name] { return store }
        let store = MemoryReplicaStore(replica: Replica(id: LiveBoard.randomReplicaID()))
        stores[name] = store
        return store
    }
}

/// Connections to a `MemoryServer` (the address is ignored: there is one server).
public struct MemoryTransport: BoardTransport {
    public let server: MemoryServer

    public init(server: MemoryServer) {
        self.server = server
    }

    public func withConnection<T: Sendable>(to address: String, _ body: @Sendable (any BoardConnection) async throws -> T) async throws -> T {
        let mailbox = Mailbox()
        let id = await server.connect(mailbox)
        let connection = MemoryConnection(server: server, id: id, inbox: mailbox)
        do {
            let result = try await body(connection)
            await server.disconnect(id)
            return result
        } catch {
            await server.disconnect(id)
            throw error
        }
    }
}

struct MemoryConnection: BoardConnection {
    let server: MemoryServer
    let id: SessionID
    let inbox: Mailbox

    func send(_ bytes: [UInt8]) async throws {
        guard !inbox.isClosed else { throw TransportError("the in-process server closed the connection") }
        await server.receive(bytes, from: id)
    }

    func receive() async throws -> [UInt8]? { try await inbox.take() }
}

/// Bytes for one reader: `take` waits for them, nil once closed and drained.
final class Mailbox: Sendable {
    private struct State {
        var bytes: [UInt8] = []
        var closed = false
        var waiter: CheckedContinuation<[UInt8]?, Error>?
    }
    private let state = Mutex(State())

    var isClosed: Bool { state.withLock { $0.closed } }

    func put(_ bytes: [UInt8]) {
        let waiter: CheckedContinuation<[UInt8]?, Error>? = state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.bytes += bytes
            return nil
        }
        waiter?.resume(returning: bytes)
    }

    func close() {
        let waiter = state.withLock { state -> CheckedContinuation<[UInt8]?, Error>? in
            state.closed = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    func take() async throws -> [UInt8]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8]?, Error>) in
                let ready: Result<[UInt8]?, Error>? = state.withLock { state in
                    if !state.bytes.isEmpty {
                        defer { state.bytes = [] }
                        return .success(state.bytes)
                    }
                    if state.closed { return .success(nil) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<[UInt8]?, Error>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
