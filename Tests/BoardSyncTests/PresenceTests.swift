import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Foundation
import Testing

/// Presence: the PRESENCE message's bytes and limits, the capability gate, the rate limit, and
/// the hub's relay (latest wins by clock, expiry, "gone" when a session closes, who may speak
/// for which replica), over the same endpoints `SyncHost` drives.
@Suite struct PresenceTests {
    static let red = Color8(red: 255, green: 0, blue: 0, alpha: 255)

    static func sample(_ replica: ReplicaID = ReplicaID(0xA), clock: UInt64 = 1) -> Presence {
        Presence(replica: replica, name: "Ana Łukasiewicz ✏️", color: red, pointer: GridPoint(x: -160, y: 3200),
                 selection: [ItemID(high: 0xA, low: 1), ItemID(high: 0xB, low: 7)],
                 stroke: InkPreview(item: ItemID(high: 0xA, low: 9), color: red, width: 32,
                                    points: [GridPoint(x: 10, y: 10), GridPoint(x: 14, y: 9), GridPoint(x: -3, y: 40)]),
                 ttl: 2.5, clock: clock)
    }

    static func decode(_ bytes: [UInt8]) throws -> Message {
        var decoder = FrameDecoder(maxFrame: 1 << 20)
        decoder.append(bytes)
        return try Message(frame: try #require(try decoder.next()), limits: SessionLimits())
    }

    @Test func aPresenceSurvivesItsBytes() throws {
        for presence in [Self.sample(), Presence.gone(ReplicaID(0xC), clock: 99),
                         Presence(replica: ReplicaID(1), name: "", color: .black, ttl: 60, clock: UInt64.max)] {
            #expect(try Self.decode(Message.presence(presence).frame().encoded()) == .presence(presence))
        }
        // A name longer than the limit is cut on a character boundary, never inside one.
        let long = Presence(replica: ReplicaID(1), name: String(repeating: "é", count: 40), color: .black, clock: 1)
        guard case .presence(let decoded) = try Self.decode(Message.presence(long).frame().encoded()) else {
            Issue.record("not a presence")
            return
        }
        #expect(decoded.name == String(repeating: "é", count: 32))
    }

    @Test func malformedPresenceIsRefusedByName() throws {
        let good = Message.presence(Self.sample()).frame().payload
        func refusal(_ payload: [UInt8]) -> String? {
            do {
                _ = try Message(frame: Frame(type: Message.Kind.presence.rawValue, payload: payload), limits: SessionLimits())
                return nil
            } catch {
                return error.message
            }
        }
        // Byte 8 is the clock (1), 9 the name's length; flags follow the name and colour.
        let flagsAt = 8 + 1 + 1 + Array(Self.sample().name.utf8).count + 4
        var badFlags = good
        badFlags[flagsAt] = 0x08
        #expect(refusal(badFlags)?.contains("flags") == true)
        var itemWithoutStroke = good
        itemWithoutStroke[flagsAt] = 0x04
        #expect(refusal(itemWithoutStroke)?.contains("flags") == true)
        var badName = good
        badName[10] = 0xFF
        #expect(refusal(badName)?.contains("UTF-8") == true)
        #expect(refusal(Array(good.dropLast())) != nil, "a truncated presence")
        #expect(refusal(good + [0]) != nil, "trailing bytes")
        // A pointer far off the board, a time-to-live over the limit, too many points.
        var w = ByteWriter()
        w.write(fixed64: 1); w.write(varint: 1); w.write(lengthPrefixed: []); w.write(bytes: [0, 0, 0, 255])
        var far = w
        far.write(byte: 1); far.write(zigzag: FixedPoint.limit + 1); far.write(zigzag: 0)
        far.write(varint: 0); far.write(varint: 1000)
        #expect(refusal(far.bytes)?.contains("beyond") == true)
        var long = w
        long.write(byte: 0); long.write(varint: 0); long.write(varint: 61_000)
        #expect(refusal(long.bytes)?.contains("time-to-live") == true)
        var crowded = w
        crowded.write(byte: 2); crowded.write(varint: 0); crowded.write(bytes: [0, 0, 0, 255]); crowded.write(varint: 16)
        crowded.write(varint: UInt64(Presence.maxStrokePoints + 1))
        crowded.write(bytes: [UInt8](repeating: 0, count: 2 * (Presence.maxStrokePoints + 1)))
        crowded.write(varint: 1000)
        #expect(refusal(crowded.bytes)?.contains("stroke points") == true)
    }

    /// A dialer and an acceptor session with the handshake done; `capabilities` is what the
    /// acceptor's peer (the dialer) announced.
    static func openPair(dialerCapabilities: UInt64 = Capabilities.supported) -> (SyncSession, SyncSession) {
        var dialer = SyncSession(role: .dialer, localReplica: ReplicaID(0xD))
        var acceptor = SyncSession(role: .acceptor, localReplica: ReplicaID(0xE))
        acceptor.listen(now: 0)
        let hello = Hello(board: "b", replica: ReplicaID(0xD), capabilities: dialerCapabilities, version: .empty)
        _ = acceptor.receive(Message.hello(hello).frame().encoded(), now: 0)
        acceptor.accept(version: .empty)
        dialer.start(board: "b", version: .empty, now: 0)
        _ = dialer.takeOutput()
        _ = dialer.receive(acceptor.takeOutput(), now: 0)
        return (dialer, acceptor)
    }

    @Test func presenceGoesOnlyToPeersThatAnnouncedItAndLatestWins() throws {
        var (dialer, acceptor) = Self.openPair(dialerCapabilities: 0)
        #expect(!acceptor.peerSupportsPresence)
        acceptor.sendPresence(Self.sample())
        #expect(acceptor.takeOutput().isEmpty, "an old peer would refuse an unknown message")
        #expect(dialer.peerSupportsPresence, "this version announces presence")
        dialer.sendPresence(Self.sample(clock: 1))
        dialer.sendPresence(Self.sample(clock: 2))
        dialer.sendPresence(Self.sample(ReplicaID(0xB), clock: 5))
        var (_, listener) = Self.openPair()
        let events = listener.receive(dialer.takeOutput(), now: 1)
        #expect(events == [.presence(Self.sample(ReplicaID(0xA), clock: 2)), .presence(Self.sample(ReplicaID(0xB), clock: 5))])
    }

    @Test func aFloodOfPresenceIsCutToTheRate() throws {
        var (dialer, acceptor) = Self.openPair()
        var frames: [UInt8] = []
        for clock in 1...500 { frames += Message.presence(Self.sample(clock: UInt64(clock))).frame().encoded() }
        let burst = acceptor.receive(frames, now: 10)
        let limit = SessionLimits().presencePerSecond
        #expect(burst.count == Int(limit * 2), "a burst of twice the rate, the rest dropped")
        #expect(acceptor.presenceDropped == 500 - Int(limit * 2))
        #expect(acceptor.isOpen, "dropped, not closed")
        // One second later the bucket holds one second's worth again.
        let later = acceptor.receive(frames, now: 11)
        #expect(later.count == Int(limit))
        _ = dialer
    }

    /// Alice and bob on a server; carol joins later.
    @Test func aHubRelaysPresenceExpiresItAndSaysGoneWhenASessionCloses() throws {
        let (_, net, server, _, _, a, b) = try EndpointTests.aliceAndBobOnAServer()
        #expect(net.deliver())
        var alicePresence = Self.sample(ReplicaID(0xA))
        alicePresence.ttl = 10
        net.endpoints[a].setPresence(alicePresence, now: net.now)
        #expect(net.deliver())
        let seen = net.endpoints[b].presences()
        #expect(seen.count == 1)
        #expect(seen.first?.replica == ReplicaID(0xA))
        #expect(seen.first?.stroke?.points.count == 3, "ink in progress travels with the presence")
        #expect(net.endpoints[a].presences().isEmpty, "a host does not list itself")
        // A newer presence replaces the older one everywhere.
        alicePresence.pointer = GridPoint(x: 1, y: 2)
        net.endpoints[a].setPresence(alicePresence, now: net.now)
        #expect(net.deliver())
        #expect(net.endpoints[b].presences().first?.pointer == GridPoint(x: 1, y: 2))
        // Someone joining later hears who is there, with what is left of the time-to-live.
        net.advance(until: 4)
        let carol = net.add(SyncEndpoint(board: "team", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(0xC))), now: net.now))
        net.connect(carol, to: server)
        #expect(net.deliver())
        let heard = try #require(net.endpoints[carol].presences().first)
        #expect(heard.replica == ReplicaID(0xA))
        #expect(heard.ttl > 5 && heard.ttl <= 6, "about 6 of 10 seconds left, got \(heard.ttl)")
        // Not refreshed: gone everywhere after its time-to-live.
        net.advance(until: 10.5)
        #expect(net.endpoints[b].presences().isEmpty)
        #expect(net.endpoints[carol].presences().isEmpty)
        // Refreshed, then alice's link drops: the others hear "gone" at once.
        net.endpoints[a].setPresence(alicePresence, now: net.now)
        #expect(net.deliver())
        #expect(net.endpoints[b].presences().count == 1)
        net.cut(0)
        #expect(net.deliver())
        #expect(net.endpoints[b].presences().isEmpty)
        #expect(net.endpoints[carol].presences().isEmpty)
    }

    @Test func anOlderOrRepeatedPresenceIsNotRelayedAgain() throws {
        let (_, net, server, _, _, a, b) = try EndpointTests.aliceAndBobOnAServer()
        #expect(net.deliver())
        while net.endpoints[b].pollEvent() != nil {}  // what it heard before
        let hub = net.endpoints[server].boards["team"]!.hub
        hub.setLocalPresence(Self.sample(ReplicaID(0x77), clock: 5), now: net.now)
        hub.setLocalPresence(Self.sample(ReplicaID(0x77), clock: 5), now: net.now)  // a mesh cycle bringing it back
        hub.setLocalPresence(Self.sample(ReplicaID(0x77), clock: 4), now: net.now)  // stale
        hub.setLocalPresence(Presence.gone(ReplicaID(0x99), clock: 9), now: net.now)  // gone of someone unknown
        #expect(net.deliver())
        var heard: [Presence] = []
        while let event = net.endpoints[b].pollEvent() {
            if case .presence("team", let presence) = event { heard.append(presence) }
        }
        #expect(heard.map(\.clock) == [5])
        _ = a
    }

    @Test func nobodySpeaksForTheHostsOwnReplica() throws {
        let (_, net, server, _, _, a, b) = try EndpointTests.aliceAndBobOnAServer()
        #expect(net.deliver())
        let hub = net.endpoints[server].boards["team"]!.hub
        let serverReplica = hub.store.replica.id
        net.endpoints[a].setPresence(Self.sample(serverReplica), now: net.now)
        #expect(net.deliver())
        #expect(hub.presences[serverReplica] == nil)
        #expect(net.endpoints[b].presences().isEmpty)
    }

    /// With tokens, a writer or reader speaks only for the replica it said hello as; a peer
    /// token (a trusted relay) may relay anyone's presence.
    @Test func withAccessControlASessionSpeaksOnlyForItsOwnReplica() throws {
        let (_, net, server, log) = try AccessEndpointTests.server()
        let authority = AccessEndpointTests.authority
        func join(_ subject: String, _ role: AccessRole, id: UInt64) throws -> Int {
            let token = try authority.mint(board: "plans", role: role, expires: nil, subject: subject)
            let (peer, _) = try AccessEndpointTests.peer(net, board: "plans", token: token, id: id)
            net.connect(peer, to: server)
            return peer
        }
        let ann = try join("ann", .write, id: 0xA)
        let rob = try join("rob", .read, id: 0xB)
        let relay = try join("mesh", .peer, id: 0xC)
        #expect(net.deliver())
        net.endpoints[ann].setPresence(Self.sample(ReplicaID(0xA)), now: net.now)
        net.endpoints[rob].setPresence(Self.sample(ReplicaID(0xB)), now: net.now)  // readers are on the board too
        net.endpoints[ann].setPresence(Self.sample(ReplicaID(0xE)), now: net.now)  // ann posing as someone else
        net.endpoints[relay].setPresence(Self.sample(ReplicaID(0xF)), now: net.now)  // relayed from its mesh
        #expect(net.deliver())
        #expect(net.endpoints[rob].presences().map(\.replica) == [ReplicaID(0xA), ReplicaID(0xF)])
        #expect(net.endpoints[ann].presences().map(\.replica) == [ReplicaID(0xB), ReplicaID(0xF)])
        #expect(log.lines.contains { $0.contains("dropped a presence for replica 000000000000000e") })
    }
}
