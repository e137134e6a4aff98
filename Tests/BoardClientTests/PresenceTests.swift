import BoardClient
import BoardCRDT
import BoardModel
import BoardSync
import Foundation
import Testing

/// Who else is on the board (`peers`) and what this replica is doing (`updatePresence`).
@Suite struct LiveBoardPresenceTests {
    @Test func aPeersPointerReachesTheOthersAndLeavesWithIt() async throws {
        let server = MemoryServer()
        let sync = LiveBoard.Sync(server: "memory", board: "here")
        let alice = try LiveBoard.open(storage: .memory, sync: sync, identity: LiveBoard.Identity(name: "Alice"),
                                       transport: MemoryTransport(server: server))
        let bob = try LiveBoard.open(storage: .memory, sync: sync, identity: LiveBoard.Identity(name: "Bob"),
                                     transport: MemoryTransport(server: server))
        let runs = [Running(alice), Running(bob)]
        try await live(alice, "alice")
        try await live(bob, "bob")
        #expect(bob.currentPeers.isEmpty)
        // A pointer moving fast: many updates, the latest wins.
        for x in 0..<50 { await alice.updatePresence(pointer: GridPoint(x: Int64(x * 10), y: 7)) }
        let seen = try await first("bob to see alice's latest pointer", of: bob.peers) {
            $0.first?.pointer == GridPoint(x: 490, y: 7)
        }
        #expect(seen.count == 1 && seen.first?.name == "Alice" && seen.first?.replica == alice.replicaID)
        #expect(alice.currentPeers.allSatisfy { $0.replica != alice.replicaID }, "nobody is shown their own presence")
        await alice.clearPresence()
        _ = try await first("alice to leave bob's roster", of: bob.peers) { $0.isEmpty }
        // Said again after a reconnect: bob sees her once she is back.
        await alice.updatePresence(pointer: GridPoint(x: 1, y: 1), selection: [])
        _ = try await first("alice back in bob's roster", of: bob.peers) { $0.first?.pointer == GridPoint(x: 1, y: 1) }
        _ = await alice.close()
        _ = try await first("alice's roster entry to go when her connection closes", of: bob.peers) { $0.isEmpty }
        _ = await bob.close()
        for run in runs { _ = try await run.ended() }
    }
}
