import BoardModel

// The binary encoding of operation batches, shared by the op log and the wire protocol.
// Layout (all integers LEB128 varints unless noted; docs/PROTOCOL.md has the full table):
//
//   version   u8 = 1
//   flags     bit 0: base vector follows, bit 1: covers vector follows
//   replicas  count, then each id as fixed64 little-endian (sorted, unique)
//   [base]    count, then (replica index, seq) pairs
//   [covers]  same
//   runs      count; each run is ops by one author: replica index, op count, ops
//   op        head u8: kind (low 4 bits) | 0x10 seq = previous + 1 | 0x20 same item as previous op
//                      | 0x40 lamport = previous + 1
//             [seq: zigzag delta from previous op of the run (0 before the first)]
//             [lamport: zigzag delta, likewise]
//             [item: v = index << 1 | tag; tag 0: creator is the run's author and v >> 1 is the
//                    low word; tag 1: creator is replica[v >> 1], low word follows]
//             payload by kind
//
// Point runs write a count, a shift s, then each point as zigzag (delta >> s) from the previous
// point of the same item in this batch (or from the origin): strokes on a coarse grid cost one
// byte per coordinate.

enum OpKind: UInt8 {
    case beginStroke = 0, appendPoints, addSticker, erase, unerase, color, width, asset
    case position, scale, rotation, z, noBackground, background, canvas
}

private enum Flag {
    static let seqNext: UInt8 = 0x10
    static let sameItem: UInt8 = 0x20
    static let lamportNext: UInt8 = 0x40
    static let kindMask: UInt8 = 0x0F
}

extension OperationBatch {
    public static let formatVersion: UInt8 = 1
    /// Operations in one batch.
    public static let maxOperations = 1 << 24
    /// Distinct replica ids in one batch.
    public static let maxReplicas = 1 << 20

    /// The compact binary form. The same batch always gives the same bytes.
    public func encoded() -> [UInt8] {
        var encoder = BatchEncoder(batch: self)
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
    var writer = ByteWriter(capacity: 256)
    var replicaIndex: [ReplicaID: Int] = [:]
    /// The end point of each item's points so far in this batch (deltas start there), except
    /// the item written last, whose end point is `lastPointValue`.
    var lastPoint: [ItemID: GridPoint] = [:]
    var lastPointItem: ItemID?
    var lastPointValue = GridPoint(x: 0, y: 0)

    init(batch: OperationBatch) {
        self.batch = batch
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

        writer.write(byte: OperationBatch.formatVersion)
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
            if seq == previousSeq &+ 1 { head |= Flag.seqNext }
            if lamport == previousLamport &+ 1 { head |= Flag.lamportNext }
            let item = run[index].payload.item
            if let item, item == previousItem { head |= Flag.sameItem }
            writer.write(byte: head)
            if head & Flag.seqNext == 0 { writer.write(zigzag: Int64(bitPattern: seq &- previousSeq)) }
            if head & Flag.lamportNext == 0 { writer.write(zigzag: Int64(bitPattern: lamport &- previousLamport)) }
            if let item, head & Flag.sameItem == 0 {
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
            writePayload(run[index].payload)
            previousSeq = seq
            previousLamport = lamport
            previousItem = item
        }
    }

    private mutating func writePayload(_ payload: Payload) {
        switch payload {
        case .beginStroke(let item, let start):
            write(start.color)
            writer.write(varint: UInt64(start.width))
            writer.write(lengthPrefixed: start.z.bytes)
            write(start.points, of: item)
        case .appendPoints(let item, let points):
            write(points, of: item)
        case .addSticker(_, let start):
            writer.write(bytes: start.asset.digest)
            writer.write(zigzag: start.position.x)
            writer.write(zigzag: start.position.y)
            writer.write(double: start.scale)
            writer.write(double: start.rotation)
            writer.write(lengthPrefixed: start.z.bytes)
        case .setItem(_, let field):
            switch field {
            case .exists: break
            case .color(let color): write(color)
            case .width(let width): writer.write(varint: UInt64(width))
            case .asset(let hash): writer.write(bytes: hash.digest)
            case .position(let point):
                writer.write(zigzag: point.x)
                writer.write(zigzag: point.y)
            case .scale(let value), .rotation(let value): writer.write(double: value)
            case .z(let key): writer.write(lengthPrefixed: key.bytes)
            }
        case .setBoard(let field):
            switch field {
            case .background(let hash): if let hash { writer.write(bytes: hash.digest) }
            case .canvas(let width, let height):
                writer.write(varint: UInt64(width))
                writer.write(varint: UInt64(height))
            }
        }
    }

    private mutating func write(_ color: Color8) {
        // Byte by byte: an array literal here was a heap allocation per stroke.
        writer.write(byte: color.red)
        writer.write(byte: color.green)
        writer.write(byte: color.blue)
        writer.write(byte: color.alpha)
    }

    private mutating func write(_ points: [GridPoint], of item: ItemID) {
        writer.write(varint: UInt64(points.count))
        guard let last = points.last else { return }
        // A stroke's runs of points usually follow each other: the last item's end point is
        // kept beside the dictionary, which is then touched only when the item changes.
        let origin: GridPoint
        if item == lastPointItem {
            origin = lastPointValue
        } else {
            if let previous = lastPointItem { lastPoint[previous] = lastPointValue }
            origin = lastPoint[item] ?? GridPoint(x: 0, y: 0)
        }
        // Two passes over the points instead of an array of deltas per operation: the common
        // shift of every delta, then the deltas themselves.
        var combined: Int64 = 0
        var previous = origin
        for point in points {
            combined |= (point.x &- previous.x) | (point.y &- previous.y)
            previous = point
        }
        let shift = combined == 0 ? 0 : min(combined.trailingZeroBitCount, 32)
        writer.write(byte: UInt8(shift))
        previous = origin
        for point in points {
            writer.write(zigzag: (point.x &- previous.x) >> Int64(shift))
            writer.write(zigzag: (point.y &- previous.y) >> Int64(shift))
            previous = point
        }
        lastPointItem = item
        lastPointValue = last
    }
}

extension Payload {
    fileprivate var kind: OpKind {
        switch self {
        case .beginStroke: return .beginStroke
        case .appendPoints: return .appendPoints
        case .addSticker: return .addSticker
        case .setItem(_, let field):
            switch field {
            case .exists(let value): return value ? .unerase : .erase
            case .color: return .color
            case .width: return .width
            case .asset: return .asset
            case .position: return .position
            case .scale: return .scale
            case .rotation: return .rotation
            case .z: return .z
            }
        case .setBoard(let field):
            switch field {
            case .background(let hash): return hash == nil ? .noBackground : .background
            case .canvas: return .canvas
            }
        }
    }
}
