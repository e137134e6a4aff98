import BoardClient
@testable import BoardClientTesting
import Foundation
import Synchronization
import Testing

final class TempDirectory: Sendable {
    let path: String
    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("boardsync-faults-\(UUID().uuidString)").path
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

struct GaveUp: Error, CustomStringConvertible {
    var description: String
}

/// Polls `condition` until it holds; records a failure naming `what` after `seconds` (a bound
/// on waiting, never an assertion about speed).
func eventually(_ what: String, within seconds: Double = 30, _ condition: () async throws -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return }
        try await Task.sleep(nanoseconds: 10_000_000)
    }
    Issue.record("gave up after \(seconds) s waiting for \(what)")
    throw GaveUp(description: what)
}

/// Polls `condition` until it holds (true) or `seconds` pass (false), recording nothing.
func holds(within seconds: Double, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return true }
        try await Task.sleep(nanoseconds: 10_000_000)
    }
    return try await condition()
}

/// `run()` in a task, its outcome readable without waiting on the task itself.
final class Running: Sendable {
    enum Outcome: Sendable { case returned, threw(String) }
    let task: Task<Void, Never>
    private let box = Box()

    init(_ board: LiveBoard) {
        let box = self.box
        task = Task {
            do {
                try await board.run()
                box.set(.returned)
            } catch {
                box.set(.threw("\(error)"))
            }
        }
    }

    var outcome: Outcome? { box.get() }

    final class Box: Sendable {
        private let state = Mutex<Outcome?>(nil)
        func set(_ outcome: Outcome) { state.withLock { $0 = outcome } }
        func get() -> Outcome? { state.withLock { $0 } }
    }

    func ended(within seconds: Double = 30) async throws -> Outcome {
        try await eventually("run() to end", within: seconds) { outcome != nil }
        return outcome!
    }
}

/// A transport for the unit tests: each connection hands every chunk sent back to `receive`,
/// one chunk at a time (`echo`), or swallows it and never sends anything (`sink`). The chunks
/// wait in FaultTransport's own `DelayLine` (no delay: kept apart, in order, never coalesced).
final class TestTransport: BoardTransport, Sendable {
    enum Mode: Sendable { case echo, sink }
    let mode: Mode
    private let state = Mutex((connects: 0, open: 0))

    init(_ mode: Mode) { self.mode = mode }

    var connects: Int { state.withLock { $0.connects } }
    var openConnections: Int { state.withLock { $0.open } }

    func withConnection<T: Sendable>(to address: String, _ body: @Sendable (any BoardConnection) async throws -> T) async throws -> T {
        state.withLock { $0.connects += 1; $0.open += 1 }
        defer { state.withLock { $0.open -= 1 } }
        let line = DelayLine()
        defer { line.finish() }
        return try await body(TestConnection(mode: mode, line: line))
    }

    struct TestConnection: BoardConnection {
        let mode: Mode
        let line: DelayLine
        func send(_ bytes: [UInt8]) async throws {
            if mode == .echo { try await line.put(.bytes(bytes), delay: 0) }
        }
        func receive() async throws -> [UInt8]? {
            switch try await line.take() {
            case .bytes(let bytes): return bytes
            case .end: return nil
            case .failed(let reason): throw TransportError(reason)
            }
        }
    }
}

/// What `body` threw, or nil when it returned.
func thrown(_ body: () async throws -> Void) async -> (any Error)? {
    do {
        try await body()
        return nil
    } catch {
        return error
    }
}
