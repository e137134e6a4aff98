import BoardCRDT
import BoardModel
import BoardSimulation
import BoardStore
@testable import BoardSync
import Foundation
import Testing

/// A hub answers `nextDeadline` from a bound it keeps instead of visiting every session (hosts
/// ask after every event). The bound may be early (a timer then fires for nothing and makes it
/// exact) but never late: a late bound would skip keep-alives and let idle peers time out.
@Suite struct DeadlineTests {
    /// Seeded runs of a server and four peers: edits, presences with short lives, links cut and
    /// dialed again, the clock jumping by random amounts. After every step each hub's bound is
    /// at or before the earliest deadline found by visiting every session and presence; and
    /// quiet links stay up through a minute of keep-alives at the end.
    @Test(arguments: 0..<8 as Range<UInt64>)
    func aHubsDeadlineIsNeverLaterThanItsSessionsAndPresences(seed: UInt64) throws {
        let rerun = "seed \(seed) (DeadlineTests.aHubsDeadlineIsNeverLaterThanItsSessionsAndPresences)"
        var rng = SeededRandom(seed: seed)
        let (_, net, server) = try EndpointTests.serverOnSimulatedDisk()
        var peers: [Int] = []
        var linkOf: [Int: Int] = [:]
        for index in 0..<4 {
            let store = MemoryReplicaStore(replica: Replica(id: ReplicaID(0xA0 + UInt64(index))))
            let peer = net.add(SyncEndpoint(board: "team", store: store, now: 0))
            peers.append(peer)
            linkOf[peer] = net.connect(peer, to: server)
        }
        func check(_ step: Int) {
            for (number, endpoint) in net.endpoints.enumerated() {
                for (name, board) in endpoint.boards {
                    let hub = board.hub
                    guard let exact = hub.exactSessionDeadline else { continue }
                    #expect(hub.deadlineBound.map { $0 <= exact } == true,
                            "step \(step), endpoint \(number), board \(name): bound \(String(describing: hub.deadlineBound)) after the earliest deadline \(exact), \(rerun)")
                }
            }
        }
        for step in 0..<300 {
            let peer = peers[Int(rng.next() % UInt64(peers.count))]
            switch rng.next() % 6 {
            case 0, 1:
                _ = try? net.endpoints[peer].edit(now: net.now) { replica in
                    try replica.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 2,
                                            points: [CodablePoint(x: Double(step), y: 1)])
                }
            case 2:
                let replica = ReplicaID(0xA0 + UInt64(peers.firstIndex(of: peer)!))
                net.endpoints[peer].setPresence(Presence(replica: replica, name: "p", color: .black,
                                                         pointer: GridPoint(x: Int64(step), y: 0),
                                                         ttl: 0.5 + Double(rng.next() % 40) / 10, clock: UInt64(step + 1)),
                                                now: net.now)
            case 3 where rng.chance(0.3):
                if let link = linkOf[peer], net.links[link].up {
                    net.cut(link)
                } else {
                    linkOf[peer] = net.connect(peer, to: server)
                }
            default:
                net.advance(until: net.now + Double(rng.next() % 3000) / 1000)
            }
            net.deliver()
            check(step)
        }
        for (peer, link) in linkOf where !net.links[link].up { linkOf[peer] = net.connect(peer, to: server) }
        net.deliver()
        net.advance(until: net.now + 60)
        check(300)
        for (peer, link) in linkOf.sorted(by: { $0.key < $1.key }) {
            #expect(net.links[link].up, "peer \(peer)'s quiet link stayed up through a minute of keep-alives, \(rerun)")
        }
    }

    /// A session's timer run at its `nextDeadline` always moves that deadline (a ping, or the
    /// session closes): at times like 4.235 s, `9.235 - 4.235 >= 5` is false while `4.235 + 5`
    /// is 9.235, and a host on virtual time fired the timer at 9.235 s forever.
    @Test func aSessionsTimerAtItsDeadlineMovesIt() throws {
        var rng = SeededRandom(seed: 0xDEAD)
        for round in 0..<2_000 {
            let start = Double(rng.next() % 100_000) / 1000
            var session = SyncSession(role: .dialer, localReplica: ReplicaID(1), timing: SessionTiming(keepAlive: 5, idleTimeout: 20))
            session.start(board: "b", version: .empty, now: start)
            _ = session.takeOutput(now: start)
            let deadline = try #require(session.nextDeadline)
            let events = session.handleTimer(now: deadline)
            #expect(!events.isEmpty || session.nextDeadline.map { $0 > deadline } == true,
                    "round \(round): started at \(start), the timer at \(deadline) left the deadline at \(String(describing: session.nextDeadline))")
        }
    }

    /// A group commit falls due every loop turn with merges; the timers it fires do not visit
    /// sessions that are not due (their keep-alives stay where they were).
    @Test func aGroupCommitDoesNotFireSessionTimersEarly() throws {
        var options = SyncEndpoint.Options()
        options.groupCommit = true
        let (_, net, server, _, _, a, _) = try EndpointTests.aliceAndBobOnAServer(options: options)
        net.advance(until: 0.25)  // the handshakes' merges are committed
        let hub = net.endpoints[server].boards["team"]!.hub
        #expect(hub.syncPendingSince == nil)
        let boundBefore = hub.deadlineBound
        net.now = 0.5
        _ = try net.endpoints[a].edit(now: net.now) { try $0.setBackground(asset: nil) }
        net.deliver()
        #expect(hub.syncPendingSince == 0.5, "the merge waits for its group commit")
        #expect(net.endpoints[server].nextDeadline == 0.5)
        net.endpoints[server].handleTimers(now: net.now)
        #expect(hub.syncPendingSince == nil, "the group commit ran")
        #expect(hub.deadlineBound == boundBefore, "no session was due, so none was visited")
        #expect(try #require(hub.deadlineBound) <= hub.exactSessionDeadline!)
    }
}
