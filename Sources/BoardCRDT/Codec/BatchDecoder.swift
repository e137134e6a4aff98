import BoardModel

/// Mirror of `BatchEncoder` (see the layout in OperationBatch+Binary.swift). Decodes the whole
/// batch into values and validates every operation before returning anything.
struct BatchDecoder {
    var reader: ByteReader
    private var table: [ReplicaID] = []
    private var lastPoint: [ItemID: GridPoint] = [:]
    private var format: UInt8 = OperationBatch.formatVersion
    private var lastShape: PointShape?

    init(reader: ByteReader) {
        self.reader = reader
    }

    mutating func decode() throws -> OperationBatch {
        let version = try reader.readByte()
        guard OperationBatch.readableFormats.contains(version) else { throw CodecError.unsupportedVersion(version) }
        format = version
        let flags = try reader.readVarint()
        guard flags & ~3 == 0 else { throw CodecError.malformed("unknown batch flags \(flags)", offset: reader.offset) }
        let replicaCount = try reader.readCount(max: OperationBatch.maxReplicas, minimumSize: 8, "replica count")
        table.reserveCapacity(replicaCount)
        for _ in 0..<replicaCount {
            let replica = ReplicaID(try reader.readFixed64())
            if let last = table.last, !(last < replica) {
                throw CodecError.malformed("replica table not sorted and unique", offset: reader.offset - 8)
            }
            table.append(replica)
        }
        let base = flags & 1 != 0 ? try readVector() : nil
        let covers = flags & 2 != 0 ? try readVector() : nil
        let runCount = try reader.readCount(max: OperationBatch.maxOperations, minimumSize: 3, "run count")
        var operations: [Op] = []
        var total = 0
        for _ in 0..<runCount {
            let author = try replica(at: try reader.readVarint())
            let count = try reader.readCount(max: OperationBatch.maxOperations, minimumSize: 1, "operation count")
            guard count > 0 else { throw CodecError.malformed("empty run", offset: reader.offset) }
            total += count
            guard total <= OperationBatch.maxOperations else {
                throw CodecError.limitExceeded("operations in batch", value: UInt64(total),
                                                  limit: UInt64(OperationBatch.maxOperations), offset: reader.offset)
            }
            try readRun(author: author, count: count, into: &operations)
        }
        guard reader.isAtEnd else { throw CodecError.malformed("\(reader.remaining) trailing bytes", offset: reader.offset) }
        try OperationBatch.validate(operations)
        return OperationBatch(validated: operations, base: base, covers: covers)
    }

    private func replica(at index: UInt64) throws -> ReplicaID {
        guard index < UInt64(table.count) else {
            throw CodecError.malformed("replica index \(index) outside table of \(table.count)", offset: reader.offset)
        }
        return table[Int(index)]
    }

    private mutating func readVector() throws -> VersionVector {
        let count = try reader.readCount(max: table.count, minimumSize: 2, "version vector size")
        var entries: [ReplicaID: UInt64] = [:]
        for _ in 0..<count {
            let replica = try replica(at: try reader.readVarint())
            let seq = try reader.readVarint(max: Op.maxCounter, "version vector entry")
            guard entries.updateValue(seq, forKey: replica) == nil else {
                throw CodecError.malformed("replica \(replica) twice in a version vector", offset: reader.offset)
            }
        }
        return VersionVector(entries)
    }

