import BoardModel

/// The encoder and decoder of linked batches, one operation at a time.
enum LinkedCodec {
    // MARK: Encoding

    static func write(_ op: Op, to writer: inout ByteWriter, link: inout BatchLink) {
        let payload = op.payload
        var head = payload.kind.rawValue
        var ext: UInt8 = 0
        let author = op.id.replica
        let knownAuthor = link.indexOf(author)
        if knownAuthor == nil || knownAuthor != link.author { ext |= OpHeadExtension.newAuthor }
        let previousSeq = knownAuthor.map { link.lastSeq[$0] } ?? 0
        if op.id.seq == previousSeq &+ 1 { head |= OpHead.seqNext }
        if op.lamport == link.lamport &+ 1 { head |= OpHead.lamportNext }
        let item = payload.item
        if let item, item == link.item { head |= OpHead.sameItem }
        var shape: PointShape?
        var origin: GridPoint?
        if let item, let points = payload.points {
            origin = link.coordinate(of: item)
            shape = PointShape.measure(points, from: origin ?? GridPoint(x: 0, y: 0), packingFirst: origin != nil)
            if shape == nil || shape != link.shape { ext |= OpHeadExtension.newShape }
        }
        if ext != 0 { head |= OpHead.extended }
        writer.write(byte: head)
        if ext != 0 { writer.write(byte: ext) }
        let authorIndex = ext & OpHeadExtension.newAuthor != 0 ? writeReference(author, tagged: false, to: &writer, link: &link) : knownAuthor!
        if head & OpHead.seqNext == 0 { writer.write(zigzag: Int64(bitPattern: op.id.seq &- previousSeq)) }
        if head & OpHead.lamportNext == 0 { writer.write(zigzag: Int64(bitPattern: op.lamport &- link.lamport)) }
        if let item, head & OpHead.sameItem == 0 {
            let creator = ReplicaID(item.high)
            if creator == author, item.low < 1 << 63 {
                writer.write(varint: item.low << 1)
            } else {
                writeReference(creator, tagged: true, to: &writer, link: &link)
                writer.write(varint: item.low)
            }
        }
        switch payload {
        case .beginStroke(let item, let start):
            writer.write(start.color)
            writer.write(varint: UInt64(start.width))
            writer.write(lengthPrefixed: start.z.bytes)
            writePoints(start.points, of: item, origin: origin, shape: shape, ext: ext, to: &writer, link: &link)
        case .appendPoints(let item, let points):
            writePoints(points, of: item, origin: origin, shape: shape, ext: ext, to: &writer, link: &link)
        case .addSticker(let item, let start):
            writer.write(bytes: start.asset.digest)
            writePosition(start.position, of: item, to: &writer, link: &link)
            writer.write(double: start.scale)
            writer.write(double: start.rotation)
            writer.write(lengthPrefixed: start.z.bytes)
        case .setItem(let item, let field):
            writer.writeValue(of: field) { writer, point in writePosition(point, of: item, to: &writer, link: &link) }
        case .setBoard(let field):
            writer.writeValue(of: field)
        case .setLabel(let id, let label):
            writer.writeLabel(id, label)
        }
        link.author = authorIndex
        link.lastSeq[authorIndex] = op.id.seq
        link.lamport = op.lamport
        if let item { link.item = item }
    }

    /// A replica as an index into the link's table, or the table's count and the id (it joins).
    /// `tagged`: shifted left past an item reference's tag bit, which is set.
    @discardableResult
    private static func writeReference(_ replica: ReplicaID, tagged: Bool, to writer: inout ByteWriter, link: inout BatchLink) -> Int {
        let known = link.indexOf(replica)
        let index = known ?? link.replicas.count
        writer.write(varint: tagged ? UInt64(index) << 1 | 1 : UInt64(index))
        if known == nil {
            writer.write(fixed64: replica.rawValue)
            link.add(replica)
        }
        return index
    }

    private static func writePosition(_ point: GridPoint, of item: ItemID, to writer: inout ByteWriter, link: inout BatchLink) {
        let from = link.coordinate(of: item) ?? GridPoint(x: 0, y: 0)
        writer.write(zigzag: point.x &- from.x)
        writer.write(zigzag: point.y &- from.y)
        link.remember(point, of: item)
    }

