import BoardModel

// Linked batches (format 3): live operations encoded against what one direction of one
// connection has already carried. Both ends keep the same `BatchLink` — the sender updates it
// as it encodes, the receiver as it decodes, and a connection delivers batches in order — so a
// batch can leave out what the receiver can work out: which replica wrote it (a per-link table
// instead of 8-byte ids), its sequence number and Lamport clock (one more than the link's
// previous), its item (the link's previous item), a point run's shape, and where its points
// start (where the same item's points or position ended on this link). A one-operation live
// batch, which every live edit is, takes 2 bytes plus what changed, against about 20 for a
// self-contained format 2 batch. docs/PROTOCOL.md ("Linked batches") has the table.
//
//   format    u8 = 3
//   ops       one or more, until the end of the batch:
//   head      u8: kind (low 4 bits) | 0x10 seq = the author's previous on this link + 1
//                 | 0x20 item = the link's previous item | 0x40 lamport = link's previous + 1
//                 | 0x80 an extension byte follows
//   [ext]     u8: 0x01 the author changes: a replica reference follows | 0x02 a point shape
//                 follows (otherwise the link's previous shape) | other bits zero
//   [author]  replica reference: varint index into the link's table; the table's count means
//             "a new replica", whose id follows as fixed64 and joins the table
//   [seq]     zigzag delta from the author's previous sequence number on this link (0 at first)
//   [lamport] zigzag delta from the link's previous Lamport clock (0 at first)
//   [item]    v = low << 1 (created by the author), or v = reference << 1 | 1 (created by the
//             referenced replica; a new one's id follows), then the low word
//   payload   as format 2, except: a point run packs every delta when the link knows where the
//             item's points ended (else the first is from the origin, as varints, as in format
//             2); a position (a sticker's start, a move) is a zigzag delta from the item's last
//             point or position on this link (else from the origin).
//
// The link's memory is bounded: at most `maxReplicas` replicas (a batch that would need more
// is sent self-contained in format 2 instead) and `maxItems` remembered coordinates (the table
// keeps only the two latest items', on both ends alike, when one more item would exceed it).

/// What one direction of a connection has carried: the state a linked batch (format 3) is
/// encoded and decoded against. A sender keeps one per peer and a receiver one per peer; each
/// starts empty with the connection. After a decoding error the link is broken (the rest of the
/// stream cannot be read; a session closes).
public struct BatchLink: Sendable {
    /// The batch format a linked batch starts with.
    public static let format: UInt8 = 3
    /// Replicas a link names (a batch that needs more goes self-contained).
    public static let maxReplicas = 4_096
    /// Items whose last coordinate a link remembers.
    public static let maxItems = 16_384

    var replicas: [ReplicaID] = []
    var index: [ReplicaID: Int] = [:]
    var lastSeq: [UInt64] = []
    var author: Int?
    var lamport: UInt64 = 0
    var item: ItemID?
    var shape: PointShape?
    /// Items' last coordinates, except the item written last, kept beside (a drag or a stroke
    /// touches one item many times in a row: no hashing then).
    var coordinates: [ItemID: GridPoint] = [:]
    var hotItem: ItemID?
    var hotPoint = GridPoint(x: 0, y: 0)
    public private(set) var isBroken = false

    public init() {}

    /// Replicas the link has named so far.
    public var replicaCount: Int { replicas.count }

    /// The last coordinate the link carried for `item`.
    func coordinate(of item: ItemID) -> GridPoint? {
        item == hotItem ? hotPoint : coordinates[item]
    }

    mutating func remember(_ point: GridPoint, of item: ItemID) {
        if item != hotItem, let previous = hotItem {
            // Past its bound the table keeps only this entry (and the hot one), on both ends alike.
            if coordinates.updateValue(hotPoint, forKey: previous) == nil, coordinates.count > BatchLink.maxItems {
                coordinates.removeAll(keepingCapacity: true)
                coordinates[previous] = hotPoint
            }
        }
        hotItem = item
        hotPoint = point
    }

    /// The table index of `replica`, looking at the last author first.
    func indexOf(_ replica: ReplicaID) -> Int? {
        if let author, replicas[author] == replica { return author }
        return index[replica]
    }

    mutating func add(_ replica: ReplicaID) {
        index[replica] = replicas.count
        replicas.append(replica)
        lastSeq.append(0)
    }

    mutating func breakLink() {
        isBroken = true
    }
}

extension OperationBatch {
    /// These live operations as a linked batch (format 3), encoded against `link` and updating
    /// it. A batch with a base or covers vector, an empty one, or one that would name more
    /// replicas than a link holds is encoded self-contained (format 2) and leaves `link` as it was.
    public func encoded(linkedTo link: inout BatchLink) -> [UInt8] {
        precondition(!link.isBroken, "encoding against a broken link")
        guard base == nil, covers == nil, !operations.isEmpty, fitsLink(link) else { return encoded() }
        var writer = ByteWriter(capacity: 16 + operations.count * 12)
        writer.write(byte: BatchLink.format)
        operations.withUnsafeBufferPointer { ops in
            for index in ops.indices { LinkedCodec.write(ops[index], to: &writer, link: &link) }
        }
        return writer.bytes
    }

    /// Decodes a linked batch (format 3) against `link`, updating it, and validates every
    /// operation. Throws `CodecError` for malformed bytes or an invalid operation; the link is
    /// then broken, as the stream after such a batch cannot be read.
    public init(decoding bytes: [UInt8], link: inout BatchLink) throws {
        guard !link.isBroken else { throw CodecError.malformed("the link broke at an earlier batch", offset: 0) }
        var reader = ByteReader(bytes)
        do {
            let version = try reader.readByte()
            guard version == BatchLink.format else {
                // Self-contained batches may travel on a link too; they do not touch it.
                self = try OperationBatch(decoding: bytes)
                return
            }
            var operations: [Op] = []
            repeat {
                operations.append(try LinkedCodec.read(from: &reader, link: &link))
                guard operations.count <= OperationBatch.maxOperations else {
                    throw CodecError.limitExceeded("operations in batch", value: UInt64(operations.count),
                                                      limit: UInt64(OperationBatch.maxOperations), offset: reader.offset)
                }
            } while !reader.isAtEnd
            try OperationBatch.validate(operations)
            self.init(validated: operations)
        } catch {
            link.breakLink()
            throw error
        }
    }

    /// Whether the replicas this batch names fit in the link's table.
    private func fitsLink(_ link: BatchLink) -> Bool {
        // Each operation names at most two replicas: most batches cannot overflow the table.
        if link.replicas.count + 2 * operations.count <= BatchLink.maxReplicas { return true }
        var new: Set<ReplicaID> = []
        for op in operations {
            if link.index[op.id.replica] == nil { new.insert(op.id.replica) }
            if let item = op.payload.item, link.index[ReplicaID(item.high)] == nil { new.insert(ReplicaID(item.high)) }
        }
        return new.isEmpty || link.replicas.count + new.count <= BatchLink.maxReplicas
    }
}
