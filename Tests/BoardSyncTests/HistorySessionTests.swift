import BoardCRDT
import BoardModel
import BoardSync
import Foundation
import Testing

/// History on demand at the session (docs/PROTOCOL.md, "History on demand"): the messages'
/// round trip, the capability, the bounds a session enforces before its host sees a request
/// (in flight, per second), and malformed, oversized and out-of-order frames.
@Suite struct HistorySessionTests {
    /// A dialer and an acceptor with both HELLOs exchanged (`capabilities` for each side).
    static func openPair(dialer: UInt64 = Capabilities.supported, acceptor: UInt64 = Capabilities.supported,
                         limits: SessionLimits = SessionLimits()) -> (SyncSession, SyncSession) {
        var client = SyncSession(role: .dialer, localReplica: ReplicaID(1), limits: limits, capabilities: dialer)
        var server = SyncSession(role: .acceptor, localReplica: ReplicaID(2), limits: limits, capabilities: acceptor)
        client.start(board: "b", version: .empty, now: 0)
        server.listen(now: 0)
        _ = server.receive(client.takeOutput(), now: 0)
        server.accept(version: .empty)
        _ = client.receive(server.takeOutput(), now: 0)
        #expect(client.isOpen && server.isOpen)
        return (client, server)
    }

    static func frame(_ type: UInt8, _ payload: [UInt8]) -> [UInt8] { Frame(type: type, payload: payload).encoded() }

    static let sampleAnswer = HistoryAnswer(
        id: 7, what: .versions, total: 3, first: 1, next: 3,
        versions: [HistoryVersionInfo(number: 1, time: 1_700_000_000_000, operationCount: 2, authors: [ReplicaID(1)],
                                      vector: VersionVector([ReplicaID(1): 2])),
                   HistoryVersionInfo(number: 2, time: nil, operationCount: 1, authors: [ReplicaID(1), ReplicaID(9)],
                                      vector: VersionVector([ReplicaID(1): 2, ReplicaID(9): 1]))])

    @Test func aRequestAndItsAnswerRoundTrip() {
        var (client, server) = Self.openPair()
        #expect(client.peerSupportsHistory)
        let request = HistoryRequest(id: 7, what: .versions, from: 1, to: 100, maxBytes: 4096)
        let check1 = client.requestHistory(request)
        #expect(check1)
        let events = server.receive(client.takeOutput(), now: 1)
        #expect(events == [.historyRequested(request)])
        server.answerHistory(Self.sampleAnswer)
        let check2 = client.receive(server.takeOutput(), now: 1) == [.history(Self.sampleAnswer)]
        #expect(check2)
        #expect(client.historyRequestsAwaiting.isEmpty && server.historyRequestsToAnswer.isEmpty)
        // Records keep their batches encoded, byte for byte.
        let batch = OperationBatch(operations: [], base: .empty, covers: VersionVector([ReplicaID(1): 3])).encoded()
        let records = HistoryAnswer(id: 8, what: .records, total: 3, first: 1, next: 0,
                                    records: [HistoryRecord(number: 3, time: -5, batch: batch)])
        let check3 = client.requestHistory(HistoryRequest(id: 8, what: .records, from: 3, to: 3))
        #expect(check3)
        _ = server.receive(client.takeOutput(), now: 2)
        server.answerHistory(records)
        let check4 = client.receive(server.takeOutput(), now: 2) == [.history(records)]
        #expect(check4)
        #expect(!client.isClosed && !server.isClosed)
    }

    @Test func withoutTheCapabilityNothingIsSentAndARequestIsAViolation() {
        var (client, server) = Self.openPair(acceptor: Capabilities.supported & ~Capabilities.history)
        #expect(!client.peerSupportsHistory)
        let check5 = !client.requestHistory(HistoryRequest(id: 1, what: .versions, from: 1, to: 1))
        #expect(check5)
        #expect(client.takeOutput().isEmpty)
        // A peer that sends one anyway breaks the protocol.
        let forced = Message.historyRequest(HistoryRequest(id: 1, what: .versions, from: 1, to: 1)).frame().encoded()
        let events = server.receive(forced, now: 1)
        #expect(events.count == 1)
        #expect(server.closeReason?.code == .unexpectedMessage)
    }

