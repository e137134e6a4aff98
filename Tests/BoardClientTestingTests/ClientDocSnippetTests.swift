import BoardClient
import BoardClientTesting
import BoardModel
import Foundation
import Testing

// docs/CLIENT.md, "Testing your conflict handling": the function below holds that section's
// example line for line (after its imports), so it compiles with the tests, and the test runs it
// (against an in-process server) and checks the document still holds it.
@Sendable func clientDocFaultSnippet() async throws -> (BoardSnapshot, BoardSnapshot, [CloseReport], FaultTransport.Counters) {
// CLIENT.md snippet begins
let network = FaultTransport(wrapping: MemoryTransport(server: MemoryServer()), seed: 42,
                             faults: .init(latency: 0.005, jitter: 0.010, dropProbability: 0.02))
var sync = LiveBoard.Sync(server: "memory", board: "faults")
sync.firstDelay = 0.02                        // redial quickly: links drop often here
sync.maximumDelay = 0.25
let alice = try LiveBoard.open(storage: .memory, sync: sync, transport: network)
let bob = try LiveBoard.open(storage: .memory, sync: sync, transport: network)
let runs = [Task { try await alice.run() }, Task { try await bob.run() }]

let points = [CodablePoint(x: 10, y: 10), CodablePoint(x: 60, y: 30)]
let png = Data(PNGEncoder.solid(width: 8, height: 8, red: 200, green: 40, blue: 40))
try await alice.edit { try $0.beginStroke(color: .black, width: 2, points: points) }
while alice.currentStatus.state != .live || bob.currentStatus.state != .live {
    try await Task.sleep(nanoseconds: 10_000_000)
}
network.partition()                           // open links cut, connects refused
try await bob.edit { try $0.addSticker(imagePNG: png, at: CodablePoint(x: 40, y: 40)) }
try await alice.undo()                        // offline: goes when the network heals
network.heal()
network.faults.dropProbability = 0            // let them settle
while alice.snapshot != bob.snapshot
        || alice.currentStatus.unacknowledgedOperations + bob.currentStatus.unacknowledgedOperations > 0 {
    try await Task.sleep(nanoseconds: 10_000_000)   // a test bounds this wait (never times it)
}
print(network.counters)   // connectionsMade, connectionsKilled, drops, connectionsRefused, chunks
let reports = [await alice.close(), await bob.close()]   // .allAcknowledged
for run in runs { _ = await run.result }
// CLIENT.md snippet ends
    return (alice.snapshot, bob.snapshot, reports, network.counters)
}

@Suite struct ClientDocSnippetTests {
    @Test func theFaultExampleRunsAndIsTheOneInCLIENTmd() async throws {
        let outcome = try await withThrowingTaskGroup(of: (BoardSnapshot, BoardSnapshot, [CloseReport], FaultTransport.Counters)?.self) { group in
            group.addTask { try await clientDocFaultSnippet() }
            group.addTask {
                try await Task.sleep(nanoseconds: 120_000_000_000)
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            return first
        }
        let (alice, bob, reports, counters) = try #require(outcome, "the CLIENT.md example did not finish within 120 s")
        #expect(alice == bob)
        #expect(alice.strokes.isEmpty)  // undone
        #expect(alice.stickers.count == 1)
        #expect(reports.allSatisfy { $0.allAcknowledged }, "\(reports)")
        #expect(counters.connectionsKilled >= 1 && counters.connectionsMade >= 4)

        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let document = try String(contentsOf: root.appendingPathComponent("docs/CLIENT.md"), encoding: .utf8)
        let source = try String(contentsOf: here, encoding: .utf8)
        let lines = source.components(separatedBy: "\n")
        let start = try #require(lines.firstIndex(of: "// CLIENT.md snippet begins"))
        let end = try #require(lines.firstIndex(of: "// CLIENT.md snippet ends"))
        let imports = ["import BoardClient", "import BoardClientTesting", "import BoardModel", "import Foundation", ""]
        let compiled = (imports + lines[(start + 1)..<end]).joined(separator: "\n")
        let section = try #require(document.range(of: "## Testing your conflict handling"))
        let block = try #require(document.range(of: "```swift\n", range: section.upperBound..<document.endIndex))
        let close = try #require(document.range(of: "\n```", range: block.upperBound..<document.endIndex))
        #expect(String(document[block.upperBound..<close.lowerBound]) == compiled)
    }
}