    private static func writePoints(_ points: [GridPoint], of item: ItemID, origin: GridPoint?, shape: PointShape?,
                                    ext: UInt8, to writer: inout ByteWriter, link: inout BatchLink) {
        guard let shape else {
            writer.write(varint: 0)  // an empty run: the shape says count 0 and nothing follows
            return
        }
        let packed = origin == nil ? shape.count - 1 : shape.count
        if ext & OpHeadExtension.newShape != 0 {
            writer.write(varint: UInt64(shape.count))
            writer.write(byte: shape.shift)
            if packed > 0 { writer.write(byte: shape.width) }
        }
        let shift = Int64(shape.shift)
        var previous = origin ?? GridPoint(x: 0, y: 0)
        var first = 0
        if origin == nil {
            writer.write(zigzag: (points[0].x &- previous.x) >> shift)
            writer.write(zigzag: (points[0].y &- previous.y) >> shift)
            previous = points[0]
            first = 1
        }
        if packed > 0 {
            var bits = BitPacker(width: Int(shape.width))
            for index in first..<points.count {
                bits.append(zigzag((points[index].x &- previous.x) >> shift), to: &writer)
                bits.append(zigzag((points[index].y &- previous.y) >> shift), to: &writer)
                previous = points[index]
            }
            bits.finish(to: &writer)
        }
        link.shape = shape
        link.remember(points[points.count - 1], of: item)
    }

    // MARK: Decoding

    static func read(from reader: inout ByteReader, link: inout BatchLink) throws -> Op {
        let headOffset = reader.offset
        let head = try reader.readByte()
        guard let kind = OpHead.kind(head) else {
            throw CodecError.malformed("unknown operation head \(head)", offset: headOffset)
        }
        var ext: UInt8 = 0
        if head & OpHead.extended != 0 {
            let extOffset = reader.offset
            ext = try reader.readByte()
            guard ext != 0, ext & ~(OpHeadExtension.newAuthor | OpHeadExtension.newShape) == 0 else {
                throw CodecError.malformed("unknown extension byte \(ext)", offset: extOffset)
            }
        }
        let isPoints = kind == .beginStroke || kind == .appendPoints
        if ext & OpHeadExtension.newShape != 0, !isPoints {
            throw CodecError.malformed("a point shape on an operation without points", offset: headOffset)
        }
        let authorIndex: Int
        if ext & OpHeadExtension.newAuthor != 0 {
            authorIndex = try readReference(try reader.readVarint(), from: &reader, link: &link)
        } else {
            guard let previous = link.author else {
                throw CodecError.malformed("the link's first operation does not name its author", offset: headOffset)
            }
            authorIndex = previous
        }
        let author = link.replicas[authorIndex]
        let previousSeq = link.lastSeq[authorIndex]
        let seq = head & OpHead.seqNext != 0 ? previousSeq &+ 1 : previousSeq &+ UInt64(bitPattern: try reader.readZigzag())
        let lamport = head & OpHead.lamportNext != 0 ? link.lamport &+ 1 : link.lamport &+ UInt64(bitPattern: try reader.readZigzag())
        var item: ItemID?
        if !kind.isBoardKind {
            if head & OpHead.sameItem != 0 {
                guard let previous = link.item else {
                    throw CodecError.malformed("same-item flag before the link carried an item", offset: headOffset)
                }
                item = previous
            } else {
                let value = try reader.readVarint()
                if value & 1 == 0 {
                    item = ItemID(high: author.rawValue, low: value >> 1)
                } else {
                    let creator = try readReference(value >> 1, from: &reader, link: &link)
                    item = ItemID(high: link.replicas[creator].rawValue, low: try reader.readVarint())
                }
            }
        } else if head & OpHead.sameItem != 0 {
            throw CodecError.malformed("same-item flag on a board operation", offset: headOffset)
        }
        func itemID() -> ItemID { item! }  // present for every item kind
        let payload: Payload
        switch kind {
        case .beginStroke:
            let color = try reader.readColor()
            let width = Int64(bitPattern: try reader.readVarint(max: UInt64(FixedPoint.limit), "stroke width"))
            let z = try reader.readZKey()
            let points = try readPoints(of: itemID(), newShape: ext & OpHeadExtension.newShape != 0, from: &reader, link: &link)
            payload = .beginStroke(itemID(), StrokeStart(color: color, width: width, z: z, points: points))
        case .appendPoints:
            payload = .appendPoints(itemID(), try readPoints(of: itemID(), newShape: ext & OpHeadExtension.newShape != 0, from: &reader, link: &link))
        case .addSticker:
            let asset = try reader.readAsset()
            let position = try readPosition(of: itemID(), from: &reader, link: &link)
            let scale = try reader.readDouble()
            let rotation = try reader.readDouble()
            let z = try reader.readZKey()
            payload = .addSticker(itemID(), StickerStart(asset: asset, position: position, scale: scale, rotation: rotation, z: z))
        default:
            payload = try reader.readValue(kind, of: item) { reader in try readPosition(of: itemID(), from: &reader, link: &link) }
        }
        link.author = authorIndex
        link.lastSeq[authorIndex] = seq
        link.lamport = lamport
        if let item { link.item = item }
        return Op(id: OpID(replica: author, seq: seq), lamport: lamport, payload: payload)
    }

