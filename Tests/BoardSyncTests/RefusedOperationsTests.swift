import BoardCRDT
import BoardModel
import BoardSync
import Testing

/// REFUSED (docs/PROTOCOL.md, "Refused operations"): a server with access control that drops a
/// writer's operations of replicas its subject does not own says so, and keeps the session open;
/// a peer of an older build (no capability bit 8) is not told.
@Suite struct RefusedOperationsTests {
    @Test func aWriterCarryingAnotherReplicasOperationsIsToldWhichWereDropped() throws {
        let (_, net, server, _) = try AuthorshipTests.annOnline()
        let (carolPeer, _) = try AccessEndpointTests.peer(net, board: "plans", token: nil, id: 0xC, edits: { replica in
            _ = try replica.setCanvasSize(CodableSize(width: 9, height: 9))
            _ = try replica.setCanvasSize(CodableSize(width: 8, height: 8))
        })
        let carolOps = try #require(net.endpoints[carolPeer].boards["plans"]?.store.replica.fullState().operations)
        let (bob, _) = try AccessEndpointTests.peer(net, board: "plans", token: try AuthorshipTests.token("bob"), id: 0xB, edits: { replica in
            try replica.apply(carolOps)
            _ = try replica.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 2, points: [CodablePoint(x: 1, y: 1), CodablePoint(x: 2, y: 2)])
        })
        let link = net.connect(bob, to: server)
        net.deliver()
        #expect(net.links[link].up, "dropping is not closing: bob's own operations go through")
        let held = try #require(net.endpoints[server].boards["plans"]?.store.replica)
        #expect(held.versionVector[ReplicaID(0xC)] == 0 && held.versionVector[ReplicaID(0xB)] > 0)
        let hub = try #require(net.endpoints[bob].boards["plans"]?.hub)
        let id = try #require(hub.sessionIDs.first)
        let refusal = try #require(hub.refusal(from: id))
        #expect(refusal.operations == VersionVector([ReplicaID(0xC): 2]))
        #expect(refusal.error.code == .notAuthor && refusal.error.remote)
        // Carol's full state is one operation (her second canvas size replaced the first), seq 2.
        #expect(refusal.error.message.contains("dropped 1 operation of replica 000000000000000c (no subject owns it)"), "\(refusal.error.message)")
        #expect(refusal.error.message.contains("peer token"))
        #expect(try #require(hub.acknowledged(by: id))[ReplicaID(0xB)] > 0, "its own are acknowledged")
    }

    @Test func onlyPeersThatAnnouncedItAreToldAndTheMessageRoundTrips() throws {
        let error = SessionError(.notAuthor, "dropped 1 operation of replica 000000000000000c")
        var (_, acceptor) = PresenceTests.openPair(dialerCapabilities: Capabilities.supported & ~Capabilities.refusalNotices)
        let toldOld = acceptor.sendRefused(error, operations: VersionVector([ReplicaID(0xC): 1]))
        #expect(!toldOld)
        #expect(acceptor.takeOutput().isEmpty, "an old peer would close on an unknown message")
        var (dialer, listener) = PresenceTests.openPair()
        let told = listener.sendRefused(error, operations: VersionVector([ReplicaID(0xC): 1]))
        #expect(told)
        let events = dialer.receive(listener.takeOutput(), now: 1)
        #expect(events == [.refused(SessionError(.notAuthor, error.message, remote: true), VersionVector([ReplicaID(0xC): 1]))])
        #expect(dialer.isOpen)
        let message = Message.refused(code: 19, message: "why", operations: VersionVector([ReplicaID(7): 3]))
        #expect(try Message(frame: message.frame(), limits: SessionLimits()) == message)
    }
}
