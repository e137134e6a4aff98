import BoardCRDT
import BoardModel
import BoardSimulation
import BoardStore
@testable import BoardSync
import Foundation
import Testing

/// `ClientEngine`, the live client's logic over an endpoint (LiveBoard drives one), on its own:
/// a client endpoint and a server endpoint on a `VirtualNet`, no clock, no randomness.
@Suite struct ClientEngineTests {
    /// A client (alice, 0xA) with its engine and a server, connected; `look` is the pump's turn.
    final class Client {
        let net: VirtualNet
        let server: Int
        let store = MemoryReplicaStore(replica: Replica(id: ReplicaID(0xA)))
        let index: Int
        var engine: ClientEngine
        var session: SessionID = 0
        var link = 0
        var shown: BoardSnapshot

        init() throws {
            (_, net, server) = try EndpointTests.serverOnSimulatedDisk()
            index = net.add(SyncEndpoint(board: "team", store: store, now: 0))
            shown = store.replica.snapshot()
            engine = ClientEngine(replica: store.replica, snapshot: shown)
        }

        var endpoint: SyncEndpoint { net.endpoints[index] }

        func connect() {
            link = net.connect(index, to: server)
            session = net.links[link].sessions.0
        }

        /// Delivers, then looks as the pump does: the session observed, the changes folded.
        @discardableResult
        func look(deliver: Bool = true) -> Bool? {
            if deliver { net.deliver() }
            let synced = endpoint.session(session).flatMap {
                engine.observe($0, hub: endpoint.boards["team"]?.hub, id: session, held: store.replica.versionVector)
            }
            shown = engine.changes(to: store.replica).applied(to: shown)
            return synced
        }

        var unacknowledged: Int { engine.unacknowledgedOperations(held: store.replica.versionVector[ReplicaID(0xA)]) }

        func draw(_ x: Double) throws {
            let edit = try endpoint.edit("team", now: net.now) { try $0.beginStroke(color: .black, width: 2, points: [CodablePoint(x: x, y: x)]) }
            engine.noteOwnOperations(edit.operations)
        }
    }

    @Test func acknowledgementsAndTypedChangesFollowTheSession() throws {
        let alice = try Client()
        try alice.draw(1)
        try alice.draw(2)
        #expect(alice.unacknowledged == 2, "made offline: nothing acknowledged")
        #expect(alice.look() == nil, "no session yet")
        alice.connect()
        #expect(alice.look() == true, "handshake and catch-up done")
        #expect(alice.unacknowledged == 0 && alice.engine.serverHolds == 2 && alice.engine.unacknowledgedImages == 0)

        // Not delivered yet: the edit waits, unacknowledged, until the server has it.
        try alice.draw(3)
        #expect(alice.look(deliver: false) == true && alice.unacknowledged == 1)
        alice.look()
        #expect(alice.unacknowledged == 0)

        // Another replica's edits arrive as typed changes; folded from the start they give the board.
        let bob = MemoryReplicaStore(replica: Replica(id: ReplicaID(0xB)))
        let b = alice.net.add(SyncEndpoint(board: "team", store: bob, now: 0))
        alice.net.connect(b, to: alice.server)
        alice.net.deliver()
        _ = try alice.net.endpoints[b].edit("team", now: 0) { try $0.beginStroke(color: .black, width: 3, points: [CodablePoint(x: 9, y: 9)]) }
        let before = alice.engine.vector
        alice.net.deliver()
        #expect(alice.engine.newReplicas(in: alice.store.replica) == [ReplicaID(0xB)])
        let version = alice.engine.version
        alice.look()
        #expect(alice.engine.version == version + 1 && alice.engine.vector != before)
        #expect(alice.shown == alice.store.replica.snapshot())
        #expect(alice.shown.strokes.count == 4)
        #expect(alice.engine.changes(to: alice.store.replica).isEmpty, "nothing new: no changes, no version")
        #expect(alice.engine.version == version + 1)
    }

