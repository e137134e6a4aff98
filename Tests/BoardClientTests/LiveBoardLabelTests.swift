import BoardClient
import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation
import Testing

/// Named versions on live boards: a label made on one replica reaches another through a server
/// over real loopback TCP, as an ordinary operation, and so do its rename and its deletion.
@Suite struct LiveBoardLabelTests {
    @Test func aLabelMadeOnOneReplicaArrivesAtAnotherThroughAServerOverLoopbackTCP() async throws {
        let dir = TempDirectory()
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server")
        let sync = LiveBoard.Sync(server: server.address, board: "labelled")
        let alice = try LiveBoard.open(storage: .package(path: dir.path + "/alice.boardpkg"), sync: sync)
        let bob = try LiveBoard.open(storage: .memory, sync: sync)
        let runs = [Running(alice), Running(bob)]
        try await live(alice, "alice")
        try await live(bob, "bob")
        try await alice.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        let history = try await alice.history()
        let version = history.latest
        let board = alice.snapshot
        let id = try await alice.setLabel("Before review", at: version)
        #expect(alice.snapshot == board, "a label never changes what the board shows")
        try await eventually("bob to see alice's label") { await bob.labels().map(\.text) == ["Before review"] }
        let seen = await bob.labels()
        #expect(seen.first?.id == id && seen.first?.version == version && seen.first?.author == alice.replicaID)
        try await bob.renameLabel(id, to: "Reviewed")
        try await eventually("alice to see bob's rename") { await alice.labels().map(\.text) == ["Reviewed"] }
        #expect(await alice.labels().first?.author == bob.replicaID)
        // Refusals are edits' errors, and change nothing.
        await #expect(throws: EditError.invalidLabel("a label's text is empty")) { try await alice.setLabel("", at: version) }
        // The server's package holds it: a new replica that joins later gets it in its catch-up.
        let carol = try LiveBoard.open(storage: .memory, sync: sync)
        let carolRun = Running(carol)
        try await live(carol, "carol")
        try await eventually("carol to get the label in her catch-up") { await carol.labels().map(\.text) == ["Reviewed"] }
        try await carol.removeLabel(id)
        try await eventually("alice to see the deletion") { await alice.labels().isEmpty }
        try await eventually("bob to see the deletion") { await bob.labels().isEmpty }
        #expect(await alice.close().allAcknowledged)
        _ = await bob.close()
        _ = await carol.close()
        for run in runs + [carolRun] { _ = try await run.ended() }
        await server.stop()
        // Alice's history shows every write of the label.
        let package = try BoardPackage.open(at: dir.path + "/alice.boardpkg", fileSystem: PosixFileSystem(), newReplicaID: { ReplicaID(7) })
        defer { package.close() }
        #expect(try package.history().operationLog.filter { if case .setLabel = $0.operation.payload { true } else { false } }.count == 3)
    }

    /// A server from before labels (it does not announce `Capabilities.labels`): the client
    /// leaves its label out of what it sends, the label's sequence number leaves no gap (every
    /// operation after it is acknowledged), and another replica gets the strokes, not the label.
    @Test func aServerFromBeforeLabelsGetsEverythingElseAndAcknowledgesPastTheLabel() async throws {
        let dir = TempDirectory()
        var options = SyncHost.Options()
        options.capabilities = Capabilities.supported & ~Capabilities.labels
        let server = try LocalSyncServer(dataDirectory: dir.path + "/old", options: options)
        let sync = LiveBoard.Sync(server: server.address, board: "old")
        let alice = try LiveBoard.open(storage: .memory, sync: sync)
        let bob = try LiveBoard.open(storage: .memory, sync: sync)
        let runs = [Running(alice), Running(bob)]
        try await live(alice, "alice")
        try await live(bob, "bob")
        try await alice.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        try await alice.setLabel("Kept here", at: alice.replica.versionVector)
        try await alice.edit { try $0.beginStroke(color: .black, width: 2, points: line(30)) }
        try await eventually("bob to see both strokes") { bob.snapshot.strokes.count == 2 }
        try await eventually("alice's operations all acknowledged, the label's number included") {
            alice.currentStatus.isAllAcknowledged
        }
        let bobsLabels = await bob.labels()
        let alicesLabels = await alice.labels()
        #expect(bobsLabels.isEmpty && alicesLabels.map(\.text) == ["Kept here"])
        let bobHolds = await bob.replica.versionVector[alice.replicaID]
        let aliceMade = await alice.replica.versionVector[alice.replicaID]
        #expect(bobHolds == aliceMade, "no gap: bob's vector covers the label's number too")
        #expect(await alice.close().allAcknowledged)
        _ = await bob.close()
        for run in runs { _ = try await run.ended() }
        await server.stop()
    }
}
