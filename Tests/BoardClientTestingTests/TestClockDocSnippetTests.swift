import BoardClient
import BoardClientTesting
import BoardModel
import Foundation
import Testing

// docs/CLIENT.md, "On a test clock": the function below holds that section's example line for
// line, so it compiles with the tests, and the test runs it and checks the document holds it.
@Sendable func clientDocClockSnippet() async throws -> (retries: [Double], live: Bool, now: Double) {
// CLIENT.md clock snippet begins
let clock = TestClock()
let network = FaultTransport(wrapping: MemoryTransport(server: MemoryServer(clock: clock)), seed: 7, clock: clock)
let sync = LiveBoard.Sync(server: "memory", board: "clocked")   // backoff 0.2 s doubling to 10 s
let board = try LiveBoard.open(storage: .memory, sync: sync, transport: network,
                               clock: clock, jitter: SeededJitter(seed: 7))
network.partition()                              // the server is down
let run = Task { try await board.run() }
var retries: [Double] = []                       // when the board said it would retry
for _ in 0..<10 {
    try await clock.sleepers(atLeast: 1)         // the board waits for its next attempt...
    if case .offline(let retryAt, _, _) = board.currentStatus.state {
        retries.append(retryAt.timeIntervalSince(clock.wallStart))
    }
    clock.advanceToNextDeadline()                // ... which is due now: no real waiting
}
network.heal()
try await clock.sleepers(atLeast: 1)
clock.advanceToNextDeadline()                    // the next attempt goes live
while !board.currentStatus.isLive { try await Task.sleep(nanoseconds: 1_000_000) }
run.cancel()
_ = await run.result
// CLIENT.md clock snippet ends
    return (retries, true, clock.now())
}

@Suite struct TestClockDocSnippetTests {
    @Test func theClockExampleRunsAndIsTheOneInCLIENTmd() async throws {
        let outcome = try await bounded("the CLIENT.md clock example", seconds: 60) { try await clientDocClockSnippet() }
        // Each retry is due the previous one's time plus the backoff (0.2 s doubling to 10 s)
        // spread by 0.5 + the seeded draw.
        let jitter = SeededJitter.values(seed: 7, count: 10)
        var expected: [Double] = []
        var time = 0.0, delay = 0.2
        for draw in jitter {
            time += delay * (0.5 + draw)
            expected.append(time)
            delay = min(delay * 2, 10)
        }
        #expect(outcome.retries.count == 10)
        #expect(zip(outcome.retries, expected).allSatisfy { abs($0 - $1) < 1e-6 }, "\(outcome.retries) vs \(expected)")
        #expect(outcome.now > 40, "virtual time: \(outcome.now)")

        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let document = try String(contentsOf: root.appendingPathComponent("docs/CLIENT.md"), encoding: .utf8)
        let lines = try String(contentsOf: here, encoding: .utf8).components(separatedBy: "\n")
        let start = try #require(lines.firstIndex(of: "// CLIENT.md clock snippet begins"))
        let end = try #require(lines.firstIndex(of: "// CLIENT.md clock snippet ends"))
        let section = try #require(document.range(of: "### On a test clock"))
        let block = try #require(document.range(of: "```swift\n", range: section.upperBound..<document.endIndex))
        let close = try #require(document.range(of: "\n```", range: block.upperBound..<document.endIndex))
        #expect(String(document[block.upperBound..<close.lowerBound]) == lines[(start + 1)..<end].joined(separator: "\n"))
    }
}
