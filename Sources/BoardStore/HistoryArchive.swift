import BoardCRDT
import BoardModel

/// The history archive under `sync/history`: every op-log record that compaction replaced, kept
/// in order, plus checkpoints of the board. The live log and the replica never read it; history
/// reads (`BoardHistory`) do.
///
/// Layout: the 8-byte magic `BSHIST01`, then records framed exactly as the op log's (`length`,
/// `crc32(payload)`, `crc32(header)`, payload; see `OpLog`). A payload is
///
///     kind  u8      1 = operations (an op-log record as it was), 2 = checkpoint,
///                   3 = horizon (first record of a pruned archive), 4 = segment (the
///                   records one compaction replaced, see `segmentPayload`)
///     time  i64 LE  milliseconds since 1970 when this package integrated the record
///                   (`Int64.min`: not known); metadata only, never used to decide anything
///     batch         an encoded `OperationBatch`
///
/// A segment (what compaction writes, and a rewrite after repair or pruning) holds several
/// operations records in one: after its kind and time (`Int64.min`), a count of records, then
/// per record its operation count (varint), flags (u8: 1 = a time follows, 2 = vectors follow),
/// its time as a zigzag varint delta from the previous record's time in the segment, and its
/// `base`/`covers` as a length-prefixed batch without operations; then one encoded
/// `OperationBatch` holding every record's operations in order (one replica table, sequence
/// numbers and clocks delta-coded across records). Parsing gives the records one by one, each
/// with the segment's offset; damage anywhere in a segment loses the whole segment on repair.
///
/// A checkpoint's batch holds the full state of the board after every operations record before
/// it (its `operations`), and in `covers` the largest sequence number of each author among
/// those records: a view of a version that covers it can start from the checkpoint.
///
/// Damage rules are the op log's: a torn tail (a compaction that crashed before the index named
/// the new size) is ignored; anything else that fails a check is damage, reported with the file
/// and byte offset, and `board-sync repair` keeps every record that still checks out.
public enum HistoryArchive {
    public static let magic: [UInt8] = Array("BSHIST01".utf8)
    /// Written where a record's time is not known.
    public static let unknownTime = Int64.min

    public enum Kind: UInt8, Sendable {
        case operations = 1
        case checkpoint = 2
        /// The first record of a pruned archive: the board at the horizon (`covers`), which
        /// stands for every operation it covers (`BoardPackage.pruneHistory(before:)`).
        case horizon = 3
        /// Several op-log records in one record (what compaction writes): see `segmentPayload`.
        case segment = 4
    }

    /// One decoded record and where it starts in the file.
    public struct Record: Sendable {
        public var kind: Kind
        /// Milliseconds since 1970, nil when not known.
        public var time: Int64?
        public var batch: OperationBatch
        public var offset: Int
    }

    /// The payload of one record.
    static func payload(_ kind: Kind, time: Int64?, _ batch: OperationBatch) -> [UInt8] {
        var writer = ByteWriter(capacity: 64)
        writer.write(byte: kind.rawValue)
        writer.write(fixed64: UInt64(bitPattern: time ?? unknownTime))
        var bytes = writer.bytes
        bytes += batch.encoded()
        return bytes
    }

    /// One framed record.
    static func record(_ kind: Kind, time: Int64?, _ batch: OperationBatch) -> [UInt8] {
        OpLog.frame(payload(kind, time: time, batch))
    }

    enum Parsed {
        /// One record of the file: one logical record, or a segment's several.
        case records([Record], next: Int)
        /// A checkpoint written as a change from the previous one (`checkpointRecord`), to be
        /// resolved against it.
        case delta(Delta, next: Int)
        case failed(String, torn: Bool)
    }

    static func record(in bytes: [UInt8], at offset: Int) -> Parsed {
        switch OpLog.frameRecord(in: bytes, at: offset) {
        case .failed(let why, let torn):
            return .failed(why, torn: torn)
        case .payload(let range, let next):
            guard range.count >= 9, let kind = Kind(rawValue: bytes[range.lowerBound]) ?? (bytes[range.lowerBound] == checkpointDeltaKind ? .checkpoint : nil) else {
                return .failed("history record of unknown kind or cut short", torn: false)
            }
            var reader = ByteReader(bytes, offset: range.lowerBound + 1)
            let raw = Int64(bitPattern: (try? reader.readFixed64()) ?? 0)
            do {
                if bytes[range.lowerBound] == checkpointDeltaKind {
                    return .delta(try delta(bytes[(range.lowerBound + 9)..<range.upperBound], time: raw == unknownTime ? nil : raw, offset: offset), next: next)
                }
                if kind == .segment {
                    return .records(try segmentRecords(bytes[(range.lowerBound + 9)..<range.upperBound], offset: offset), next: next)
                }
                let batch = try OperationBatch(decoding: Array(bytes[(range.lowerBound + 9)..<range.upperBound]))
                return .records([Record(kind: kind, time: raw == unknownTime ? nil : raw, batch: batch, offset: offset)], next: next)
            } catch {
                return .failed("history record does not decode: \(error)", torn: false)
            }
        }
    }

