import BoardSimulation
import Foundation
import Testing

/// Seeds of the cluster simulation (docs/SCALE-OUT.md, "Simulation"): two or three servers over
/// a simulated Redis, clients editing through any of them under crashes, Redis restarts and
/// cut links. Re-run one seed: BOARDSYNC_SEED=<seed> bin/test --filter ClusterSimulationTests
@Suite struct ClusterSimulationTests {
    static var seeds: [UInt64] {
        if let text = ProcessInfo.processInfo.environment["BOARDSYNC_SEED"], let seed = UInt64(text) { return [seed] }
        return Array(0..<40)
    }

    @Test(arguments: ClusterSimulationTests.seeds)
    func serversSharingRedisConvergeAndLoseNothingAcknowledged(seed: UInt64) {
        let report = ClusterSimulation(seed: seed).run()
        #expect(report.passed, "seed \(seed) (re-run: BOARDSYNC_SEED=\(seed) bin/test --filter ClusterSimulationTests): \(report.failures.joined(separator: "\n"))")
        #expect(report.operationsMade > 0, "seed \(seed) made no edits")
    }

    /// The oracles catch a planted bug: servers acknowledging before Redis holds the operations
    /// lose acknowledged edits when a server crashes with appends still waiting.
    @Test func aServerAcknowledgingBeforeRedisIsCaught() {
        let caught = (0..<UInt64(40)).filter { !ClusterSimulation(seed: $0, plantAckBeforeRedis: true).run().passed }
        #expect(!caught.isEmpty, "no seed of 40 caught acknowledging before Redis")
    }
}