    private mutating func readRun(author: ReplicaID, count: Int, into operations: inout [Op]) throws {
        var previousSeq: UInt64 = 0
        var previousLamport: UInt64 = 0
        var previousItem: ItemID?
        for _ in 0..<count {
            let headOffset = reader.offset
            let head = try reader.readByte()
            guard let kind = OpHead.kind(head) else {
                throw CodecError.malformed("unknown operation head \(head)", offset: headOffset)
            }
            let sameShape = head & OpHead.samePointShape != 0
            if sameShape {
                guard format >= 2, kind == .beginStroke || kind == .appendPoints else {
                    throw CodecError.malformed("unknown operation head \(head)", offset: headOffset)
                }
                guard lastShape != nil else {
                    throw CodecError.malformed("same-shape flag on the batch's first point run", offset: headOffset)
                }
            }
            let seq = head & OpHead.seqNext != 0 ? previousSeq &+ 1 : previousSeq &+ UInt64(bitPattern: try reader.readZigzag())
            let lamport = head & OpHead.lamportNext != 0 ? previousLamport &+ 1 : previousLamport &+ UInt64(bitPattern: try reader.readZigzag())
            var item: ItemID?
            if !kind.isBoardKind {
                if head & OpHead.sameItem != 0 {
                    guard let previousItem else {
                        throw CodecError.malformed("same-item flag on the first item operation of a run", offset: headOffset)
                    }
                    item = previousItem
                } else {
                    let value = try reader.readVarint()
                    if value & 1 == 0 {
                        item = ItemID(high: author.rawValue, low: value >> 1)
                    } else {
                        item = ItemID(high: try replica(at: value >> 1).rawValue, low: try reader.readVarint())
                    }
                }
            } else if head & OpHead.sameItem != 0 {
                throw CodecError.malformed("same-item flag on a board operation", offset: headOffset)
            }
            let payload = try readPayload(kind, item: item, sameShape: sameShape)
            operations.append(Op(id: OpID(replica: author, seq: seq), lamport: lamport, payload: payload))
            previousSeq = seq
            previousLamport = lamport
            previousItem = item
        }
    }

    private mutating func readPayload(_ kind: OpKind, item: ItemID?, sameShape: Bool) throws -> Payload {
        func itemID() -> ItemID { item! }  // present for every item kind, checked by the caller
        switch kind {
        case .beginStroke:
            let color = try reader.readColor()
            let width = Int64(bitPattern: try reader.readVarint(max: UInt64(FixedPoint.limit), "stroke width"))
            let z = try reader.readZKey()
            let points = format >= 2 ? try readPackedPoints(of: itemID(), sameShape: sameShape) : try readPoints(of: itemID())
            return .beginStroke(itemID(), StrokeStart(color: color, width: width, z: z, points: points))
        case .appendPoints:
            let points = format >= 2 ? try readPackedPoints(of: itemID(), sameShape: sameShape) : try readPoints(of: itemID())
            return .appendPoints(itemID(), points)
        case .addSticker:
            let asset = try reader.readAsset()
            let position = try reader.readPoint()
            let scale = try reader.readDouble()
            let rotation = try reader.readDouble()
            let z = try reader.readZKey()
            return .addSticker(itemID(), StickerStart(asset: asset, position: position, scale: scale, rotation: rotation, z: z))
        default:
            return try reader.readValue(kind, of: item) { try $0.readPoint() }
        }
    }

    private mutating func readPoints(of item: ItemID) throws -> [GridPoint] {
        let count = try reader.readCount(max: Op.maxPoints, minimumSize: 2, "point count")
        guard count > 0 else { return [] }
        let shiftOffset = reader.offset
        let shift = try reader.readByte()
        guard shift <= 32 else { throw CodecError.malformed("point shift \(shift) over 32", offset: shiftOffset) }
        var previous = lastPoint[item] ?? GridPoint(x: 0, y: 0)
        var points: [GridPoint] = []
        points.reserveCapacity(count)
        for _ in 0..<count {
            // Wrapping arithmetic: hostile deltas give out-of-range values that validation rejects.
            let x = previous.x &+ (try reader.readZigzag() &<< Int64(shift))
            let y = previous.y &+ (try reader.readZigzag() &<< Int64(shift))
            previous = GridPoint(x: x, y: y)
            points.append(previous)
        }
        lastPoint[item] = previous
        return points
    }

