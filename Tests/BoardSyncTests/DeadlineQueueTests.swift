import BoardCRDT
@testable import BoardSync
import Testing

/// The endpoint's timers (`DeadlineQueue`): the earliest deadline without visiting the others.
@Suite struct DeadlineQueueTests {
    @Test func theEarliestComesFirst() {
        var queue = DeadlineQueue<Int>()
        for (key, deadline) in [(1, 5.0), (2, 1.0), (3, 3.0), (4, 4.0), (5, 2.0)] { queue.schedule(key, at: deadline) }
        #expect(queue.earliest()?.key == 2)
        #expect(queue.earliest()?.deadline == 1)
        #expect(queue.popDue(now: 3.5) == [2, 5, 3])
        #expect(queue.count == 2)
        #expect(queue.popDue(now: 100) == [4, 1])
        #expect(queue.earliest() == nil)
        #expect(queue.isEmpty)
    }

    @Test func reArmingMovesAKeyEitherWay() {
        var queue = DeadlineQueue<Int>()
        queue.schedule(1, at: 10)
        queue.schedule(2, at: 20)
        queue.schedule(1, at: 30)  // later: the stale entry at 10 is skipped
        #expect(queue.earliest()?.key == 2)
        #expect(queue.deadline(of: 1) == 30)
        queue.schedule(1, at: 5)  // earlier again
        #expect(queue.earliest()?.key == 1)
        #expect(queue.popDue(now: 25) == [1, 2])
        #expect(queue.popDue(now: 1_000).isEmpty, "each key fires once per arming")
    }

    @Test func cancellingDisarms() {
        var queue = DeadlineQueue<Int>()
        queue.schedule(1, at: 1)
        queue.schedule(2, at: 2)
        queue.cancel(1)
        queue.schedule(2, at: nil)
        #expect(queue.earliest() == nil)
        #expect(queue.popDue(now: 10).isEmpty)
        queue.schedule(1, at: 3)
        #expect(queue.popDue(now: 10) == [1])
    }

    @Test func tiesGoByKeyWhateverTheOrderOfArming() {
        var first = DeadlineQueue<String>()
        var second = DeadlineQueue<String>()
        let names = ["b", "d", "a", "c", "e"]
        for name in names { first.schedule(name, at: 7) }
        for name in names.reversed() { second.schedule(name, at: 7) }
        #expect(first.popDue(now: 7) == ["a", "b", "c", "d", "e"])
        #expect(second.popDue(now: 7) == ["a", "b", "c", "d", "e"])
    }

    /// Many re-armings (stale entries compacted away) agree with a plain table scanned whole.
    @Test func agreesWithAScanThroughManyReArmings() {
        var queue = DeadlineQueue<Int>()
        var table: [Int: Double] = [:]
        var state: UInt64 = 0x9E37_79B9
        func next() -> UInt64 { state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407; return state >> 33 }
        var now = 0.0
        for _ in 0..<5_000 {
            let key = Int(next() % 50)
            switch next() % 4 {
            case 0: queue.cancel(key); table[key] = nil
            case 1:
                now += Double(next() % 10)
                let due = table.filter { $0.value <= now }.sorted { ($0.value, $0.key) < ($1.value, $1.key) }.map(\.key)
                #expect(queue.popDue(now: now) == due)
                for key in due { table[key] = nil }
            default:
                let deadline = now + Double(next() % 100)
                queue.schedule(key, at: deadline)
                table[key] = deadline
            }
            let earliest = table.min { ($0.value, $0.key) < ($1.value, $1.key) }
            #expect(queue.earliest()?.key == earliest?.key)
            #expect(queue.count == table.count)
        }
    }
}

/// A server's idle boards cost nothing until their deadline: each closes at its own, found
/// through the endpoint's timers, and a board someone connected to stays.
@Suite struct EndpointIdleDeadlineTests {
    @Test func idleBoardsCloseEachAtItsOwnDeadline() throws {
        var options = SyncEndpoint.Options()
        options.idleBoardTimeout = 60
        let (_, net, server) = try EndpointTests.serverOnSimulatedDisk(options: options)
        let endpoint = net.endpoints[server]
        for index in 0..<20 {
            endpoint.handleTimers(now: Double(index))
            #expect(endpoint.preload(board: "idle-\(index)"))
        }
        let peer = net.add(SyncEndpoint(board: "busy", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(0xB))), now: 0))
        _ = net.connect(peer, to: server)
        net.deliver()
        #expect(try #require(endpoint.nextDeadline) <= 5, "the busy board's keep-alives come first")
        for index in 0..<20 {
            endpoint.handleTimers(now: 60 + Double(index))
            #expect(endpoint.boards["idle-\(index)"] == nil, "idle-\(index) closed at its deadline")
            if index + 1 < 20 { #expect(endpoint.boards["idle-\(index + 1)"] != nil, "idle-\(index + 1) not yet") }
        }
        #expect(endpoint.boards["busy"] != nil)
    }

    @Test func theHostIsToldWhichSessionsGainedOutput() throws {
        let (_, net, server, _, _, a, _) = try EndpointTests.aliceAndBobOnAServer()
        net.deliver()
        let endpoint = net.endpoints[server]
        _ = endpoint.takeSessionsWithOutput()
        #expect(endpoint.takeSessionsWithOutput().isEmpty, "taken once")
        _ = try net.endpoints[a].edit(now: net.now) { try $0.setBackground(asset: nil) }
        // Alice's edit reaches the server: Bob's session gains the relay, Alice's the ACK.
        let sender = net.links.first { $0.dialer == a }!
        let bytes = net.endpoints[a].output(for: sender.sessions.0, now: net.now)
        endpoint.receive(sender.sessions.1, bytes, now: net.now)
        let noted = endpoint.takeSessionsWithOutput()
        #expect(!noted.isEmpty)
        #expect(noted == noted.sorted())
        for id in endpoint.connections where !noted.contains(id) {
            #expect(endpoint.pendingOutput(for: id) == 0, "session \(id) has output but was not listed")
        }
    }
}