    private static func readReference(_ index: UInt64, from reader: inout ByteReader, link: inout BatchLink) throws -> Int {
        let offset = reader.offset
        if index < UInt64(link.replicas.count) { return Int(index) }
        guard index == UInt64(link.replicas.count) else {
            throw CodecError.malformed("replica reference \(index) beyond the link's \(link.replicas.count)", offset: offset)
        }
        guard link.replicas.count < BatchLink.maxReplicas else {
            throw CodecError.limitExceeded("replicas on a link", value: index + 1, limit: UInt64(BatchLink.maxReplicas), offset: offset)
        }
        let replica = ReplicaID(try reader.readFixed64())
        guard link.index[replica] == nil else {
            throw CodecError.malformed("replica \(replica) joins the link a second time", offset: offset)
        }
        link.add(replica)
        return link.replicas.count - 1
    }

    private static func readPosition(of item: ItemID, from reader: inout ByteReader, link: inout BatchLink) throws -> GridPoint {
        let from = link.coordinate(of: item) ?? GridPoint(x: 0, y: 0)
        // Wrapping arithmetic: hostile deltas give out-of-range values that validation rejects.
        let point = GridPoint(x: from.x &+ (try reader.readZigzag()), y: from.y &+ (try reader.readZigzag()))
        link.remember(point, of: item)
        return point
    }

    private static func readPoints(of item: ItemID, newShape: Bool, from reader: inout ByteReader, link: inout BatchLink) throws -> [GridPoint] {
        let origin = link.coordinate(of: item)
        let shape: PointShape
        if newShape {
            let count = try reader.readCount(max: Op.maxPoints, minimumSize: 1, "point count")
            guard count > 0 else { return [] }
            let shiftOffset = reader.offset
            let shift = try reader.readByte()
            guard shift <= 32 else { throw CodecError.malformed("point shift \(shift) over 32", offset: shiftOffset) }
            var width = PointShape.minimumWidth
            if origin != nil || count > 1 {
                let widthOffset = reader.offset
                width = try reader.readByte()
                guard (PointShape.minimumWidth...64).contains(width) else {
                    throw CodecError.malformed("point width \(width) outside \(PointShape.minimumWidth)...64", offset: widthOffset)
                }
            }
            shape = PointShape(count: count, shift: shift, width: width)
        } else {
            guard let previous = link.shape else {
                throw CodecError.malformed("a point run without a shape before the link carried one", offset: reader.offset)
            }
            shape = previous
        }
        let shift = Int64(shape.shift)
        var previous = origin ?? GridPoint(x: 0, y: 0)
        var points: [GridPoint] = []
        var packed = shape.count
        if origin == nil {
            previous = GridPoint(x: previous.x &+ (try reader.readZigzag() &<< shift),
                                 y: previous.y &+ (try reader.readZigzag() &<< shift))
            points.append(previous)
            packed -= 1
        }
        if packed > 0 {
            let packedBytes = (packed * 2 * Int(shape.width) + 7) / 8
            guard packedBytes <= reader.remaining else { throw CodecError.truncated(offset: reader.offset) }
            points.reserveCapacity(shape.count)
            let bytes = Array(try reader.readBytes(packedBytes))
            try bytes.withUnsafeBufferPointer { buffer in
                var unpacker = BitUnpacker(buffer, width: Int(shape.width))
                for _ in 0..<packed {
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
        link.shape = shape
        link.remember(previous, of: item)
        return points
    }
}
