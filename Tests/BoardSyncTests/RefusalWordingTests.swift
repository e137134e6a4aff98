import BoardCRDT
import BoardSync
import Testing

/// How refusals read, sans-IO: an ERROR from the other side says whose it was without
/// claiming to know whether that side is a server or a peer, and a hub whose storage cannot
/// serve turns a HELLO away with `storage unavailable`.
@Suite struct RefusalWordingTests {
    @Test func anErrorFromTheOtherSideSaysSoForServersAndPeersAlike() {
        var dialer = SyncSession(role: .dialer, localReplica: ReplicaID(2))
        dialer.start(board: "b", version: .empty, now: 0)
        _ = dialer.takeOutput()
        let events = dialer.receive(Message.error(code: SessionError.Code.unauthorized.rawValue, message: "access denied").frame().encoded(), now: 0)
        #expect(events == [.closed(SessionError(.unauthorized, "access denied", remote: true))])
        #expect("\(dialer.closeReason!)" == "the other side reported unauthorized (code 7): access denied")
        #expect(!"\(dialer.closeReason!)".contains("peer"))
        #expect(dialer.closeReason!.summary == "unauthorized (code 7): access denied")
    }

    @Test func aHubWaitingForItsStorageTurnsHellosAwayAndTakesThemAgainOnceItCan() throws {
        let hub = BoardHub(board: "b", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(1))))
        hub.storageTrouble = "Redis at 10.0.0.5:6379 refused the connection"
        let hello = Message.hello(Hello(board: "b", replica: ReplicaID(9), version: .empty)).frame().encoded()
        hub.addAcceptor(1, SyncSession(role: .acceptor, localReplica: ReplicaID(1)), now: 0)
        hub.receive(1, hello, now: 0)
        let reason = try #require(hub.session(1)?.closeReason)
        #expect(reason.code == .storageUnavailable && reason.code.rawValue == 23)
        #expect(reason.message == "the server is waiting for its storage; retry later (the server's log says why)",
                "no token, no details: \(reason.message)")
        // The storage is back: the next HELLO is greeted.
        hub.storageTrouble = nil
        hub.addAcceptor(2, SyncSession(role: .acceptor, localReplica: ReplicaID(1)), now: 0)
        hub.receive(2, hello, now: 0)
        #expect(hub.session(2)?.isOpen == true)
        #expect(hub.storageRefusals == 1)
    }
}
