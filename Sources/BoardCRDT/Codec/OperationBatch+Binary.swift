import BoardModel

// The binary encoding of operation batches, shared by the op log and the wire protocol.
// Layout (all integers LEB128 varints unless noted; docs/PROTOCOL.md has the full table):
//
//   version   u8 = 2 (1 is still read: op logs written before format 2)
//   flags     bit 0: base vector follows, bit 1: covers vector follows
//   replicas  count, then each id as fixed64 little-endian (sorted, unique)
//   [base]    count, then (replica index, seq) pairs
//   [covers]  same
//   runs      count; each run is ops by one author: replica index, op count, ops
//   op        head u8: kind (low 4 bits) | 0x10 seq = previous + 1 | 0x20 same item as previous op
//                      | 0x40 lamport = previous + 1 | 0x80 (format 2, points only) same point
//                        shape (count, shift, width) as the batch's previous point run
//             [seq: zigzag delta from previous op of the run (0 before the first)]
//             [lamport: zigzag delta, likewise]
//             [item: v = index << 1 | tag; tag 0: creator is the run's author and v >> 1 is the
//                    low word; tag 1: creator is replica[v >> 1], low word follows]
//             payload by kind
//
// Point runs write a count, a shift s, then each point as zigzag (delta >> s) from the previous
// point of the same item in this batch (or from the origin). Format 1 writes every delta as a
// varint. Format 2 writes the first as varints, then a bit width w (4...64) and the other deltas
// packed at w bits each (x then y, least significant bit first, the last byte padded with
// zeros): a pen's steps of a few grid units cost 5 bits per coordinate instead of 8.

/// How a point run is written in format 2: its count, shift and bit width. A run with the same
/// shape as the batch's previous one sets a head flag instead of repeating it.
struct PointShape: Equatable {
    var count: Int
    var shift: UInt8
    var width: UInt8

    /// Packed deltas take at least 4 bits (a byte per point): a decoder can bound a run's count
    /// by the bytes left before allocating anything.
    static let minimumWidth: UInt8 = 4

    /// The shape of `points` written from `origin`: the deltas' common trailing zero bits (the
    /// first delta, from the origin, included) and the width the widest packed delta needs —
    /// every delta after the first, and the first too when `packingFirst`. For a delta
    /// d = k << s, zigzag(d) has exactly s more significant bits than zigzag(k), so the packed
    /// width is the widest zigzag(d)'s length minus the shift. Nil for no points.
    static func measure(_ points: [GridPoint], from origin: GridPoint, packingFirst: Bool) -> PointShape? {
        guard !points.isEmpty else { return nil }
        let firstX = points[0].x &- origin.x, firstY = points[0].y &- origin.y
        var combined = firstX | firstY
        var widest: UInt64 = packingFirst ? zigzag(firstX) | zigzag(firstY) : 0
        for index in points.indices.dropFirst() {
            let dx = points[index].x &- points[index - 1].x
            let dy = points[index].y &- points[index - 1].y
            combined |= dx | dy
            widest |= zigzag(dx) | zigzag(dy)
        }
        let shift = combined == 0 ? 0 : min(combined.trailingZeroBitCount, 32)
        let bits = widest == 0 ? 0 : 64 - widest.leadingZeroBitCount - shift
        return PointShape(count: points.count, shift: UInt8(shift), width: UInt8(max(Int(minimumWidth), bits)))
    }
}

/// A signed value as the unsigned one its zigzag varint carries (and back).
func zigzag(_ value: Int64) -> UInt64 {
    UInt64(bitPattern: (value << 1) ^ (value >> 63))
}

func unzigzag(_ raw: UInt64) -> Int64 {
    Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
}

extension OperationBatch {
    /// The format `encoded()` writes. Decoders read formats 1 and 2.
    public static let formatVersion: UInt8 = 2
    /// The formats a decoder reads.
    public static let readableFormats: ClosedRange<UInt8> = 1...2
    /// Operations in one batch.
    public static let maxOperations = 1 << 24
    /// Distinct replica ids in one batch.
    public static let maxReplicas = 1 << 20

    /// The compact binary form. The same batch always gives the same bytes. `format` 1 is for
    /// peers that did not announce `Capabilities.packedPoints` (builds before format 2).
    public func encoded(format: UInt8 = OperationBatch.formatVersion) -> [UInt8] {
        precondition(OperationBatch.readableFormats.contains(format), "no batch format \(format)")
        var encoder = BatchEncoder(batch: self, format: format)
        return encoder.encode()
    }

    /// Decodes and validates a whole batch. Throws `CodecError` for malformed bytes, a limit
    /// exceeded, trailing bytes or an invalid operation; nothing is returned half-decoded.
    public init(decoding bytes: [UInt8]) throws {
        var decoder = BatchDecoder(reader: ByteReader(bytes))
        self = try decoder.decode()
    }
}