    @Test func theReconnectPolicyDoublesResetsRefreshesOnceAndStops() {
        var policy = ClientEngine.Reconnect(firstDelay: 1, maximumDelay: 8, resetAfter: 10)
        var delays: [Double] = []
        for _ in 0..<6 {
            _ = policy.dialing()
            #expect(policy.ended(refusal: nil, wasLive: false, liveFor: 0) == .retry)
            delays.append(policy.delay(jitter: 0.5))  // 0.5 + 0.5: the backoff itself
        }
        #expect(delays == [1, 2, 4, 8, 8, 8] && policy.attempt == 6)
        #expect(policy.delay(jitter: 0) == 4 && policy.delay(jitter: 0.999) < 12)

        // Live briefly: no reset. Live for `resetAfter`: attempt 0, the first delay again.
        _ = policy.dialing()
        #expect(policy.ended(refusal: nil, wasLive: true, liveFor: 9.9) == .retry && policy.attempt == 7)
        _ = policy.dialing()
        #expect(policy.ended(refusal: nil, wasLive: true, liveFor: 10) == .retry && policy.attempt == 0)
        #expect(policy.delay(jitter: 0.5) == 1)

        // A busy server is retried; read-only and this side's own limits stop.
        let busy = SessionError(.busy, "busy", remote: true)
        #expect(policy.ended(refusal: busy, wasLive: false, liveFor: 0) == .retry)
        let readOnly = SessionError(.readOnly, "read only", remote: true)
        #expect(policy.ended(refusal: readOnly, wasLive: false, liveFor: 0) == .stop(readOnly))
        // More than this side's limits: terminal when a second link in a row ends on it (the
        // first may be a corrupted length field).
        let tooLarge = SessionError(.frameTooLarge, "a frame of 9 MiB")
        #expect(ClientEngine.refusal(tooLarge) == tooLarge && policy.ended(refusal: tooLarge, wasLive: true, liveFor: 0) == .retry)
        #expect(policy.ended(refusal: tooLarge, wasLive: false, liveFor: 0) == .stop(tooLarge))
        #expect(policy.ended(refusal: nil, wasLive: false, liveFor: 0) == .retry)
        let images = SessionError(.limitReached, "more than 2 images")
        #expect(policy.ended(refusal: tooLarge, wasLive: false, liveFor: 0) == .retry)
        #expect(policy.ended(refusal: images, wasLive: false, liveFor: 0) == .retry, "another limit: not the same again")
        #expect(policy.ended(refusal: images, wasLive: false, liveFor: 0) == .stop(images))
        #expect(ClientEngine.refusal(SessionError(.idleTimeout, "quiet")) == nil, "the link's trouble: retried")

        // An expired token: redial at once, once; expired again before going live: stop; after a
        // live session it is asked for again after the backoff.
        let expired = SessionError(.tokenExpired, "expired", remote: true)
        var tokens = ClientEngine.Reconnect(firstDelay: 1, maximumDelay: 8, resetAfter: 10)
        #expect(tokens.ended(refusal: expired, wasLive: false, liveFor: 0) == .redialNow)
        #expect(tokens.ended(refusal: expired, wasLive: false, liveFor: 0) == .stop(expired))
        var rotated = ClientEngine.Reconnect(firstDelay: 1, maximumDelay: 8, resetAfter: 10)
        #expect(rotated.ended(refusal: expired, wasLive: true, liveFor: 30) == .redialNow)
        #expect(rotated.ended(refusal: expired, wasLive: true, liveFor: 30) == .retry)
        #expect(rotated.ended(refusal: nil, wasLive: true, liveFor: 30) == .retry)
        #expect(rotated.ended(refusal: expired, wasLive: true, liveFor: 30) == .redialNow, "a live link that ended otherwise clears the mark")
    }

    @Test func presenceIsThrottledCoalescedRefreshedAndSaidAgainPerConnection() {
        var throttle = ClientEngine.PresenceThrottle()
        #expect(throttle.due(open: true, now: 0, interval: 1) == (nil, nil), "nothing said yet")
        func at(_ x: Int64) -> Presence { Presence(replica: ReplicaID(0xA), name: "a", color: .black, pointer: GridPoint(x: x, y: 0), ttl: 10) }
        throttle.update(at(1))
        #expect(throttle.due(open: false, now: 0, interval: 1) == (nil, nil), "not while the session is not open")
        let first = throttle.due(open: true, now: 0, interval: 1)
        #expect(first.send == at(1) && first.next == 5)
        throttle.update(at(2))
        throttle.update(at(3))
        #expect(throttle.due(open: true, now: 0.5, interval: 1) == (nil, 1), "within the interval: wait")
        let latest = throttle.due(open: true, now: 1, interval: 1)
        #expect(latest.send == at(3) && latest.next == 6, "the latest wins")
        #expect(throttle.due(open: true, now: 5.9, interval: 1) == (nil, 6))
        #expect(throttle.due(open: true, now: 6, interval: 1).send == at(3), "refreshed half way to its expiry")
        throttle.connectionOpened()
        #expect(throttle.due(open: true, now: 7, interval: 1).send == at(3), "said again on a new connection")
        let cleared = throttle.clear(ReplicaID(0xA))
        #expect(cleared)
        let gone = throttle.due(open: true, now: 8, interval: 1)
        #expect(gone.send?.ttl == 0 && gone.next == nil && throttle.local == nil)
        let again = throttle.clear(ReplicaID(0xA))
        #expect(!again, "nothing to clear")
    }
}