    /// Format 2 (the layout in OperationBatch+Binary.swift): count, shift and width unless the
    /// head says "same shape as the previous run", the first delta as varints, then the others
    /// packed. The packed bytes are checked to be there before anything is allocated.
    private mutating func readPackedPoints(of item: ItemID, sameShape: Bool) throws -> [GridPoint] {
        let shape: PointShape
        if sameShape {
            shape = lastShape!  // checked with the head
        } else {
            let count = try reader.readCount(max: Op.maxPoints, minimumSize: 1, "point count")
            guard count > 0 else { return [] }
            let shiftOffset = reader.offset
            let shift = try reader.readByte()
            guard shift <= 32 else { throw CodecError.malformed("point shift \(shift) over 32", offset: shiftOffset) }
            var width: UInt8 = PointShape.minimumWidth
            if count > 1 {
                let widthOffset = reader.offset
                width = try reader.readByte()
                guard (PointShape.minimumWidth...64).contains(width) else {
                    throw CodecError.malformed("point width \(width) outside \(PointShape.minimumWidth)...64", offset: widthOffset)
                }
            }
            shape = PointShape(count: count, shift: shift, width: width)
        }
        lastShape = shape
        let shift = Int64(shape.shift)
        var previous = lastPoint[item] ?? GridPoint(x: 0, y: 0)
        // Wrapping arithmetic: hostile deltas give out-of-range values that validation rejects.
        previous = GridPoint(x: previous.x &+ (try reader.readZigzag() &<< shift),
                             y: previous.y &+ (try reader.readZigzag() &<< shift))
        let packedBits = (shape.count - 1) * 2 * Int(shape.width)
        let packedBytes = (packedBits + 7) / 8
        guard packedBytes <= reader.remaining else { throw CodecError.truncated(offset: reader.offset) }
        var points: [GridPoint] = []
        points.reserveCapacity(shape.count)
        points.append(previous)
        if shape.count > 1 {
            let bytes = try reader.readBytes(packedBytes)
            try bytes.withUnsafeBufferPointer { buffer in
                var unpacker = BitUnpacker(buffer, width: Int(shape.width))
                for _ in 1..<shape.count {
                    let dx = unzigzag(unpacker.next())
                    let dy = unzigzag(unpacker.next())
                    previous = GridPoint(x: previous.x &+ (dx &<< shift), y: previous.y &+ (dy &<< shift))
                    points.append(previous)
                }
                guard unpacker.paddingIsZero else {
                    throw CodecError.malformed("point padding bits are not zero", offset: reader.offset - 1)
                }
            }
        }
        lastPoint[item] = previous
        return points
    }

}

extension OperationBatch {
    /// Every decoded operation is valid, or the batch is refused naming the first that is not.
    static func validate(_ operations: [Op]) throws {
        for op in operations {
            do {
                try op.validate()
            } catch let error as OperationError {
                throw CodecError.invalidOperation(error.description)
            }
        }
    }
}

extension ByteReader {
    /// What the encoders write for a colour, a point (from the origin), an asset hash, a z key.
    mutating func readColor() throws -> Color8 {
        let bytes = try readBytes(4)
        let start = bytes.startIndex
        return Color8(red: bytes[start], green: bytes[start + 1], blue: bytes[start + 2], alpha: bytes[start + 3])
    }

    mutating func readPoint() throws -> GridPoint {
        GridPoint(x: try readZigzag(), y: try readZigzag())
    }

    mutating func readAsset() throws -> AssetHash {
        AssetHash(digest: try readBytes(32))!
    }

    mutating func readZKey() throws -> ZKey {
        let offset = self.offset
        guard let key = ZKey(bytes: try readLengthPrefixed(max: ZKey.maxLength, "z key length")) else {
            throw CodecError.malformed("z key is empty or ends in a zero byte", offset: offset)
        }
        return key
    }