extension Op {
    /// This operation alone, as a one-operation batch.
    public func encoded() -> [UInt8] {
        OperationBatch(operations: [self]).encoded()
    }
}

private struct BatchEncoder {
    let batch: OperationBatch
    let format: UInt8
    var writer = ByteWriter(capacity: 256)
    var lastShape: PointShape?
    var replicaIndex: [ReplicaID: Int] = [:]
    /// The end point of each item's points so far in this batch (deltas start there), except
    /// the item written last, whose end point is `lastPointValue`.
    var lastPoint: [ItemID: GridPoint] = [:]
    var lastPointItem: ItemID?
    var lastPointValue = GridPoint(x: 0, y: 0)

    init(batch: OperationBatch, format: UInt8) {
        self.batch = batch
        self.format = format
    }

    mutating func encode() -> [UInt8] {
        // Most operations take under 16 bytes (points a byte or two per coordinate).
        writer = ByteWriter(capacity: 64 + batch.operations.count * 16)
        var replicas = Set<ReplicaID>()
        // Runs of one author naming its own items are the common case: insert only on a change
        // (hashing every operation's two ids was a tenth of a full state's encoding).
        var lastAuthor: ReplicaID?
        var lastCreator: UInt64?
        for index in batch.operations.indices {
            let author = batch.operations[index].id.replica
            if author != lastAuthor {
                replicas.insert(author)
                lastAuthor = author
            }
            if let item = batch.operations[index].payload.item, item.high != lastCreator {
                replicas.insert(ReplicaID(item.high))
                lastCreator = item.high
            }
        }
        for vector in [batch.base, batch.covers].compactMap({ $0 }) {
            replicas.formUnion(vector.entries.keys)
        }
        let table = replicas.sorted()
        for (index, replica) in table.enumerated() { replicaIndex[replica] = index }

        writer.write(byte: format)
        writer.write(varint: (batch.base != nil ? 1 : 0) | (batch.covers != nil ? 2 : 0))
        writer.write(varint: UInt64(table.count))
        for replica in table { writer.write(fixed64: replica.rawValue) }
        if let base = batch.base { write(base) }
        if let covers = batch.covers { write(covers) }

        batch.operations.withUnsafeBufferPointer { operations in
            var runs: [Range<Int>] = []
            var start = 0
            for index in operations.indices.dropFirst() where operations[index].id.replica != operations[start].id.replica {
                runs.append(start..<index)
                start = index
            }
            if !operations.isEmpty { runs.append(start..<operations.count) }
            writer.write(varint: UInt64(runs.count))
            for run in runs { write(UnsafeBufferPointer(rebasing: operations[run])) }
        }
        return writer.bytes
    }

    private mutating func write(_ vector: VersionVector) {
        let entries = vector.sortedEntries
        writer.write(varint: UInt64(entries.count))
        for entry in entries {
            writer.write(varint: UInt64(replicaIndex[entry.replica]!))
            writer.write(varint: entry.seq)
        }
    }

    private mutating func write(_ run: UnsafeBufferPointer<Op>) {
        let author = run[0].id.replica
        writer.write(varint: UInt64(replicaIndex[author]!))
        writer.write(varint: UInt64(run.count))
        var previousSeq: UInt64 = 0
        var previousLamport: UInt64 = 0
        var previousItem: ItemID?
        // Fields are read through the buffer rather than `for op in run`: copying each `Op` out
        // retained its payload's arrays, a third of the encoding's time.
        for index in run.indices {
            let seq = run[index].id.seq
            let lamport = run[index].lamport
            var head = run[index].payload.kind.rawValue
            if seq == previousSeq &+ 1 { head |= OpHead.seqNext }
            if lamport == previousLamport &+ 1 { head |= OpHead.lamportNext }
            let item = run[index].payload.item
            if let item, item == previousItem { head |= OpHead.sameItem }
            // Format 2's same-shape flag is set in the head once the points are reached
            // (reading the payload's points here as well cost a retain per operation).
            let headAt = writer.count
            writer.write(byte: head)
            if head & OpHead.seqNext == 0 { writer.write(zigzag: Int64(bitPattern: seq &- previousSeq)) }
            if head & OpHead.lamportNext == 0 { writer.write(zigzag: Int64(bitPattern: lamport &- previousLamport)) }
            if let item, head & OpHead.sameItem == 0 {
                let creator = ReplicaID(item.high)
                // The short form shifts the low word left: only for words below 2^63 (found by
                // the operations fuzz target: an item id with the top bit set came back as
                // another item, so a relay could make its peers diverge).
                if creator == author, item.low < 1 << 63 {
                    writer.write(varint: item.low << 1)
                } else {
                    writer.write(varint: UInt64(replicaIndex[creator]!) << 1 | 1)
                    writer.write(varint: item.low)
                }
            }
            writePayload(run[index].payload, headAt: headAt)
            previousSeq = seq
            previousLamport = lamport
            previousItem = item
        }
    }