    @Test func anAnswerNobodyAskedForClosesTheSession() {
        var (client, _) = Self.openPair()
        _ = client.receive(Message.history(Self.sampleAnswer).frame().encoded(), now: 1)
        #expect(client.closeReason?.code == .unexpectedMessage)
        #expect(client.closeReason?.message.contains("to no request") == true)
    }

    @Test func aRequestBeforeTheHandshakeIsRefused() {
        var server = SyncSession(role: .acceptor, localReplica: ReplicaID(2))
        server.listen(now: 0)
        _ = server.receive(Message.historyRequest(HistoryRequest(id: 1, what: .versions, from: 1, to: 1)).frame().encoded(), now: 0)
        #expect(server.closeReason?.code == .unexpectedMessage)
    }

    @Test func requestsBeyondTheOneInFlightAreAnsweredBusyByTheSession() {
        var (_, server) = Self.openPair()
        // A hostile peer does not wait for answers: the session answers the extra ones itself.
        var bytes: [UInt8] = []
        for id in 1...5 as ClosedRange<UInt64> {
            bytes += Message.historyRequest(HistoryRequest(id: id, what: .versions, from: 1, to: 1)).frame().encoded()
        }
        let events = server.receive(bytes, now: 1)
        #expect(events == [.historyRequested(HistoryRequest(id: 1, what: .versions, from: 1, to: 1))])
        #expect(server.historyRequestsToAnswer == [1])
        let output = server.takeOutput()
        // Four busy answers went out, unasked by the host.
        var decoder = FrameDecoder(maxFrame: 1 << 20)
        decoder.append(output)
        var busy = 0
        while let frame = try? decoder.next() {
            if case .history(let answer)? = try? Message(frame: frame, limits: SessionLimits()) {
                #expect(answer.status == .busy)
                busy += 1
            }
        }
        #expect(busy == 4)
        #expect(!server.isClosed)
    }

    @Test func requestsBeyondTheRateAreAnsweredBusy() {
        var limits = SessionLimits()
        limits.historyRequestsPerSecond = 2  // bursts of 4
        var (client, server) = Self.openPair(limits: limits)
        var taken = 0, refused = 0
        for id in 1...10 as ClosedRange<UInt64> {
            let check6 = client.requestHistory(HistoryRequest(id: id, what: .versions, from: 1, to: 1))
            #expect(check6)
            for event in server.receive(client.takeOutput(), now: 1) {
                if case .historyRequested(let request) = event {
                    taken += 1
                    server.answerHistory(HistoryAnswer(id: request.id, what: .versions, total: 0))
                }
            }
            for event in client.receive(server.takeOutput(), now: 1) {
                if case .history(let answer) = event, answer.status == .busy { refused += 1 }
            }
        }
        #expect(taken == 4 && refused == 6, "taken \(taken), refused \(refused)")
        #expect(!server.isClosed && !client.isClosed)
        // A second later the bucket has refilled.
        let check7 = client.requestHistory(HistoryRequest(id: 11, what: .versions, from: 1, to: 1))
        #expect(check7)
        let check8 = server.receive(client.takeOutput(), now: 3).count == 1
        #expect(check8)
    }

    @Test func aReusedIdInFlightIsAViolation() {
        var (_, server) = Self.openPair()
        let request = Message.historyRequest(HistoryRequest(id: 3, what: .versions, from: 1, to: 1)).frame().encoded()
        _ = server.receive(request + request, now: 1)
        #expect(server.closeReason?.code == .unexpectedMessage)
    }

    @Test func theClientKeepsToItsOwnLimitInFlight() {
        var (client, _) = Self.openPair()
        let check9 = client.requestHistory(HistoryRequest(id: 1, what: .versions, from: 1, to: 1))
        #expect(check9)
        let check10 = !client.requestHistory(HistoryRequest(id: 2, what: .versions, from: 1, to: 1))
        #expect(check10)
        let check11 = !client.requestHistory(HistoryRequest(id: 1, what: .versions, from: 1, to: 1))
        #expect(check11)
    }