    /// A label operation's payload, as `ByteWriter.writeLabel` writes it: one encoding per
    /// value (replicas strictly ascending, valid UTF-8, a presence byte of 0 or 1).
    mutating func readLabel() throws -> Payload {
        let id = LabelID(replica: ReplicaID(try readFixed64()), number: try readVarint(max: Op.maxCounter, "label number"))
        let presentOffset = offset
        switch try readByte() {
        case 0: return .setLabel(id, nil)
        case 1: break
        case let other: throw CodecError.malformed("label presence byte \(other) (0 or 1)", offset: presentOffset)
        }
        let textOffset = offset
        let bytes = try readLengthPrefixed(max: Label.maxTextBytes, "label text length")
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw CodecError.malformed("label text is not UTF-8", offset: textOffset)
        }
        let time = try readZigzag()
        let count = try readCount(max: Label.maxVersionEntries, minimumSize: 9, "label version size")
        var entries: [ReplicaID: UInt64] = [:]
        var previous: ReplicaID?
        for _ in 0..<count {
            let entryOffset = offset
            let replica = ReplicaID(try readFixed64())
            let seq = try readVarint(max: Op.maxCounter, "label version entry")
            guard previous.map({ $0 < replica }) ?? true, seq > 0 else {
                throw CodecError.malformed("label version entries out of order, repeated or zero", offset: entryOffset)
            }
            previous = replica
            entries[replica] = seq
        }
        return .setLabel(id, Label(text: text, version: VersionVector(entries), time: time))
    }

    /// A register write or a board field (every kind but the creations and point runs), as
    /// `ByteWriter.writeValue` writes it; `position` reads a point (from the origin in a
    /// self-contained batch, from the item's last coordinate on a link).
    mutating func readValue(_ kind: OpKind, of item: ItemID?, position: (inout ByteReader) throws -> GridPoint) throws -> Payload {
        func itemID() -> ItemID { item! }  // present for every item kind, checked by the callers
        switch kind {
        case .erase: return .setItem(itemID(), .exists(false))
        case .unerase: return .setItem(itemID(), .exists(true))
        case .color: return .setItem(itemID(), .color(try readColor()))
        case .width:
            return .setItem(itemID(), .width(Int64(bitPattern: try readVarint(max: UInt64(FixedPoint.limit), "stroke width"))))
        case .asset: return .setItem(itemID(), .asset(try readAsset()))
        case .position: return .setItem(itemID(), .position(try position(&self)))
        case .scale: return .setItem(itemID(), .scale(try readDouble()))
        case .rotation: return .setItem(itemID(), .rotation(try readDouble()))
        case .z: return .setItem(itemID(), .z(try readZKey()))
        case .noBackground: return .setBoard(.background(nil))
        case .background: return .setBoard(.background(try readAsset()))
        case .canvas:
            let width = try readVarint(max: UInt64(FixedPoint.limit), "canvas width")
            let height = try readVarint(max: UInt64(FixedPoint.limit), "canvas height")
            return .setBoard(.canvas(width: Int64(width), height: Int64(height)))
        case .label: return try readLabel()
        case .beginStroke, .appendPoints, .addSticker:
            preconditionFailure("\(kind) is read by its decoder")
        }
    }
}

/// Reads what `BitPacker` writes from a buffer whose length the caller checked: exactly enough
/// bytes for the values asked for.
struct BitUnpacker {
    let bytes: UnsafeBufferPointer<UInt8>
    let width: Int
    private var index = 0
    private var buffer: UInt64 = 0
    private var count = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>, width: Int) {
        self.bytes = bytes
        self.width = width
    }

    mutating func next() -> UInt64 {
        if width > 32 {
            let low = take(32)
            return low | take(width - 32) << 32
        }
        return take(width)
    }

    private mutating func take(_ bits: Int) -> UInt64 {
        while count < bits {
            buffer |= UInt64(bytes[index]) << UInt64(count)
            index += 1
            count += 8
        }
        let value = buffer & (bits == 64 ? ~0 : (1 << UInt64(bits)) - 1)
        buffer >>= UInt64(bits)
        count -= bits
        return value
    }

    /// The bits left in the last byte are zero (one encoding per batch).
    var paddingIsZero: Bool { buffer == 0 }
}