    private mutating func writePayload(_ payload: Payload, headAt: Int) {
        switch payload {
        case .beginStroke(let item, let start):
            write(start.color)
            writer.write(varint: UInt64(start.width))
            writer.write(lengthPrefixed: start.z.bytes)
            writePoints(start.points, of: item, headAt: headAt)
        case .appendPoints(let item, let points):
            writePoints(points, of: item, headAt: headAt)
        case .addSticker(_, let start):
            writer.write(bytes: start.asset.digest)
            writer.write(zigzag: start.position.x)
            writer.write(zigzag: start.position.y)
            writer.write(double: start.scale)
            writer.write(double: start.rotation)
            writer.write(lengthPrefixed: start.z.bytes)
        case .setItem(_, let field):
            writer.writeValue(of: field) { writer, point in
                writer.write(zigzag: point.x)
                writer.write(zigzag: point.y)
            }
        case .setBoard(let field):
            writer.writeValue(of: field)
        case .setLabel(let id, let label):
            writer.writeLabel(id, label)
        }
    }

    private mutating func write(_ color: Color8) {
        writer.write(color)
    }

    /// Where an item's next point run starts from: its last point so far in this batch.
    private func origin(of item: ItemID) -> GridPoint {
        item == lastPointItem ? lastPointValue : lastPoint[item] ?? GridPoint(x: 0, y: 0)
    }

    /// Records the end of an item's points. A stroke's runs of points usually follow each other:
    /// the last item's end point is kept beside the dictionary, which is then touched only when
    /// the item changes.
    private mutating func noteEnd(_ last: GridPoint, of item: ItemID) {
        if item != lastPointItem, let previous = lastPointItem { lastPoint[previous] = lastPointValue }
        lastPointItem = item
        lastPointValue = last
    }

    private static func shift(of points: [GridPoint], from origin: GridPoint) -> Int {
        var combined: Int64 = 0
        var previous = origin
        for point in points {
            combined |= (point.x &- previous.x) | (point.y &- previous.y)
            previous = point
        }
        return combined == 0 ? 0 : min(combined.trailingZeroBitCount, 32)
    }

    /// Format 2's shape of a point run: the count, the shared shift, and the bits the widest
    /// packed delta (every one after the first) needs.
    private func pointShape(_ points: [GridPoint], of item: ItemID) -> PointShape? {
        PointShape.measure(points, from: origin(of: item), packingFirst: false)
    }

    private mutating func writePoints(_ points: [GridPoint], of item: ItemID, headAt: Int) {
        guard format >= 2, let shape = pointShape(points, of: item) else { return write(points, of: item) }
        let same = shape == lastShape
        if same { writer.setBits(OpHead.samePointShape, at: headAt) }
        write(points, of: item, shape: shape, sameShape: same)
        lastShape = shape
    }

    /// Format 2: count, shift and width (or nothing when the head says "same shape"), the first
    /// delta as varints, then the packed deltas.
    private mutating func write(_ points: [GridPoint], of item: ItemID, shape: PointShape, sameShape: Bool) {
        if !sameShape {
            writer.write(varint: UInt64(shape.count))
            writer.write(byte: shape.shift)
            if shape.count > 1 { writer.write(byte: shape.width) }
        }
        let shift = Int64(shape.shift)
        let origin = origin(of: item)
        writer.write(zigzag: (points[0].x &- origin.x) >> shift)
        writer.write(zigzag: (points[0].y &- origin.y) >> shift)
        if points.count > 1 {
            var bits = BitPacker(width: Int(shape.width))
            for index in points.indices.dropFirst() {
                bits.append(zigzag((points[index].x &- points[index - 1].x) >> shift), to: &writer)
                bits.append(zigzag((points[index].y &- points[index - 1].y) >> shift), to: &writer)
            }
            bits.finish(to: &writer)
        }
        noteEnd(points[points.count - 1], of: item)
    }

    /// Format 1: count, shift, then every delta as varints.
    private mutating func write(_ points: [GridPoint], of item: ItemID) {
        writer.write(varint: UInt64(points.count))
        guard let last = points.last else { return }
        let origin = origin(of: item)
        // Two passes over the points instead of an array of deltas per operation: the common
        // shift of every delta, then the deltas themselves.
        let shift = Self.shift(of: points, from: origin)
        writer.write(byte: UInt8(shift))
        var previous = origin
        for point in points {
            writer.write(zigzag: (point.x &- previous.x) >> Int64(shift))
            writer.write(zigzag: (point.y &- previous.y) >> Int64(shift))
            previous = point
        }
        noteEnd(last, of: item)
    }
}
