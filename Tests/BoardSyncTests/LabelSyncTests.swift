import BoardCRDT
import BoardModel
import BoardSimulation
import BoardSync
import Foundation
import Testing

/// Label operations (named versions) go only to peers that announce `Capabilities.labels`: a
/// build from before labels would refuse the unknown operation kind. It gets the batches without
/// them, and its version vector still rises past their sequence numbers.
@Suite struct LabelSyncTests {
    @Test func peersWithoutTheLabelsCapabilityGetEverythingButLabelsAndNoGap() throws {
        var replica = Replica(id: ReplicaID(1))
        _ = try replica.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 2, points: [CodablePoint(x: 1, y: 2)])
        replica.finishStroke()
        _ = try replica.setLabel(text: "first", version: replica.versionVector, time: 0)
        let store = MemoryReplicaStore(replica: replica)
        let hub = BoardHub(board: "team", store: store)
        let before = Capabilities.supported & ~Capabilities.labels
        let peers: [(SessionID, UInt64)] = [(1, before), (2, Capabilities.supported), (3, Capabilities.presence)]
        for (id, capabilities) in peers {
            hub.addAcceptor(id, SyncSession(role: .acceptor, localReplica: ReplicaID(1)), now: 0)
            let hello = Hello(board: "team", replica: ReplicaID(10 + UInt64(id)), capabilities: capabilities, version: .empty)
            hub.receive(id, Message.hello(hello).frame().encoded(), now: 0)
        }
        var links = [SessionID: BatchLink]()
        var mirrors = [SessionID: Replica]()
        for (id, _) in peers { mirrors[id] = Replica(id: ReplicaID(10 + UInt64(id))) }
        func deliver(_ id: SessionID) throws -> [OperationBatch] {
            var decoder = FrameDecoder(maxFrame: 1 << 20)
            decoder.append(hub.output(for: id, now: 0))
            var found: [OperationBatch] = []
            while let frame = try decoder.next() {
                guard frame.type == Message.Kind.operations.rawValue else { continue }
                let batch = try OperationBatch(decoding: frame.payload, link: &links[id, default: BatchLink()])
                try mirrors[id]!.apply(batch)
                found.append(batch)
            }
            return found
        }
        for (id, _) in peers { _ = try deliver(id) }
        #expect(mirrors[1]!.labels.isEmpty && mirrors[3]!.labels.isEmpty, "old peers get no label")
        #expect(mirrors[2]!.labels.map(\.text) == ["first"])
        for (id, _) in peers { #expect(mirrors[id]!.versionVector == store.replica.versionVector, "peer \(id): no gap") }
        // Live: a stroke, a label and more points; old peers get a complete delta without the label.
        var edit = Replica(id: ReplicaID(5))
        try edit.apply(store.replica.fullState())
        var live = try edit.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 1), width: 1, points: [CodablePoint(x: 7, y: 7)]).operations
        live += try edit.setLabel(text: "second", version: edit.versionVector, time: 1).operations
        live += try edit.appendPoints([CodablePoint(x: 9.5, y: 8)]).operations
        _ = try store.merge(OperationBatch(operations: live))
        hub.broadcast(live)
        for (id, _) in peers {
            let batches = try deliver(id)
            #expect(!batches.isEmpty, "peer \(id)")
            #expect(mirrors[id]!.versionVector == store.replica.versionVector, "peer \(id): no gap after live labels")
            #expect(try mirrors[id]!.snapshot().canonicalJSON() == store.replica.snapshot().canonicalJSON(), "peer \(id)")
        }
        #expect(mirrors[1]!.labels.isEmpty && mirrors[3]!.labels.isEmpty)
        #expect(mirrors[2]!.labels.map(\.text) == ["first", "second"])
    }

    /// The network simulator with peers that also label (one edit in twenty sets, renames or
    /// deletes a label) through its faults, crashes and compactions: the boards, version vectors
    /// and labels converge (the oracle's "label divergence").
    @Test(arguments: 1...6 as ClosedRange<UInt64>)
    func simulatedPeersThatLabelThroughFaultsConverge(seed: UInt64) {
        var plan = Plan.draw(seed: seed)
        plan.labels = true
        plan.releases = [:]
        #expect(plan.text.contains("labels on"))
        let report = World.simulate(plan)
        #expect(report.passed, "seed \(seed): \(report.failures.joined(separator: "; "))")
    }

    /// The same with a server, or a peer, from before labels: it is sent no label and its
    /// version vector still reaches everyone's (the run converges, nobody left with a gap).
    @Test(arguments: 1...4 as ClosedRange<UInt64>)
    func simulatedPeersThatLabelBesideAnOlderReleaseConverge(seed: UInt64) throws {
        var plan = Plan.draw(seed: seed)
        plan.labels = true
        plan.releases = seed % 2 == 1 ? [plan.server: .beforeLinkedBatches] : [0: .beforeLinkedBatches]
        #expect(try Plan(text: plan.text) == plan)
        let report = World.simulate(plan)
        #expect(report.passed, "seed \(seed): \(report.failures.joined(separator: "; "))")
    }
}
