import BoardCRDT
import BoardModel

// Checkpoints stored as changes from the previous one (kind 5): consecutive checkpoints of a
// board share most of their operations (a checkpoint is the compacted full state, and most of
// the board survives 2,000 more operations), so the archive writes the first checkpoint (and
// every horizon) whole and each later one as the positions of the previous one's operations it
// no longer holds, the operations it adds and its `covers`. Readers (`parse`, `salvage`) give
// every checkpoint whole, so nothing above the archive sees deltas.
//
// Payload of a delta: kind u8 (5), time i64 LE, the CRC-32 (u32 LE) of the payload of the
// checkpoint or horizon record it changes (which must be the last such record before it in the
// file: anything else is damage), a varint count of removed positions and each as a varint gap
// from the previous one (positions in the base's operations, ascending), then an encoded
// `OperationBatch` of the added operations with the checkpoint's `covers`. The resolved
// state is the base's operations less the removed ones plus the added ones, in operation-id
// order (the order `Replica.fullState()` gives; a state in any other order is written whole).

extension HistoryArchive {
    static let checkpointDeltaKind: UInt8 = 5

    /// A checkpoint or horizon as the next delta refers to it: its whole state and the CRC-32 of
    /// its record's payload.
    struct Base: Sendable {
        var operations: [Op]
        var crc: UInt32
    }

    /// A delta as read, before it is resolved against its base.
    struct Delta: Sendable {
        var time: Int64?
        var baseCRC: UInt32
        var removed: [Int]
        var added: OperationBatch
        var offset: Int
    }

    /// The framed record of a checkpoint holding `state` (with `covers`): a delta from `base`
    /// when there is one and the state is in id order, else whole. Also the base the next
    /// checkpoint refers to.
    static func checkpointRecord(time: Int64?, state: [Op], covers: VersionVector?, after base: Base?) -> (bytes: [UInt8], base: Base) {
        let framed: [UInt8]
        let inOrder = zip(state, state.dropFirst()).allSatisfy { $0.id < $1.id }
        if let base, inOrder {
            var position: [OpID: Int] = [:]
            position.reserveCapacity(base.operations.count)
            for (index, op) in base.operations.enumerated() where position[op.id] == nil { position[op.id] = index }
            var kept = [Bool](repeating: false, count: base.operations.count)
            var added: [Op] = []
            for op in state {
                if let index = position[op.id], !kept[index], base.operations[index] == op { kept[index] = true } else { added.append(op) }
            }
            var writer = ByteWriter(capacity: 64)
            writer.write(byte: checkpointDeltaKind)
            writer.write(fixed64: UInt64(bitPattern: time ?? unknownTime))
            writer.write(fixed32: base.crc)
            let removed = kept.indices.filter { !kept[$0] }
            writer.write(varint: UInt64(removed.count))
            var previous = -1
            for index in removed {
                writer.write(varint: UInt64(index - previous - 1))
                previous = index
            }
            var payload = writer.bytes
            payload += OperationBatch(operations: added, covers: covers).encoded()
            framed = OpLog.frame(payload)
        } else {
            framed = record(.checkpoint, time: time, OperationBatch(operations: state, covers: covers))
        }
        return (framed, Base(operations: state, crc: OpLog.readU32(framed, 4)))
    }

    /// Decodes a delta's payload (after its kind and time).
    static func delta(_ bytes: ArraySlice<UInt8>, time: Int64?, offset: Int) throws -> Delta {
        var reader = ByteReader(Array(bytes))
        let crc = try reader.readFixed32()
        let count = try reader.readCount(max: OperationBatch.maxOperations, minimumSize: 1, "checkpoint delta removals")
        var removed: [Int] = []
        removed.reserveCapacity(count)
        var previous = -1
        for _ in 0..<count {
            let gap = try reader.readVarint(max: UInt64(OperationBatch.maxOperations), "checkpoint delta removal")
            previous += Int(gap) + 1
            removed.append(previous)
        }
        let added = try OperationBatch(decoding: Array(reader.bytes[reader.offset...]))
        return Delta(time: time, baseCRC: crc, removed: removed, added: added, offset: offset)
    }

    /// The checkpoint record a delta stands for, or why it cannot be resolved against `base`
    /// (the last checkpoint or horizon before it).
    static func resolve(_ delta: Delta, against base: Base?) -> Result<Record, ResolveError> {
        guard let base, base.crc == delta.baseCRC else {
            return .failure(ResolveError(description: "checkpoint delta whose base checkpoint is missing or changed"))
        }
        var removed = [Bool](repeating: false, count: base.operations.count)
        for index in delta.removed {
            guard index < removed.count else {
                return .failure(ResolveError(description: "checkpoint delta removes operation \(index) of a base of \(removed.count)"))
            }
            removed[index] = true
        }
        var state: [Op] = []
        state.reserveCapacity(base.operations.count - delta.removed.count + delta.added.operations.count)
        for (index, op) in base.operations.enumerated() where !removed[index] { state.append(op) }
        state += delta.added.operations
        state.sort { $0.id < $1.id }
        return .success(Record(kind: .checkpoint, time: delta.time, batch: OperationBatch(operations: state, covers: delta.added.covers),
                               offset: delta.offset))
    }

    struct ResolveError: Error { var description: String }

    /// The base a delta appended after `bytes` (an archive's committed bytes) would refer to:
    /// the last checkpoint or horizon, resolved; nil when there is none or the archive does not
    /// read cleanly (the next checkpoint is then written whole). Decodes only checkpoint and
    /// horizon records.
    static func lastBase(in bytes: [UInt8]) -> Base? {
        guard bytes.starts(with: magic) else { return nil }
        var base: Base?
        var offset = magic.count
        while offset < bytes.count {
            guard case .payload(let range, let next) = OpLog.frameRecord(in: bytes, at: offset), !range.isEmpty else { return nil }
            let kind = bytes[range.lowerBound]
            if kind == Kind.checkpoint.rawValue || kind == Kind.horizon.rawValue || kind == checkpointDeltaKind {
                switch record(in: bytes, at: offset) {
                case .records(let records, _):
                    guard let record = records.first else { return nil }
                    base = Base(operations: record.batch.operations, crc: OpLog.readU32(bytes, offset + 4))
                case .delta(let delta, _):
                    guard case .success(let record) = resolve(delta, against: base) else { return nil }
                    base = Base(operations: record.batch.operations, crc: OpLog.readU32(bytes, offset + 4))
                case .failed:
                    return nil
                }
            }
            offset = next
        }
        return base
    }
}
