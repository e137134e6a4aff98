import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Foundation
import Testing

/// What an endpoint has for its host is polled (`pollEvent`, `takeSessionsWithOutput`,
/// `noteTransportQueued`): nothing is pushed through callbacks, so a replication layer is only
/// ever called by the host, after the endpoint returned.
@Suite struct EndpointEventTests {
    static func drain(_ endpoint: SyncEndpoint) -> [SyncEndpoint.Event] {
        var events: [SyncEndpoint.Event] = []
        while let event = endpoint.pollEvent() { events.append(event) }
        return events
    }

    /// A board of a server whose boards share a log opens holding the HELLO that opened it:
    /// nobody is greeted with a board the log has not been read into yet, though the layer
    /// hears of the board only when the host drains `.boardOpened` after the read.
    @Test func aSharedBoardHoldsTheHelloThatOpenedItUntilItsLayerLetsGo() throws {
        let (_, net, server) = try EndpointTests.serverOnSimulatedDisk()
        net.endpoints[server].boardsShareALog = true
        let alice = MemoryReplicaStore(replica: Replica(id: ReplicaID(0xA)))
        let a = net.add(SyncEndpoint(board: "team", store: alice, now: 0))
        let link = net.connect(a, to: server)
        #expect(net.deliver())
        let serverSide = net.links[link].sessions.1
        let opened = Self.drain(net.endpoints[server]).compactMap { event -> SyncEndpoint.Board? in
            if case .boardOpened(let board) = event { return board }
            return nil
        }
        #expect(opened.map(\.name) == ["team"])
        let hub = try #require(opened.first?.hub)
        #expect(hub.sharedLog && hub.holdsGreetings)
        #expect(net.endpoints[server].session(serverSide)?.isOpen == false, "not greeted before the layer read the log")

        hub.holdsGreetings = false  // the layer caught up
        #expect(net.deliver())
        #expect(net.endpoints[server].session(serverSide)?.isOpen == true)

        // An edit merged on the server goes to the layer as an append with a ticket; the
        // writer is acknowledged only once the layer says the log holds it.
        _ = try net.endpoints[a].edit(now: net.now) { try $0.setCanvasSize(CodableSize(width: 800, height: 600)) }
        #expect(net.deliver())
        net.endpoints[server].handleTimers(now: net.now)  // the group commit
        let appends = Self.drain(net.endpoints[server]).compactMap { event -> (UInt64, Int)? in
            if case .sharedLog("team", .append(let batches, let ticket)) = event { return (ticket, batches.reduce(0) { $0 + $1.operations.count }) }
            return nil
        }
        #expect(appends.count == 1 && appends.first?.1 == 1, "one append holding the one operation: \(appends)")
        let dialerSide = net.links[link].sessions.0
        let aliceHub = try #require(net.endpoints[a].boards["team"]?.hub)
        #expect(net.deliver())
        #expect(aliceHub.acknowledged(by: dialerSide)?[ReplicaID(0xA)] ?? 0 == 0, "not acknowledged before the log holds it")
        hub.replicated(try #require(appends.first?.0))
        #expect(net.deliver())
        #expect(aliceHub.acknowledged(by: dialerSide)?[ReplicaID(0xA)] == 1)
    }

    /// With a shared authorship table, the HELLO that opens a board is a question to the
    /// shared log like every later one: its writer is not greeted on a table only this server
    /// holds (the first version of polled events checked it locally, and a forger of another
    /// subject's replica id was greeted; found by `RedisClusterTests`).
    @Test func theHelloThatOpensASharedBoardAsksTheSharedLogWhoOwnsItsReplica() throws {
        let (_, net, server, _) = try AccessEndpointTests.server()
        net.endpoints[server].boardsShareALog = true
        net.endpoints[server].boardsShareAuthorship = true
        let token = try AccessEndpointTests.authority.mint(board: "plans", role: .write, expires: nil, subject: "mallory")
        let (peer, _) = try AccessEndpointTests.peer(net, board: "plans", token: token, id: 0xA, edits: { _ = try $0.setCanvasSize(CodableSize(width: 5, height: 5)) })
        net.connect(peer, to: server)
        #expect(net.deliver())
        let events = Self.drain(net.endpoints[server])
        let board = try #require(events.compactMap { event -> SyncEndpoint.Board? in
            if case .boardOpened(let board) = event { return board }
            return nil
        }.first)
        #expect(board.hub.sharesAuthorship)
        let asked = events.compactMap { event -> AuthorshipRequest? in
            if case .sharedLog("plans", .decideAuthorship(let request)) = event { return request }
            return nil
        }
        #expect(asked.map(\.replica) == [ReplicaID(0xA)] && asked.first?.subject == "mallory", "\(events.map(Self.kind))")
        // The shared log says another subject owns it (its answer comes with the catch-up):
        // refused, never greeted.
        board.hub.authorshipAnswered(try #require(asked.first), .owner("alice"), now: net.now)
        board.hub.holdsGreetings = false
        #expect(net.deliver())
        #expect(net.endpoints[peer].boards["plans"]?.hub.hasOpenSession == false)
        #expect(net.endpoints[peer].lastCloseReason?.code == .notAuthor, "\(String(describing: net.endpoints[peer].lastCloseReason))")
    }

