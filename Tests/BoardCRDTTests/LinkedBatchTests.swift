import BoardCRDT
import BoardModel
import BoardSimulation
import Foundation
import Testing

/// Linked batches (format 3): live operations encoded against what one direction of a
/// connection already carried, decoded by a mirror link on the other end.
@Suite struct LinkedBatchTests {
    /// Sends `batches` through a fresh pair of links; every one must come back equal.
    static func stream(_ batches: [OperationBatch], seed: UInt64) throws -> (bytes: [[UInt8]], sender: BatchLink, receiver: BatchLink) {
        var sender = BatchLink(), receiver = BatchLink()
        var sent: [[UInt8]] = []
        for batch in batches {
            let bytes = batch.encoded(linkedTo: &sender)
            let decoded = try OperationBatch(decoding: bytes, link: &receiver)
            #expect(decoded == batch, "seed \(seed): a batch changed through the link")
            sent.append(bytes)
        }
        return (sent, sender, receiver)
    }

    /// Random multi-replica histories (strokes, stickers, moves of each other's items, deletes,
    /// reorders, board fields) cut into live batches of 1 to 5 operations, with self-contained
    /// batches and complete deltas between them: all come back exactly, and only live batches
    /// are linked.
    @Test(arguments: 0..<40 as Range<UInt64>)
    func liveBatchesRoundTripThroughALink(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed ^ 0x11A4)
        let history = HistoryGenerator().generate(seed: seed)
        var batches: [OperationBatch] = []
        var rest = history.operations[...]
        while !rest.isEmpty {
            let count = min(rest.count, Int.random(in: 1...5, using: &rng))
            batches.append(OperationBatch(operations: Array(rest.prefix(count))))
            rest = rest.dropFirst(count)
            if rng.chance(0.05) {
                var replica = history.replicas[0]
                try replica.apply(Array(history.operations.prefix(history.operations.count - rest.count)))
                batches.append(replica.operations(since: .empty))  // a complete delta: never linked
            }
        }
        let sent = try Self.stream(batches, seed: seed)
        for (batch, bytes) in zip(batches, sent.bytes) {
            #expect(bytes[0] == (batch.base == nil ? BatchLink.format : OperationBatch.formatVersion), "seed \(seed)")
        }
        // Extreme strokes (coordinate limits, every packed width) go through a link as well.
        let strokes = Self.chunks(CodecTests.extremeStrokes(seed: seed), rng: &rng)
        _ = try Self.stream(strokes, seed: seed)
    }

    static func chunks(_ ops: [Op], rng: inout SeededRandom) -> [OperationBatch] {
        var result: [OperationBatch] = []
        var rest = ops[...]
        while !rest.isEmpty {
            let count = min(rest.count, Int.random(in: 1...3, using: &rng))
            result.append(OperationBatch(operations: Array(rest.prefix(count))))
            rest = rest.dropFirst(count)
        }
        return result
    }

    /// What a live edit costs once the link carried its item: a sticker dragged by its author
    /// takes the format byte, a head and two small coordinate deltas; points continue from the
    /// stroke's last point and a run shaped like the one before does not repeat its shape.
    @Test func aLiveEditCostsAFewBytesOnceTheLinkKnowsItsItem() throws {
        var replica = Replica(id: ReplicaID(0x5EED_5EED_5EED))
        let sticker = try replica.addSticker(imagePNG: Workload.fakeAssets(count: 1, seed: 1)[0], at: CodablePoint(x: 400, y: 300))
        var batches = [OperationBatch(operations: sticker.operations)]
        for step in 1...3 {
            batches.append(OperationBatch(operations: try replica.move(sticker.item!, to: CodablePoint(x: 400 + Double(step), y: 300.5)).operations))
        }
        let stroke = try replica.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 0), width: 2,
                                             points: (0..<8).map { CodablePoint(x: 10 + Double($0) / 4, y: 20) })
        batches.append(OperationBatch(operations: stroke.operations))
        for run in 1...2 {
            let points = (0..<8).map { CodablePoint(x: 10 + Double(run * 8 + $0) / 4, y: 20 + Double($0 % 2) / 4) }
            batches.append(OperationBatch(operations: try replica.appendPoints(points).operations))
        }
        let sent = try Self.stream(batches, seed: 0)
        for index in 1...3 {
            #expect(sent.bytes[index].count <= 4, "a repeated move: \(sent.bytes[index])")
            #expect(sent.bytes[index].count * 4 <= batches[index].encoded().count)
        }
        // The second append: format, head, 16 deltas of at most 3 bits packed at the 4-bit minimum.
        #expect(sent.bytes[6].count <= 2 + 8, "\(sent.bytes[6])")
        #expect(sent.bytes[6].count * 2 <= batches[6].encoded().count)
    }

    /// A link names at most `maxReplicas` replicas: a batch by one more goes self-contained and
    /// leaves both links as they were; the next known author is linked again.
    @Test func aLinkFullOfReplicasFallsBackToSelfContainedBatches() throws {
        func op(_ replica: UInt64) -> OperationBatch {
            OperationBatch(operations: [Op(id: OpID(replica: ReplicaID(replica), seq: 1), lamport: 1, payload: .setBoard(.background(nil)))])
        }
        var sender = BatchLink(), receiver = BatchLink()
        for replica in 1...UInt64(BatchLink.maxReplicas) {
            let bytes = op(replica).encoded(linkedTo: &sender)
            #expect(bytes[0] == BatchLink.format)
            _ = try OperationBatch(decoding: bytes, link: &receiver)
        }
        let overflow = op(UInt64(BatchLink.maxReplicas) + 1)
        let bytes = overflow.encoded(linkedTo: &sender)
        #expect(bytes[0] == OperationBatch.formatVersion)
        #expect(try OperationBatch(decoding: bytes, link: &receiver) == overflow)
        #expect(sender.replicaCount == BatchLink.maxReplicas && receiver.replicaCount == BatchLink.maxReplicas)
        let known = OperationBatch(operations: [Op(id: OpID(replica: ReplicaID(7), seq: 2), lamport: 9, payload: .setBoard(.background(nil)))])
        let again = known.encoded(linkedTo: &sender)
        #expect(again[0] == BatchLink.format)
        #expect(try OperationBatch(decoding: again, link: &receiver) == known)
        // A hostile sender naming one replica more than the limit is refused.
        var hostile: [UInt8] = [BatchLink.format, 0x80 | 14, 0x01]  // canvas op, new author
        var index = ByteWriter()
        index.write(varint: UInt64(BatchLink.maxReplicas))
        hostile += index.bytes + [1, 2, 3, 4, 5, 6, 7, 8] + [2, 2, 1, 1]
        #expect(throws: CodecError.self) { try OperationBatch(decoding: hostile, link: &receiver) }
        #expect(receiver.isBroken)
    }

    /// The link remembers at most `maxItems` items' coordinates; both ends forget them at the
    /// same operation, so moves of more stickers than that still come back exactly.
    @Test func bothEndsForgetCoordinatesAtTheSameOperation() throws {
        let author = ReplicaID(0xA)
        var batches: [OperationBatch] = []
        var seq: UInt64 = 0
        for index in 0..<(BatchLink.maxItems + 300) {
            seq += 1
            let item = ItemID(high: author.rawValue, low: UInt64(index + 1))
            let at = GridPoint(x: Int64(index * 64), y: Int64(index % 7) * 64)
            batches.append(OperationBatch(operations: [Op(id: OpID(replica: author, seq: seq), lamport: seq, payload: .setItem(item, .position(at)))]))
        }
        // Then the first items again: their coordinates were forgotten on both ends.
        for index in 0..<300 {
            seq += 1
            let item = ItemID(high: author.rawValue, low: UInt64(index + 1))
            batches.append(OperationBatch(operations: [Op(id: OpID(replica: author, seq: seq), lamport: seq, payload: .setItem(item, .position(GridPoint(x: 5, y: 5))))]))
        }
        _ = try Self.stream(batches, seed: 0)
    }

    /// Bytes a hostile or broken peer could send on a link: each refused with an error naming
    /// what was wrong, and the link is broken afterwards (the session closes).
    @Test func hostileLinkedBatchesAreRefusedAndBreakTheLink() throws {
        let cases: [(bytes: [UInt8], says: String)] = [
            ([BatchLink.format, 14, 2, 2, 1, 1], "does not name its author"),  // canvas, no author yet
            ([BatchLink.format, 0x80 | 14, 0x01, 5], "beyond the link"),  // reference 5 on an empty table
            ([BatchLink.format, 0x80 | 0x20 | 4, 0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 2], "same-item flag before"),
            ([BatchLink.format, 0x80 | 14, 0x04], "unknown extension byte"),
            ([BatchLink.format, 0x80 | 14, 0x03, 0], "point shape on an operation without points"),
            ([BatchLink.format, 0x80 | 1, 0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2], "without a shape"),
            ([BatchLink.format, 0x80 | 14, 0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 2, 1, 1, 0x80 | 14, 0x01, 1, 1, 0, 0, 0, 0, 0, 0, 0], "joins the link a second time"),
            ([BatchLink.format], "ends too early"),
            ([BatchLink.format, 0x80 | 14, 0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 1], "sequence number"),  // seq 0 is invalid
        ]
        for (bytes, says) in cases {
            var link = BatchLink()
            do {
                _ = try OperationBatch(decoding: bytes, link: &link)
                Issue.record("accepted \(bytes)")
            } catch {
                #expect("\(error)".contains(says), "\(bytes): \(error)")
            }
            #expect(link.isBroken)
            // Nothing further is read from a broken link, not even a valid self-contained batch.
            let valid = OperationBatch(operations: [Op(id: OpID(replica: ReplicaID(1), seq: 1), lamport: 1, payload: .setBoard(.background(nil)))])
            #expect(throws: CodecError.self) { try OperationBatch(decoding: valid.encoded(), link: &link) }
        }
    }

    /// Every truncation and random corruption of a valid stream's batches is refused or decodes
    /// to valid operations, never a crash (the fuzz target `linked` runs the same at scale).
    @Test(arguments: 0..<20 as Range<UInt64>)
    func corruptLinkedBatchesNeverCrash(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let history = HistoryGenerator().generate(seed: seed)
        let batches = Self.chunks(history.operations, rng: &rng)
        let sent = try Self.stream(batches, seed: seed)
        var receiver = BatchLink()
        for bytes in sent.bytes {
            var probe = receiver
            var cut = bytes
            cut.removeLast(Int.random(in: 1...bytes.count, using: &rng))
            if cut.count > 1 { _ = try? OperationBatch(decoding: cut, link: &probe) }  // shorter batches can still be valid
            probe = receiver
            var flipped = bytes
            flipped[Int.random(in: 0..<flipped.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
            if let batch = try? OperationBatch(decoding: flipped, link: &probe) {
                for op in batch.operations { #expect((try? op.validate()) != nil, "seed \(seed)") }
            }
            _ = try OperationBatch(decoding: bytes, link: &receiver)
        }
    }
}