    @Test(arguments: [
        ("from after to", [7, 1, 5, 3, 0] as [UInt8]),
        ("unknown kind", [7, 9, 1, 1, 0]),
        ("version 0 listed", [7, 1, 0, 1, 0]),
        ("truncated", [7, 1, 1]),
        ("trailing bytes", [7, 1, 1, 1, 0, 0]),
        ("a number past 2^40", [7, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0]),
    ])
    func malformedRequestsCloseTheSession(_ case: (String, [UInt8])) {
        var (_, server) = Self.openPair()
        _ = server.receive(Self.frame(Message.Kind.historyRequest.rawValue, `case`.1), now: 1)
        #expect(server.closeReason?.code == .malformedFrame, "\(`case`.0): \(String(describing: server.closeReason))")
        #expect(server.historyRequestsToAnswer.isEmpty)
    }

    @Test func malformedAnswersCloseTheSession() {
        let good = Message.history(Self.sampleAnswer).frame().payload
        let cases: [(String, [UInt8])] = [
            ("truncated", Array(good.dropLast(3))),
            ("trailing", good + [0]),
            ("unknown status", [7, 99, 0, 1]),
            ("unknown kind", [7, 0, 0, 9, 0, 0, 0, 0]),
            // Claims 2^20 versions in a few bytes: refused before anything is allocated.
            ("a count beyond the bytes", [7, 0, 0, 1, 3, 1, 0, 0x80, 0x80, 0x40]),
            ("a time flag of 2", [7, 0, 0, 1, 3, 1, 0, 1, 1, 2, 0, 0, 0]),
        ]
        for (name, payload) in cases {
            var (client, _) = Self.openPair()
            let check12 = client.requestHistory(HistoryRequest(id: 7, what: .versions, from: 1, to: 3))
            #expect(check12)
            _ = client.takeOutput()
            _ = client.receive(Self.frame(Message.Kind.history.rawValue, payload), now: 1)
            #expect(client.closeReason?.code == .malformedFrame, "\(name): \(String(describing: client.closeReason))")
        }
    }

    @Test func anAnswerOverAFrameGoesAsARefusal() {
        var limits = SessionLimits()
        limits.maxFrame = 64 << 10
        var (client, server) = Self.openPair(limits: limits)
        let check13 = client.requestHistory(HistoryRequest(id: 1, what: .records, from: 0, to: 1))
        #expect(check13)
        _ = server.receive(client.takeOutput(), now: 1)
        server.answerHistory(HistoryAnswer(id: 1, what: .records, total: 1, first: 1,
                                           records: [HistoryRecord(number: 0, time: nil, batch: [UInt8](repeating: 1, count: 100 << 10))]))
        let events = client.receive(server.takeOutput(), now: 1)
        guard case .history(let answer)? = events.first else { Issue.record("\(events)"); return }
        #expect(answer.status == .tooLarge)
        #expect(!client.isClosed)
    }

    @Test func anAnswerForAClosedOrUnknownRequestIsDropped() {
        var (_, server) = Self.openPair()
        server.answerHistory(Self.sampleAnswer)  // nobody asked
        #expect(server.takeOutput().isEmpty)
    }

    @Test func randomHistoryFramesNeverCrash() {
        // Seeded: prints the seed on failure.
        for seed in 0..<300 as Range<UInt64> {
            var generator = SplitMix(seed: seed)
            var (client, server) = Self.openPair()
            let check14 = client.requestHistory(HistoryRequest(id: 7, what: .versions, from: 1, to: 3))
            #expect(check14)
            _ = client.takeOutput()
            let length = Int(generator.next() % 64)
            var payload = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            if !payload.isEmpty, generator.next() % 2 == 0 { payload[0] = 7 }
            _ = client.receive(Self.frame(15, payload), now: 1)
            _ = server.receive(Self.frame(14, payload), now: 1)
            #expect(client.isClosed || client.historyRequestsAwaiting.isEmpty, "seed \(seed)")
            _ = client.takeOutput()
            _ = server.takeOutput()
        }
    }
}

private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