    /// What the host's transport still holds for a session counts in the board's memory budget:
    /// a newcomer owed a full delta is turned away (`busy`) while others' output piles up in
    /// sockets, and welcome once the host says it drained.
    @Test func outputHeldInTheTransportCountsAgainstTheBoardsBudget() throws {
        let (_, net, server, alice, _, a, _) = try EndpointTests.aliceAndBobOnAServer()
        for index in 0..<20 {
            _ = try alice.edit { try $0.beginStroke(color: .black, width: 2, points: [CodablePoint(x: Double(index), y: 0), CodablePoint(x: 50, y: 50)]) }
        }
        #expect(net.deliver())
        let hub = try #require(net.endpoints[server].boards["team"]?.hub)
        hub.maxQueuedOutput = 1_000
        let aliceOnServer = net.links[0].sessions.1
        net.endpoints[server].noteTransportQueued(aliceOnServer, 5_000)

        let carol = net.add(SyncEndpoint(board: "team", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(0xC))), now: 0))
        let refused = net.connect(carol, to: server)
        #expect(net.deliver())
        #expect(net.endpoints[carol].lastCloseReason?.code == .busy, "\(String(describing: net.endpoints[carol].lastCloseReason))")
        #expect(!net.links[refused].up)

        net.endpoints[server].noteTransportQueued(aliceOnServer, 0)
        let dave = net.add(SyncEndpoint(board: "team", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(0xD))), now: 0))
        net.connect(dave, to: server)
        #expect(net.deliver())
        #expect(net.endpoints[dave].boards["team"]?.store.replica.versionVector == alice.replica.versionVector)
        _ = a
    }

    /// Many changes between two looks are one `.boardChanged`; presences and opened boards
    /// come in the order they happened.
    @Test func changesBetweenTwoLooksAreOneEventAndTheRestKeepTheirOrder() throws {
        let (_, net, server, _, _, a, _) = try EndpointTests.aliceAndBobOnAServer()
        #expect(net.deliver())
        let first = Self.drain(net.endpoints[server]).map(Self.kind)
        #expect(first.first == "opened team", "\(first)")
        for index in 0..<5 {
            _ = try net.endpoints[a].edit(now: net.now) {
                try $0.beginStroke(color: .black, width: 1, points: [CodablePoint(x: Double(index), y: 0), CodablePoint(x: 9, y: 9)])
            }
            #expect(net.deliver())
        }
        let later = Self.drain(net.endpoints[server]).map(Self.kind)
        #expect(later.filter { $0 == "changed team" }.count == 1, "\(later)")
        #expect(Self.drain(net.endpoints[server]).isEmpty, "drained")
    }

    static func kind(_ event: SyncEndpoint.Event) -> String {
        switch event {
        case .boardOpened(let board): return "opened \(board.name)"
        case .boardClosed(let name): return "closed \(name)"
        case .boardChanged(let name): return "changed \(name)"
        case .presence(let board, _): return "presence \(board)"
        case .sharedLog(let board, _): return "shared log \(board)"
        case .saveView(let board, _): return "save view \(board)"
        case .historyRequested(let board, _, _): return "history requested \(board)"
        case .historyAnswered(let board, _, _): return "history answered \(board)"
        }
    }
}
