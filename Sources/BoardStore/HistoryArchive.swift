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
///                   3 = horizon (first record of a pruned archive)
///     time  i64 LE  milliseconds since 1970 when this package integrated the record
///                   (`Int64.min`: not known); metadata only, never used to decide anything
///     batch         an encoded `OperationBatch`
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
        case record(Record, next: Int)
        case failed(String, torn: Bool)
    }

    static func record(in bytes: [UInt8], at offset: Int) -> Parsed {
        switch OpLog.frameRecord(in: bytes, at: offset) {
        case .failed(let why, let torn):
            return .failed(why, torn: torn)
        case .payload(let range, let next):
            guard range.count >= 9, let kind = Kind(rawValue: bytes[range.lowerBound]) else {
                return .failed("history record of unknown kind or cut short", torn: false)
            }
            var reader = ByteReader(bytes, offset: range.lowerBound + 1)
            let raw = Int64(bitPattern: (try? reader.readFixed64()) ?? 0)
            do {
                let batch = try OperationBatch(decoding: Array(bytes[(range.lowerBound + 9)..<range.upperBound]))
                return .record(Record(kind: kind, time: raw == unknownTime ? nil : raw, batch: batch, offset: offset), next: next)
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
        var offset = magic.count
        while offset < bytes.count {
            if bytes[offset...].allSatisfy({ $0 == 0 }) {
                return (records, offset, .torn(offset, "\(bytes.count - offset) zero bytes after the last record"))
            }
            switch record(in: bytes, at: offset) {
            case .record(let record, let next):
                records.append(record)
                offset = next
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
        while offset < bytes.count {
            switch record(in: bytes, at: offset) {
            case .record(let record, let next):
                records.append(record)
                offset = next
            case .failed(let why, _):
                if bytes[offset...].allSatisfy({ $0 == 0 }) {
                    dropped.append((offset, bytes.count - offset, "zero bytes"))
                    return (records, dropped)
                }
                var next = offset + 1
                while next < bytes.count {
                    if case .record = record(in: bytes, at: next) { break }
                    next += 1
                }
                dropped.append((offset, next - offset, why))
                offset = next
            }
        }
        return (records, dropped)
    }

    /// The archive's bytes for `records` (a rewrite after salvage).
    static func encode(_ records: [Record]) -> [UInt8] {
        var bytes = magic
        for record in records { bytes += Self.record(record.kind, time: record.time, record.batch) }
        return bytes
    }
}
