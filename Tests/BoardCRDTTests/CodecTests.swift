import BoardCRDT
import BoardModel
import BoardSimulation
import Foundation
import Testing

@Suite struct CodecTests {
    static func sampleBatch(seed: UInt64 = 7) -> OperationBatch {
        let history = HistoryGenerator(replicaCount: 3...3, steps: 60...60).generate(seed: seed)
        var replica = history.replicas[0]
        try! replica.apply(history.operations)
        return replica.operations(since: .empty)
    }

    @Test(arguments: 0..<30 as Range<UInt64>)
    func batchesRoundTripExactly(seed: UInt64) throws {
        let history = HistoryGenerator().generate(seed: seed)
        let plain = OperationBatch(operations: history.operations)
        #expect(try OperationBatch(decoding: plain.encoded()) == plain, "seed \(seed)")
        var replica = history.replicas[0]
        try replica.apply(history.operations)
        let delta = replica.operations(since: history.replicas[1].versionVector)
        let decoded = try OperationBatch(decoding: delta.encoded())
        #expect(decoded == delta, "seed \(seed)")
        #expect(decoded.encoded() == delta.encoded(), "the same batch always gives the same bytes")
    }

    @Test func oneStickerMoveIsUnder40Bytes() throws {
        var (a, b, _) = makeReplicas()
        var mover = Replica(id: ReplicaID(0xDEAD_BEEF_CAFE_F00D))
        // Realistic counters: thousands of earlier ops on both replicas.
        for _ in 0..<3000 { _ = try a.setBackground(asset: nil) }
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        try mover.apply(a.operations(since: .empty))
        for _ in 0..<3000 { _ = try mover.setBackground(asset: nil) }
        let own = try a.move(s, to: pt(1234.25, 987.5)).operations[0].encoded()
        let other = try mover.move(s, to: pt(1234.25, 987.5)).operations[0].encoded()
        #expect(own.count < 40, "own sticker move: \(own.count) bytes")
        #expect(other.count < 40, "another replica's sticker move: \(other.count) bytes")
        _ = b
    }

    @Test func everyTruncationIsAnErrorAndChangesNothing() throws {
        let bytes = Self.sampleBatch().encoded()
        var replica = Replica(id: ReplicaID(99))
        let before = try canonical(replica)
        for length in 0..<bytes.count {
            #expect(throws: CodecError.self, "length \(length)") {
                let batch = try OperationBatch(decoding: Array(bytes[..<length]))
                try replica.apply(batch)
            }
        }
        #expect(try canonical(replica) == before)
        #expect(replica.versionVector == .empty)
    }

    @Test func singleBitFlipsNeverCrashAndNeverHalfApply() throws {
        let bytes = Self.sampleBatch(seed: 11).encoded()
        var rejected = 0
        for bit in 0..<(bytes.count * 8) {
            var flipped = bytes
            flipped[bit / 8] ^= 1 << UInt8(bit % 8)
            var replica = Replica(id: ReplicaID(99))
            do {
                let batch = try OperationBatch(decoding: flipped)
                // A flip can yield another well-formed batch (a different coordinate, say); it
                // must then apply whole like any batch.
                try replica.apply(batch)
                #expect(replica.storedOperationCount <= batch.operations.count)
            } catch is CodecError {
                rejected += 1
                #expect(replica.versionVector == .empty)
            } catch is OperationError {
                // Well-formed bytes can still carry two contents for one id: refused whole.
                rejected += 1
                #expect(replica.versionVector == .empty)
            }
        }
        #expect(rejected > 0)
    }

    @Test(arguments: 0..<200 as Range<UInt64>)
    func randomBytesAreRejectedWithoutCrashing(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let length = Int.random(in: 0..<300, using: &rng)
        var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
        if seed % 2 == 0, !bytes.isEmpty { bytes[0] = OperationBatch.formatVersion }  // get past the version check
        // Random bytes practically never form a valid batch; if one does it must round-trip.
        if let batch = try? OperationBatch(decoding: bytes) {
            #expect(try OperationBatch(decoding: batch.encoded()) == batch, "seed \(seed)")
        }
    }

    @Test func hostileCountsAndValuesAreRefused() {
        // Claims 2^20 replicas with 3 bytes of input: refused before allocating.
        #expect(throws: CodecError.truncated(offset: 2)) {
            try OperationBatch(decoding: [1, 0, 0x80, 0x80, 0x40])
        }
        // Unsupported version.
        #expect(throws: CodecError.unsupportedVersion(9)) { try OperationBatch(decoding: [9, 0, 0, 0]) }
        // A 10-byte varint overflowing 64 bits.
        #expect(throws: CodecError.self) {
            try OperationBatch(decoding: [1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F])
        }
        // An op whose Lamport counter is beyond the limit is invalid even though well-formed.
        let op = Op(id: OpID(replica: ReplicaID(1), seq: 1), lamport: Op.maxCounter + 1,
                    payload: .setBoard(.background(nil)))
        #expect(throws: CodecError.self) { try OperationBatch(decoding: op.encoded()) }
        var replica = Replica(id: ReplicaID(2))
        #expect(throws: OperationError.self) { try replica.apply([op]) }
        #expect(replica.lamport == 0)
        // Trailing bytes after a valid batch.
        let valid = Op(id: OpID(replica: ReplicaID(1), seq: 1), lamport: 1, payload: .setBoard(.background(nil))).encoded()
        #expect(throws: CodecError.self) { try OperationBatch(decoding: valid + [0]) }
    }

    @Test func pointsOnAQuarterGridCostAboutOneBytePerCoordinate() throws {
        var replica = Replica(id: ReplicaID(5))
        _ = try replica.beginStroke(color: red, width: 2, points: [pt(100, 100)])
        var x = 100.0
        for _ in 0..<100 {
            let points = (0..<8).map { _ -> CodablePoint in x += 1.25; return pt(x, 100 + (x / 4).rounded() / 4) }
            _ = try replica.appendPoints(points)
        }
        replica.finishStroke()
        let bytes = replica.fullState().encoded()
        // 801 points, 1,602 coordinates.
        #expect(bytes.count < 2300, "\(bytes.count) bytes for 801 points")
    }

    /// Found by the `operations` fuzz target: an item named by its author with a low word of
    /// 2^63 or more came back from encode-decode as another item (the short form shifted the top
    /// bit away), so a relay re-encoding a hostile peer's batch made its peers diverge.
    @Test func itemIDsWithTheTopBitOfTheLowWordSet() throws {
        let author = ReplicaID(0xA11CF)
        for low: UInt64 in [1 << 63, (1 << 63) + 5, .max, (1 << 63) - 1, 0] {
            let item = ItemID(high: author.rawValue, low: low)
            let ops = [
                Op(id: OpID(replica: author, seq: 1), lamport: 1, payload: .appendPoints(item, [GridPoint(x: 16, y: 32)])),
                Op(id: OpID(replica: author, seq: 2), lamport: 2, payload: .setItem(item, .exists(false))),
            ]
            let batch = OperationBatch(operations: ops)
            let again = try OperationBatch(decoding: batch.encoded())
            #expect(again == batch, "low word \(String(low, radix: 16))")
        }
    }
}
