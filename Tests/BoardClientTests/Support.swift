import BoardClient
import BoardCRDT
import BoardModel
import Foundation
import Synchronization
import Testing

final class TempDirectory: Sendable {
    let path: String
    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("boardsync-client-\(UUID().uuidString)").path
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

struct GaveUp: Error, CustomStringConvertible {
    var description: String
}

/// Polls `condition` until it holds; records a failure naming `what` after `seconds`.
func eventually(_ what: String, within seconds: Double = 20, _ condition: () async throws -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return }
        try await Task.sleep(nanoseconds: 10_000_000)
    }
    Issue.record("gave up after \(seconds) s waiting for \(what)")
    throw GaveUp(description: what)
}

/// The first element of `stream` that satisfies `predicate`, within a bound.
func first<S: AsyncSequence & Sendable>(_ what: String, of stream: S, within seconds: Double = 20,
                                        where predicate: @escaping @Sendable (S.Element) -> Bool) async throws -> S.Element
where S.Element: Sendable {
    try await withThrowingTaskGroup(of: S.Element?.self) { group in
        group.addTask {
            for try await element in stream where predicate(element) { return element }
            return nil
        }
        group.addTask {
            try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            return nil
        }
        let element = try await group.next()!
        group.cancelAll()
        guard let element else {
            Issue.record("gave up after \(seconds) s waiting for \(what)")
            throw GaveUp(description: what)
        }
        return element
    }
}

/// `run()` in a task, its outcome readable without waiting on the task itself.
final class Running: Sendable {
    enum Outcome: Sendable { case returned, threw(any Error) }
    let task: Task<Void, Never>
    private let box = OutcomeBox()

    init(_ board: LiveBoard) {
        let box = self.box
        task = Task {
            do {
                try await board.run()
                box.withLock { $0 = .returned }
            } catch {
                box.withLock { $0 = .threw(error) }
            }
        }
    }

    var outcome: Outcome? { box.withLock { $0 } }

    final class OutcomeBox: Sendable {
        private let state = Mutex<Outcome?>(nil)
        func withLock<T>(_ body: (inout Outcome?) -> T) -> T { state.withLock { body(&$0) } }
    }

    func ended(within seconds: Double = 20) async throws -> Outcome {
        try await eventually("run() to end", within: seconds) { outcome != nil }
        return outcome!
    }
}

func live(_ board: LiveBoard, _ name: String) async throws {
    try await eventually("\(name) to go live") { board.currentStatus.state == .live }
}

let redPNG = Data(PNGEncoder.solid(width: 6, height: 6, red: 250, green: 10, blue: 10))
let bluePNG = Data(PNGEncoder.solid(width: 7, height: 3, red: 10, green: 10, blue: 250))

func line(_ y: Double, count: Int = 8) -> [CodablePoint] {
    (0..<count).map { CodablePoint(x: 10 + Double($0) * 5, y: y) }
}