    /// Where reading stopped, and why.
    public enum End: Equatable, Sendable {
        case clean
        /// A tail cut short at this offset (a crash mid-append): ignored.
        case torn(Int, String)
        /// Damage at this offset: reading refuses and repair salvages.
        case damaged(Int, String)
    }

    /// Every record up to the first failure.
    public static func parse(_ bytes: [UInt8]) -> (records: [Record], validBytes: Int, end: End) {
        guard bytes.count >= magic.count else {
            if magic.starts(with: bytes) { return ([], bytes.count, bytes.isEmpty ? .clean : .torn(0, "header cut short")) }
            return ([], 0, .damaged(0, "not a BoardSync history archive"))
        }
        guard Array(bytes[0..<magic.count]) == magic else { return ([], 0, .damaged(0, "not a BoardSync history archive (bad magic)")) }
        var records: [Record] = []
        var base: Base?
        var offset = magic.count
        while offset < bytes.count {
            if bytes[offset...].allSatisfy({ $0 == 0 }) {
                return (records, offset, .torn(offset, "\(bytes.count - offset) zero bytes after the last record"))
            }
            switch record(in: bytes, at: offset) {
            case .records(let found, let next):
                if let first = found.first, first.kind == .checkpoint || first.kind == .horizon {
                    base = Base(operations: first.batch.operations, crc: OpLog.readU32(bytes, offset + 4))
                }
                records += found
                offset = next
            case .delta(let delta, let next):
                switch resolve(delta, against: base) {
                case .success(let checkpoint):
                    base = Base(operations: checkpoint.batch.operations, crc: OpLog.readU32(bytes, offset + 4))
                    records.append(checkpoint)
                    offset = next
                case .failure(let error):
                    return (records, offset, .damaged(offset, error.description))
                }
            case .failed(let why, let torn):
                if torn { return (records, offset, .torn(offset, why)) }
                return (records, offset, .damaged(offset, why))
            }
        }
        return (records, offset, .clean)
    }

    /// Whether `bytes` hold damage (anything but a clean archive or a torn tail).
    public static func isDamaged(_ bytes: [UInt8]) -> Bool {
        if case .damaged = parse(bytes).end { return true }
        return false
    }

    /// Every record that still checks out, and what was dropped: scans past damage for the next
    /// record whose framing and decoding hold (as `OpLog.salvage`).
    public static func salvage(_ bytes: [UInt8]) -> (records: [Record], dropped: [(offset: Int, length: Int, reason: String)]) {
        var records: [Record] = []
        var dropped: [(offset: Int, length: Int, reason: String)] = []
        let offset0 = min(bytes.count, magic.count)
        if !bytes.starts(with: magic) && !bytes.isEmpty { dropped.append((0, offset0, "bad magic")) }
        var offset = offset0
        var base: Base?
        while offset < bytes.count {
            switch record(in: bytes, at: offset) {
            case .records(let found, let next):
                if let first = found.first, first.kind == .checkpoint || first.kind == .horizon {
                    base = Base(operations: first.batch.operations, crc: OpLog.readU32(bytes, offset + 4))
                }
                records += found
                offset = next
            case .delta(let delta, let next):
                // A delta whose base was lost is dropped (the views before the next whole
                // checkpoint start from an earlier one); the rewrite writes checkpoints anew.
                if case .success(let checkpoint) = resolve(delta, against: base) {
                    base = Base(operations: checkpoint.batch.operations, crc: OpLog.readU32(bytes, offset + 4))
                    records.append(checkpoint)
                } else {
                    dropped.append((offset, next - offset, "checkpoint delta whose base checkpoint is missing or changed"))
                }
                offset = next
            case .failed(let why, _):
                if bytes[offset...].allSatisfy({ $0 == 0 }) {
                    dropped.append((offset, bytes.count - offset, "zero bytes"))
                    return (records, dropped)
                }
                var next = offset + 1
                while next < bytes.count {
                    switch record(in: bytes, at: next) {
                    case .records, .delta: break
                    case .failed: next += 1; continue
                    }
                    break
                }
                dropped.append((offset, next - offset, why))
                offset = next
            }
        }
        return (records, dropped)
    }

    /// The archive's bytes for `records` (a rewrite after salvage or pruning): consecutive
    /// operations records go into segments.
    static func encode(_ records: [Record]) -> [UInt8] {
        var bytes = magic
        var run: [(batch: OperationBatch, time: Int64?)] = []
        var base: Base?
        for record in records {
            // (`parse` gives a segment's records as operations records; `.segment` is never a
            // record's kind, and would be written as one here.)
            if record.kind == .operations || record.kind == .segment {
                run.append((record.batch, record.time))
                continue
            }
            bytes += segments(run)
            run = []
            switch record.kind {
            case .checkpoint:
                // Each checkpoint after the first (or a horizon) as a change from the one before.
                let written = checkpointRecord(time: record.time, state: record.batch.operations, covers: record.batch.covers, after: base)
                bytes += written.bytes
                base = written.base
            case .horizon:
                let framed = Self.record(record.kind, time: record.time, record.batch)
                bytes += framed
                base = Base(operations: record.batch.operations, crc: OpLog.readU32(framed, 4))
            default:
                bytes += Self.record(record.kind, time: record.time, record.batch)
            }
        }
        return bytes + segments(run)
    }

