import BoardClient
import BoardClientTesting
import BoardModel
import Foundation
import Testing

/// What `FaultConvergenceTests` ran into, on its own: the uploader of an image loses its link
/// after its sticker reached the server and before the image did. The server, asked for the image
/// by another board, has nobody to fetch it from and answers NO_ASSET; when the uploader comes
/// back the server gets the image. The other board, live all along, used to be left with a pending
/// sticker until its next connection (it asked again only when the server sent operations naming
/// the image, or on a new link); now a side told NO_ASSET asks that peer again after
/// `BoardHub.assetRetryFirst` (2 s, doubling per image to 60 s) while the image is missing
/// (docs/PROTOCOL.md, "Assets").
@Suite struct ImageAfterNoAssetTests {
    @Test func aLiveBoardToldNoAssetGetsTheImageOnTheSameLinkOnceTheServerHasIt() async throws {
        let server = MemoryServer()
        let memory = MemoryTransport(server: server)
        // The uploader's link is slow (0.5 s each way), so its image is still on its way when the
        // other board sees the sticker.
        let aliceNet = FaultTransport(wrapping: memory, seed: 1, faults: .init(latency: 0.5))
        let bobNet = FaultTransport(wrapping: memory, seed: 2)
        var sync = LiveBoard.Sync(server: "memory", board: "no-asset")
        sync.firstDelay = 0.02
        sync.maximumDelay = 0.1
        let alice = try LiveBoard.open(storage: .memory, sync: sync, transport: aliceNet)
        let bob = try LiveBoard.open(storage: .memory, sync: sync, transport: bobNet)
        let runs = [Running(alice), Running(bob)]
        try await eventually("both boards to be live", within: 300) {
            alice.currentStatus.state == .live && bob.currentStatus.state == .live
        }

        let png = Data(PNGEncoder.solid(width: 9, height: 9, red: 30, green: 160, blue: 30))
        try await alice.edit { try $0.addSticker(imagePNG: png, at: CodablePoint(x: 50, y: 50)) }
        try await eventually("bob to see alice's sticker", within: 300) { bob.snapshot.stickers.count == 1 }
        let sawItPending = bob.snapshot.stickers[0].isPending
        aliceNet.partition()  // the uploader's link dies before its image went
        try await eventually("alice to be offline", within: 120) { alice.currentStatus.state != .live }
        try await Task.sleep(nanoseconds: 200_000_000)  // (ordering only: bob hears NO_ASSET meanwhile)
        aliceNet.heal()

        // The server gets the image from alice's next link: a fresh replica receives it. (One
        // that asked before the server had it hits the same gap, so its link is cut every second
        // until one of its links finds the image.)
        let observerNet = FaultTransport(wrapping: memory, seed: 3)
        let observer = try LiveBoard.open(storage: .memory, sync: sync, transport: observerNet)
        let observing = Running(observer)
        var serverHasIt = false
        for _ in 0..<300 where !serverHasIt {
            serverHasIt = try await holds(within: 1) { observer.snapshot.stickers.first.map { !$0.isPending } ?? false }
            if !serverHasIt { observerNet.killConnections() }
        }
        #expect(serverHasIt, "no fresh replica got the image from the server")
        #expect(alice.currentStatus.state == .live)
        // Bob, live all along, gets it too, on the same link (his retries: 2, 4, 8 s apart).
        let bobGotIt = try await holds(within: 30) { bob.snapshot.stickers.first.map { !$0.isPending } ?? false }
        if sawItPending {
            #expect(bobGotIt, "bob's sticker still pending 30 s after the server had its image")
            #expect(bobNet.counters.connectionsMade == 1)  // bob's one link all along
        } else {
            Issue.record("bob had the image before alice's link was cut: this machine was too slow to show the gap")
        }

        // Bob's next link asks for what is missing.
        bobNet.killConnections()
        try await eventually("bob to get the image on a new link", within: 300) {
            bob.snapshot.stickers.first.map { !$0.isPending } ?? false
        }
        #expect(bob.snapshot == alice.snapshot)

        for board in [alice, bob, observer] { _ = await board.close(within: 30) }
        for run in runs + [observing] { _ = try await run.ended(within: 120) }
    }
}
