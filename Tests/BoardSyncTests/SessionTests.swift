import BoardCRDT
import BoardModel
import BoardSimulation
import BoardSync
import Foundation
import Testing

/// Two hubs back to back on the simulator's `Network` (the first simulator, now a thin use
/// of the one every simulation runs on): a link of 1 ms each way whose reads are whole
/// writes, single bytes, or 1-64 bytes drawn from the network's generator (seed 1).
struct Pair {
    let server: BoardHub
    let client: BoardHub
    let net = Network<Never>(seed: 1)
    var now: Double { net.now }

    enum Split { case whole, oneByte, random }

    /// A hub as a node of the network (one session, id 1).
    final class Node: NetworkNode {
        let hub: BoardHub
        init(_ hub: BoardHub) { self.hub = hub }
        func output(for session: SessionID, now: Double) -> [UInt8] { hub.output(for: 1, now: now) }
        func receive(_ session: SessionID, _ bytes: [UInt8], from: Int, now: Double) -> Int? {
            _ = hub.receive(1, bytes, now: now)
            return 0
        }
        func isFinished(_ session: SessionID) -> Bool { false }
        func closed(_ session: SessionID, now: Double) { hub.remove(1) }
    }

    init(server: MemoryReplicaStore, client: MemoryReplicaStore, split: Split, limits: SessionLimits = SessionLimits()) {
        self.server = BoardHub(board: "b", store: server)
        self.client = BoardHub(board: "b", store: client)
        self.server.addAcceptor(1, SyncSession(role: .acceptor, localReplica: server.replica.id, limits: limits), now: 0)
        self.client.addDialer(1, SyncSession(role: .dialer, localReplica: client.replica.id, limits: limits), now: 0)
        let dialer = net.add(Node(self.client)), acceptor = net.add(Node(self.server))
        let segmentation: Segmentation = switch split {
        case .whole: .whole
        case .oneByte: .bytes(1)
        case .random: .random(1...64)
        }
        _ = net.connect(dialer, to: acceptor, latency: 0.001...0.001, segmentation: segmentation)
    }

    /// Moves bytes both ways until neither side has anything to say (bounded, to catch livelock).
    func drive(maxRounds: Int = 10_000) throws {
        var deliveries = 0
        while true {
            net.flush(0)
            net.flush(1)
            guard net.links[0].inFlight else { return }
            while let event = net.next(until: .infinity) {
                guard case .deliver(let link, let direction, let generation) = event,
                      let delivery = net.deliver(link, direction, generation: generation) else { continue }
                net.flush(delivery.to)
                deliveries += 1
                if deliveries > 2 * maxRounds { throw DriveError.livelock }
            }
        }
    }

    enum DriveError: Error { case livelock }
}

func storeWithHistory(seed: UInt64, replicaIndex: Int) -> MemoryReplicaStore {
    let history = HistoryGenerator(replicaCount: 3...3, steps: 40...40).generate(seed: seed)
    var replica = history.replicas[replicaIndex]
    for data in history.assets.values where replica.referencedAssets.contains(AssetHash.of(data)) {
        replica.assets.insert(data)
    }
    return MemoryReplicaStore(replica: replica)
}

@Suite struct SessionTests {
    @Test(arguments: [Pair.Split.whole, .oneByte, .random])
    func twoDivergedReplicasConvergeWhateverTheByteSplit(split: Pair.Split) throws {
        for seed in 0..<15 as Range<UInt64> {
            let a = storeWithHistory(seed: seed, replicaIndex: 0)
            let b = storeWithHistory(seed: seed, replicaIndex: 1)
            let pair = Pair(server: a, client: b, split: split)
            try pair.drive()
            #expect(a.replica.versionVector == b.replica.versionVector, "seed \(seed)")
            #expect(try a.replica.snapshot().canonicalJSON() == b.replica.snapshot().canonicalJSON(), "seed \(seed)")
        }
    }

