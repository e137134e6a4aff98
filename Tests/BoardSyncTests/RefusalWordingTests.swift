import BoardCRDT
import BoardSync
import Testing

/// How refusals read, sans-IO: an ERROR from the other side says whose it was without
/// claiming to know whether that side is a server or a peer.
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
}