    /// Framed segments holding `records` in order: one, or halves of the run while a segment
    /// would hold more operations than a batch decodes (`OperationBatch.maxOperations`) or pass
    /// half the record size limit. A single op-log record always fits one segment (its batch
    /// was within both limits in the log).
    static func segments(_ records: [(batch: OperationBatch, time: Int64?)]) -> [UInt8] {
        guard !records.isEmpty else { return [] }
        func split() -> [UInt8] {
            let half = records.count / 2
            return segments(Array(records[..<half])) + segments(Array(records[half...]))
        }
        if records.count > 1 {
            let operations = records.reduce(0) { $0 + $1.batch.operations.count }
            if operations > OperationBatch.maxOperations || records.count > OperationBatch.maxOperations { return split() }
        }
        let payload = segmentPayload(records)
        if payload.count > OpLog.maxRecordSize / 2, records.count > 1 { return split() }
        return OpLog.frame(payload)
    }
}

extension HistoryArchive {
    /// The payload of a segment: several op-log records' operations in one encoded batch (one
    /// replica table, sequence numbers and clocks delta-coded across records), after a table of
    /// the records: each one's operation count, time and (for a complete delta) base and covers.
    static func segmentPayload(_ records: [(batch: OperationBatch, time: Int64?)]) -> [UInt8] {
        var writer = ByteWriter(capacity: 64 + records.count * 4)
        writer.write(byte: Kind.segment.rawValue)
        writer.write(fixed64: UInt64(bitPattern: unknownTime))
        writer.write(varint: UInt64(records.count))
        var previous: Int64 = 0
        for record in records {
            writer.write(varint: UInt64(record.batch.operations.count))
            let vectors = record.batch.base != nil || record.batch.covers != nil
            writer.write(byte: (record.time != nil ? 1 : 0) | (vectors ? 2 : 0))
            if let time = record.time {
                writer.write(zigzag: time &- previous)
                previous = time
            }
            if vectors {
                writer.write(lengthPrefixed: OperationBatch(operations: [], base: record.batch.base, covers: record.batch.covers).encoded())
            }
        }
        var bytes = writer.bytes
        bytes += OperationBatch(operations: records.flatMap(\.batch.operations)).encoded()
        return bytes
    }

    /// The records a segment's payload holds (after its kind and time), each at `offset`.
    static func segmentRecords(_ bytes: ArraySlice<UInt8>, offset: Int) throws -> [Record] {
        var reader = ByteReader(Array(bytes))
        let count = try reader.readCount(max: OperationBatch.maxOperations, minimumSize: 2, "segment records")
        var table: [(count: Int, time: Int64?, base: VersionVector?, covers: VersionVector?)] = []
        table.reserveCapacity(count)
        var previous: Int64 = 0
        var total = 0
        for _ in 0..<count {
            let operations = try reader.readCount(max: OperationBatch.maxOperations, minimumSize: 0, "segment record operations")
            total += operations
            guard total <= OperationBatch.maxOperations else { throw CodecError.malformed("segment of over \(OperationBatch.maxOperations) operations", offset: reader.offset) }
            let flags = try reader.readByte()
            guard flags & ~3 == 0 else { throw CodecError.malformed("unknown segment record flags \(flags)", offset: reader.offset) }
            var time: Int64?
            if flags & 1 != 0 {
                previous = previous &+ (try reader.readZigzag())
                time = previous
            }
            var base: VersionVector?, covers: VersionVector?
            if flags & 2 != 0 {
                let vectors = try OperationBatch(decoding: try reader.readLengthPrefixed(max: reader.remaining, "segment record vectors"))
                guard vectors.operations.isEmpty else { throw CodecError.malformed("segment record vectors hold operations", offset: reader.offset) }
                (base, covers) = (vectors.base, vectors.covers)
            }
            table.append((operations, time, base, covers))
        }
        let all = try OperationBatch(decoding: Array(reader.bytes[reader.offset...])).operations
        guard all.count == total else { throw CodecError.malformed("segment table counts \(total) operations, its batch holds \(all.count)", offset: reader.offset) }
        var records: [Record] = []
        records.reserveCapacity(count)
        var start = 0
        for entry in table {
            let batch = OperationBatch(operations: Array(all[start..<(start + entry.count)]), base: entry.base, covers: entry.covers)
            records.append(Record(kind: .operations, time: entry.time, batch: batch, offset: offset))
            start += entry.count
        }
        return records
    }
}