    @Test func assetsCrossALinkOnceAndInChunks() throws {
        var limits = SessionLimits()
        limits.assetChunk = 1000
        var a = Replica(id: ReplicaID(1))
        let image = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        for x in 0..<5 { _ = try a.addSticker(imagePNG: image, at: CodablePoint(x: Double(x), y: 0)) }
        let server = MemoryReplicaStore(replica: a)
        let client = MemoryReplicaStore(replica: Replica(id: ReplicaID(2)))
        let pair = Pair(server: server, client: client, split: .random, limits: limits)
        try pair.drive()
        #expect(client.replica.missingAssets.isEmpty)
        #expect(client.replica.snapshot().stickers.allSatisfy { $0.imagePNG == image })
        // Five stickers share one asset: its bytes crossed once (10 chunks of 1000 + framing).
        let received = pair.client.session(1)!.bytesReceived
        #expect(received < 10_000 + 3_000, "\(received) bytes for one 10 kB asset")
    }

    @Test func anInterruptedAssetTransferResumesFromItsOffset() throws {
        var assembler = AssetAssembler()
        let bytes = (0..<5000).map { UInt8(truncatingIfNeeded: $0) }
        let hash = AssetHash.of(bytes)
        #expect(try assembler.add(AssetChunk(hash: hash, totalSize: 5000, offset: 0, bytes: Array(bytes[0..<2000]))) == nil)
        #expect(assembler.offset(for: hash) == 2000, "a new link asks from here")
        #expect(try assembler.add(AssetChunk(hash: hash, totalSize: 5000, offset: 2000, bytes: Array(bytes[2000...]))) == bytes)
        // Bytes that do not match the hash are refused.
        #expect(throws: SessionError.self) {
            _ = try assembler.add(AssetChunk(hash: hash, totalSize: 3, offset: 0, bytes: [1, 2, 3]))
        }
    }

    /// A session fed hostile bytes closes with a code, queues an ERROR frame, and reports nothing
    /// else; the replica behind it is untouched.
    static func acceptorFed(_ bytes: [UInt8]) -> (events: [SessionEvent], output: [UInt8], session: SyncSession) {
        var session = SyncSession(role: .acceptor, localReplica: ReplicaID(9))
        session.listen(now: 0)
        let events = session.receive(bytes, now: 0)
        return (events, session.takeOutput(), session)
    }

    static func errorCode(in output: [UInt8]) -> UInt16? {
        var decoder = FrameDecoder(maxFrame: 1 << 20)
        decoder.append(output)
        while let frame = try? decoder.next() {
            if case .error(let code, _)? = try? Message(frame: frame, limits: SessionLimits()) { return code }
        }
        return nil
    }

    static func hello(version: UInt64 = 1, board: String = "team") -> [UInt8] {
        var frame = Message.hello(Hello(board: board, replica: ReplicaID(5), version: .empty)).frame()
        if version != 1 {
            var payload = frame.payload
            payload[4] = UInt8(version)
            frame = Frame(type: frame.type, payload: payload)
        }
        return frame.encoded()
    }

    @Test(arguments: [
        ("garbage", Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8), SessionError.Code.frameTooLarge),
        ("bad checksum", { var b = SessionTests.hello(); b[b.count - 1] ^= 1; return b }(), .badChecksum),
        ("oversized length", [0xFF, 0xFF, 0xFF, 0x7F, 1, 2, 3], .frameTooLarge),
        ("zero length", [0, 0, 0, 0, 0, 0, 0, 0], .malformedFrame),
        ("wrong protocol version", SessionTests.hello(version: 7), .unsupportedVersion),
        ("unknown message type", Frame(type: 0x7E, payload: []).encoded(), .unknownMessage),
        ("operations before hello", Message.operations([1, 0, 0, 0]).frame().encoded(), .unexpectedMessage),
        ("board name escaping a folder", SessionTests.hello(board: "../etc"), .badBoardName),
        ("empty board name", SessionTests.hello(board: ""), .badBoardName),
    ])
    func protocolViolationsCloseWithACode(name: String, bytes: [UInt8], code: SessionError.Code) {
        let (events, output, session) = Self.acceptorFed(bytes)
        #expect(events.count == 1, "\(name)")
        #expect(events.first == .closed(session.closeReason), "\(name)")
        #expect(session.closeReason?.code == code, "\(name): \(String(describing: session.closeReason))")
        #expect(Self.errorCode(in: output) == code.rawValue, "\(name): the peer is told why")
        // Sticky: later input is ignored.
        var closed = session
        #expect(closed.receive(Self.hello(), now: 1).isEmpty)
    }

    @Test func aTruncatedFrameWaitsForMoreBytesAndNeverHalfConsumes() {
        let hello = Self.hello()
        var session = SyncSession(role: .acceptor, localReplica: ReplicaID(9))
        session.listen(now: 0)
        #expect(session.receive(Array(hello.dropLast()), now: 0).isEmpty)
        #expect(!session.isClosed)
        let events = session.receive([hello.last!], now: 0)
        guard case .hello(let received)? = events.first else {
            Issue.record("expected the hello once complete, got \(events)")
            return
        }
        #expect(received.board == "team")
    }

    @Test func invalidOperationsCloseTheSessionAndLeaveTheReplicaAsItWas() throws {
        let store = MemoryReplicaStore(replica: Replica(id: ReplicaID(1)))
        let hub = BoardHub(board: "team", store: store)
        hub.addAcceptor(1, SyncSession(role: .acceptor, localReplica: ReplicaID(1)), now: 0)
        hub.receive(1, Self.hello(), now: 0)
        #expect(hub.session(1)?.isOpen == true)
        // A well-framed OPS message whose batch does not decode.
        let events = hub.receive(1, Message.operations([1, 0, 5, 1, 2]).frame().encoded(), now: 0)
        #expect(events.contains { if case .closed(let error?) = $0 { return error.code == .invalidOperations }; return false })
        #expect(store.replica.versionVector == .empty)
    }

    /// Batches in format 2 go only to peers that announce `packedPoints`, linked live batches
    /// (format 3) only to peers that announce `linkedBatches`: a build from before format 2 gets
    /// format 1, one from before format 3 gets format 2, in its handshake delta and in relayed
    /// edits, and every peer the same ops.
    @Test func peersGetOnlyTheBatchFormatsTheyAnnounce() throws {
        var replica = Replica(id: ReplicaID(1))
        let stroke = [CodablePoint(x: 1, y: 2), CodablePoint(x: 3.5, y: 4), CodablePoint(x: 6, y: 1.25)]
        _ = try replica.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 2, points: stroke)
        replica.finishStroke()
        let store = MemoryReplicaStore(replica: replica)
        let hub = BoardHub(board: "team", store: store)
        let peers: [(SessionID, UInt64)] = [(1, 0), (2, Capabilities.presence | Capabilities.packedPoints), (3, Capabilities.supported)]
        for (id, capabilities) in peers {
            hub.addAcceptor(id, SyncSession(role: .acceptor, localReplica: ReplicaID(1)), now: 0)
            let hello = Hello(board: "team", replica: ReplicaID(10 + UInt64(id)), capabilities: capabilities, version: .empty)
            hub.receive(id, Message.hello(hello).frame().encoded(), now: 0)
        }
        var links = [SessionID: BatchLink]()  // each peer's mirror of what its session sent it
        func batches(_ id: SessionID) throws -> [(format: UInt8, batch: OperationBatch)] {
            var decoder = FrameDecoder(maxFrame: 1 << 20)
            decoder.append(hub.output(for: id, now: 0))
            var found: [(UInt8, OperationBatch)] = []
            while let frame = try decoder.next() {
                if frame.type == Message.Kind.operations.rawValue {
                    found.append((frame.payload[0], try OperationBatch(decoding: frame.payload, link: &links[id, default: BatchLink()])))
                }
            }
            return found
        }
        let handshakes = try peers.map { try batches($0.0) }
        #expect(handshakes.map { $0.map(\.format) } == [[1], [2], [2]], "handshake deltas are self-contained")
        #expect(Set(handshakes.map { $0.map(\.batch.operations) }).count == 1)
        #expect(handshakes[0].first?.batch.operations.count == 1)
        // Two live edits relayed to every peer.
        var edit = store.replica
        let live = try edit.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 1), width: 1,
                                        points: [CodablePoint(x: 7, y: 7), CodablePoint(x: 9, y: 8.5)]).operations
        let more = try edit.appendPoints([CodablePoint(x: 9.5, y: 8), CodablePoint(x: 10, y: 7.5)]).operations
        hub.broadcast(live)
        let first = try peers.map { try batches($0.0) }
        hub.broadcast(more)
        let second = try peers.map { try batches($0.0) }
        #expect(first.map { $0.map(\.format) } == [[1], [2], [3]] && second.map { $0.map(\.format) } == [[1], [2], [3]])
        #expect(first.allSatisfy { $0.first?.batch.operations == live } && second.allSatisfy { $0.first?.batch.operations == more })
    }

    /// A session that announces an older release's capabilities uses only features both sides
    /// announced, in both directions: with a current peer, live batches go as format 2 each way
    /// (not linked) and both sides' edits arrive.
    @Test func aSessionOfAnOlderReleaseGetsAndSendsOnlySharedFeatures() throws {
        let old = Capabilities.presence | Capabilities.packedPoints
        var dialer = SyncSession(role: .dialer, localReplica: ReplicaID(1), capabilities: old)
        var acceptor = SyncSession(role: .acceptor, localReplica: ReplicaID(2))
        dialer.start(board: "team", version: .empty, now: 0)
        acceptor.listen(now: 0)
        var formats: [String: [UInt8]] = [:]
        var received: [String: [Op]] = [:]
        func deliver(_ bytes: [UInt8], to session: inout SyncSession, _ name: String) {
            var decoder = FrameDecoder(maxFrame: 1 << 20)
            decoder.append(bytes)
            while let frame = try? decoder.next() {
                if frame.type == Message.Kind.operations.rawValue { formats[name, default: []].append(frame.payload[0]) }
            }
            for event in session.receive(bytes, now: 1) {
                switch event {
                case .hello: session.accept(version: .empty)
                case .operations(let batch): received[name, default: []] += batch.operations
                default: break
                }
            }
        }
        for _ in 0..<3 {
            deliver(dialer.takeOutput(now: 1), to: &acceptor, "acceptor")
            deliver(acceptor.takeOutput(now: 1), to: &dialer, "dialer")
        }
        #expect(dialer.isOpen && acceptor.isOpen)
        #expect(dialer.sharedCapabilities == old && acceptor.sharedCapabilities == old)
        formats = [:]
        received = [:]
        var a = Replica(id: ReplicaID(1)), b = Replica(id: ReplicaID(2))
        let fromOld = try a.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 1, points: [CodablePoint(x: 1, y: 1)]).operations
        let fromNew = try b.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 1), width: 1, points: [CodablePoint(x: 2, y: 2)]).operations
        dialer.send(OperationBatch(operations: fromOld))
        acceptor.send(OperationBatch(operations: fromNew))
        deliver(dialer.takeOutput(now: 2), to: &acceptor, "acceptor")
        deliver(acceptor.takeOutput(now: 2), to: &dialer, "dialer")
        #expect(formats["acceptor"] == [2] && formats["dialer"] == [2], "\(formats)")
        #expect(received["acceptor"] == fromOld && received["dialer"] == fromNew)
        // Two current sessions link their live batches.
        #expect(SyncSession(role: .dialer, localReplica: ReplicaID(3)).capabilities & Capabilities.linkedBatches != 0)
    }

    @Test func keepAliveAndIdleTimeout() throws {
        var session = SyncSession(role: .dialer, localReplica: ReplicaID(1), timing: SessionTiming(keepAlive: 5, idleTimeout: 20))
        session.start(board: "b", version: .empty, now: 0)
        _ = session.takeOutput(now: 0)
        #expect(session.nextDeadline == 5)
        #expect(session.handleTimer(now: 5).isEmpty)
        var decoder = FrameDecoder(maxFrame: 1 << 20)
        decoder.append(session.takeOutput(now: 5))
        #expect(try decoder.next()?.type == Message.Kind.ping.rawValue)
        let events = session.handleTimer(now: 20)
        #expect(events == [.closed(SessionError(.idleTimeout, "nothing received for 20 s"))])
    }

    /// An acceptor sends no keep-alive before its HELLO, however long the dialer's HELLO takes
    /// to arrive or the host takes to accept it: the dialer would refuse a PING first ("expected
    /// HELLO, got ping", seen on a loaded machine). Its deadlines are then the handshake's and
    /// the idle timeout's only, so a host on virtual time never fires a timer that does nothing.
    @Test func anAcceptorSendsNoPingBeforeItsHello() throws {
        var timing = SessionTiming(keepAlive: 5, idleTimeout: 20)
        timing.handshakeTimeout = 15
        var session = SyncSession(role: .acceptor, localReplica: ReplicaID(1), timing: timing)
        session.listen(now: 0)
        #expect(session.nextDeadline == 15, "the handshake's deadline, no keep-alive")
        #expect(session.handleTimer(now: 6).isEmpty)
        #expect(session.takeOutput(now: 6).isEmpty, "nothing before a HELLO arrived")
        // The dialer's HELLO arrives; the host has not accepted it yet.
        _ = session.receive(Message.hello(Hello(board: "b", replica: ReplicaID(2), version: .empty)).frame().encoded(), now: 7)
        #expect(session.nextDeadline == 27, "the idle timeout only, while the host decides")
        #expect(session.handleTimer(now: 13).isEmpty)
        #expect(session.takeOutput(now: 13).isEmpty, "no PING while the HELLO waits for the host")
        session.accept(version: .empty)
        var decoder = FrameDecoder(maxFrame: 1 << 20)
        decoder.append(session.takeOutput(now: 14))
        #expect(try decoder.next()?.type == Message.Kind.hello.rawValue, "HELLO goes first")
        // Open: keep-alives as usual.
        #expect(session.nextDeadline == 19)
        #expect(session.handleTimer(now: 19).isEmpty)
        decoder.append(session.takeOutput(now: 19))
        var kinds: [UInt8] = []
        while let frame = try decoder.next() { kinds.append(frame.type) }
        #expect(kinds.contains(Message.Kind.ping.rawValue))
    }

    /// A corrupted length field makes a frame wait for bytes that never come while keep-alives
    /// keep arriving: the session closes instead of stalling forever (found by the simulator).
    @Test func aFrameWhoseLengthWasCorruptedDoesNotStallTheSession() {
        // The stall rule alone (before a HELLO the handshake deadline would close it at 10 s).
        var timing = SessionTiming()
        timing.handshakeTimeout = 1_000
        var session = SyncSession(role: .acceptor, localReplica: ReplicaID(1), timing: timing)
        session.listen(now: 0)
        var hello = Message.hello(Hello(board: "b", replica: ReplicaID(2), version: .empty)).frame().encoded()
        hello[2] ^= 0x0F  // the length now claims about a megabyte more
        _ = session.receive(hello, now: 0)
        var now = 0.0
        var closed: SessionError?
        while now < 60, closed == nil {
            now += 1
            _ = session.receive(Message.ping(UInt64(now)).frame().encoded(), now: now)  // keep-alives
            for case .closed(let error) in session.handleTimer(now: now) { closed = error }
        }
        #expect(closed?.code == .idleTimeout)
        #expect(now >= 20 && now <= 25, "closed after \(now) s")
    }
}
