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
        // Format 1 (for peers from before packed points) carries the same batches.
        #expect(try OperationBatch(decoding: delta.encoded(format: 1)) == delta, "seed \(seed)")
        #expect(try OperationBatch(decoding: plain.encoded(format: 1)) == plain, "seed \(seed)")
        #expect(delta.encoded(format: 1)[0] == 1 && delta.encoded()[0] == 2)
    }

    /// Random strokes with every kind of step (zero, tiny, huge, shifted grids, the coordinate
    /// limits) through both formats: the packed widths from 4 to 64 bits all come back exactly.
    /// Random strokes with every kind of step (zero, tiny, huge, shifted grids, the coordinate
    /// limits) by one author.
    static func extremeStrokes(seed: UInt64) -> [Op] {
        var rng = SeededRandom(seed: seed)
        let author = ReplicaID(0xAB)
        var ops: [Op] = []
        var lamport: UInt64 = 0
        let limit = Int64(FixedPoint.limit)
        for stroke in 0..<Int.random(in: 1...6, using: &rng) {
            let item = ItemID(high: author.rawValue, low: UInt64(stroke + 1))
            let magnitude = Int64(1) << Int64.random(in: 0...44, using: &rng)
            let grid = Int64(1) << Int64.random(in: 0...6, using: &rng)
            func point() -> GridPoint {
                func coordinate() -> Int64 {
                    switch Int.random(in: 0..<10, using: &rng) {
                    case 0: return limit
                    case 1: return -limit
                    default: return Int64.random(in: -magnitude...magnitude, using: &rng) / grid * grid
                    }
                }
                return GridPoint(x: coordinate(), y: coordinate())
            }
            for part in 0..<Int.random(in: 1...4, using: &rng) {
                let count = Int.random(in: 0...3, using: &rng) == 0 ? 1 : Int.random(in: 1...40, using: &rng)
                var points = (0..<count).map { _ in point() }
                if Bool.random(using: &rng) { points = Array(repeating: points[0], count: count) }  // zero steps
                lamport += 1
                let payload: Payload = part == 0
                    ? .beginStroke(item, StrokeStart(color: Color8(red: 1, green: 2, blue: 3, alpha: 255), width: 16, z: ZKey(bytes: [0x80])!, points: points))
                    : .appendPoints(item, points)
                ops.append(Op(id: OpID(replica: author, seq: lamport), lamport: lamport, payload: payload))
            }
        }
        return ops
    }

    /// Extreme strokes through both formats: the packed widths from 4 to 64 bits all come back
    /// exactly.
    @Test(arguments: 0..<40 as Range<UInt64>)
    func packedPointsRoundTripAtEveryWidth(seed: UInt64) throws {
        let batch = OperationBatch(operations: Self.extremeStrokes(seed: seed))
        for format in OperationBatch.readableFormats {
            let bytes = batch.encoded(format: format)
            #expect(try OperationBatch(decoding: bytes) == batch, "seed \(seed), format \(format)")
        }
    }

    /// The workload's 8-point runs on a quarter-point grid: packed, they take well under the
    /// byte per coordinate that format 1 needs, and a run shaped like the one before it does
    /// not repeat its count, shift and width.
    @Test func packedPointRunsAreSmallerThanFormatOne() throws {
        var replica = Replica(id: ReplicaID(5))
        var x = 100.0
        var y = 100.0
        var rng = SeededRandom(seed: 3)
        func step() -> CodablePoint {
            x += Double(Int.random(in: -12...12, using: &rng)) / 4
            y += Double(Int.random(in: -12...12, using: &rng)) / 4
            return pt(x, y)
        }
        _ = try replica.beginStroke(color: red, width: 2, points: (0..<8).map { _ in step() })
        for _ in 0..<100 { _ = try replica.appendPoints((0..<8).map { _ in step() }) }
        replica.finishStroke()
        let state = replica.fullState()
        let packed = state.encoded().count
        let plain = state.encoded(format: 1).count
        // 808 points: format 1 spends 2 bytes per point; packed at 5 bits per coordinate.
        #expect(plain > 1616)
        #expect(packed * 10 < plain * 7, "format 2: \(packed) bytes, format 1: \(plain)")
    }

    @Test func malformedPackedPointsAreRefused() throws {
        let author = ReplicaID(7)
        let item = ItemID(high: author.rawValue, low: 1)
        func op(_ seq: UInt64, _ points: [GridPoint]) -> Op {
            Op(id: OpID(replica: author, seq: seq), lamport: seq, payload: .appendPoints(item, points))
        }
        // Steps of (1, 1), (15, 0), (-16, -1) sixteenths on a 16-unit grid: packed at 5 bits,
        // so the last packed byte has 4 bits of padding.
        let points = [GridPoint(x: 16, y: 16), GridPoint(x: 256, y: 16), GridPoint(x: 0, y: 0)]
        let good = OperationBatch(operations: [op(1, points), op(2, points)]).encoded()
        #expect(try OperationBatch(decoding: good).operations.count == 2)
        // Layout: version, flags, replica count, id (8), run count, author, op count, then the
        // first op: head, item, count, shift, width, first delta (2 varints), packed bytes.
        let firstHead = 14
        #expect(good[firstHead] == 0x51)  // append points, seq and Lamport next
        #expect(good[firstHead + 2] == 3)  // count
        let widthAt = firstHead + 4
        #expect(good[widthAt] == 5)
        let secondHead = firstHead + 10  // head, item, count, shift, width, 2 varints, 3 packed bytes
        #expect(good[secondHead] == 0xF1)  // same item, same shape
        func mutated(_ change: (inout [UInt8]) -> Void) -> [UInt8] {
            var bytes = good
            change(&bytes)
            return bytes
        }
        // Widths outside 4...64.
        for width: UInt8 in [0, 3, 65, 255] {
            #expect(throws: CodecError.malformed("point width \(width) outside 4...64", offset: widthAt), "width \(width)") {
                try OperationBatch(decoding: mutated { $0[widthAt] = width })
            }
        }
        // A shift over 32.
        #expect(throws: CodecError.malformed("point shift 33 over 32", offset: widthAt - 1)) {
            try OperationBatch(decoding: mutated { $0[widthAt - 1] = 33 })
        }
        // "Same shape" on the batch's first point run, on a kind without points, in format 1.
        #expect(throws: CodecError.malformed("same-shape flag on the batch's first point run", offset: firstHead)) {
            try OperationBatch(decoding: mutated { $0[firstHead] |= 0x80 })
        }
        let erase = Op(id: OpID(replica: author, seq: 1), lamport: 1, payload: .setItem(item, .exists(false))).encoded()
        #expect(throws: CodecError.malformed("unknown operation head \(erase[firstHead] | 0x80)", offset: firstHead)) {
            try OperationBatch(decoding: { var e = erase; e[firstHead] |= 0x80; return e }())
        }
        var plain = OperationBatch(operations: [op(1, points), op(2, points)]).encoded(format: 1)
        #expect(try OperationBatch(decoding: plain).operations.count == 2)
        plain[firstHead] |= 0x80
        #expect(throws: CodecError.malformed("unknown operation head \(plain[firstHead])", offset: firstHead)) {
            try OperationBatch(decoding: plain)
        }
        // Nonzero padding bits after the packed steps (one encoding per batch).
        #expect(throws: CodecError.self) {
            try OperationBatch(decoding: mutated { $0[secondHead - 1] |= 0x80 })
        }
        // Packed bytes missing, and a count whose packed bytes are not there: truncated, no
        // allocation for the count.
        #expect(throws: CodecError.self) { try OperationBatch(decoding: Array(good.dropLast())) }
        #expect(throws: CodecError.self) {
            try OperationBatch(decoding: mutated { $0[firstHead + 2] = 100 })
        }
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
