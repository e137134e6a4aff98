import BoardCRDT
import BoardModel

/// The append-only operation log under `sync/oplog`: the source of truth of a package.
///
/// Layout: the 8-byte magic `BSOPLOG2`, then records. A record is a 12-byte header —
/// `length: u32 LE`, `crc32(payload): u32 LE`, `crc32(first 8 header bytes): u32 LE` — then
/// `payload`, an encoded `OperationBatch`. A record counts as saved once `append` returns (the
/// file is fsynced). Compaction rewrites the log as one record holding the full state, atomically.
///
/// Damage is reported, never papered over. Opening cuts only a tail that is provably torn: a
/// record whose header checks out but whose payload runs past the end, a header cut short, or
/// zero bytes (a file system that grew the file before the data landed). Anything else that
/// fails a check — a header or payload checksum, a record that does not decode — is damage:
/// `open` refuses, naming the file and byte offset, and changes nothing; `salvage` (behind
/// `board-sync repair`) keeps every record that still checks out.
///
/// Logs in the first format (`BSOPLOG1`, 8-byte headers without their own checksum) are read
/// and rewritten in the current format when opened.
public struct OpLog: Sendable {
    public static let magic: [UInt8] = Array("BSOPLOG2".utf8)
    static let legacyMagic: [UInt8] = Array("BSOPLOG1".utf8)
    static let headerSize = 12
    /// A record larger than this is treated as damage, not allocated.
    public static let maxRecordSize = 256 << 20

    public let path: String
    public let fileSystem: any FileSystem
    /// Bytes in the log file.
    public private(set) var size: Int
    public private(set) var recordCount: Int
    /// Set when a failed append could not be rolled back: nothing more is written until the
    /// package is opened again (which cuts the torn record).
    public private(set) var broken: String?
    /// The error that left it broken, for the `writeFailed` every later append throws.
    private(set) var brokenBy: (any Error)?
    /// Records appended without a sync and not yet durable (`append(_:sync: false)`); a synced
    /// append, a `sync()` or a rewrite makes them durable.
    public private(set) var needsSync = false
    /// Bytes of the log known durable: every record in them was synced (what a backup may copy,
    /// `BoardPackage.backupPoint`). Below `size` only while appends wait for a sync.
    public private(set) var durableSize: Int

    init(path: String, fileSystem: any FileSystem, size: Int, recordCount: Int) {
        self.path = path
        self.fileSystem = fileSystem
        self.size = size
        self.recordCount = recordCount
        durableSize = size  // what was read from the file is on the disk
    }

    /// What `open` found and did.
    public struct Recovery: Sendable, Equatable {
        /// Bytes of a torn last record that were cut off (never acknowledged as saved).
        public var truncatedBytes = 0
        public var truncatedReason: String?
        public var createdHeader = false
        /// The log was in the first format and has been rewritten in the current one.
        public var upgraded = false
    }

    /// Opens (creating if missing) and reads every record. A provably torn tail is cut and
    /// reported; any other damage throws `StoreError.damagedLog` and changes nothing.
    /// `beforeCut` runs before a torn tail is cut (the package takes a new identity there, so
    /// the torn record's sequence number is never reused even by a crash mid-open).
    public static func open(_ path: String, fileSystem: any FileSystem,
                            beforeCut: () throws -> Void = {}) throws -> (log: OpLog, batches: [OperationBatch], recovery: Recovery) {
        var recovery = Recovery()
        guard let existing = try fileSystem.fileSize(path), existing > 0 else {
            // Missing, or empty after a crash during creation (nothing was ever saved to it).
            // The package refuses an empty log when its view shows saved operations.
            try fileSystem.writeFile(path, magic)
            try fileSystem.syncFile(path)
            try fileSystem.syncDirectory(Path.parent(of: path))
            recovery.createdHeader = true
            return (OpLog(path: path, fileSystem: fileSystem, size: magic.count, recordCount: 0), [], recovery)
        }
        let bytes = try fileSystem.readFile(path)
        if bytes.count < magic.count {
            guard magic.starts(with: bytes) else { throw StoreError.damagedLog(path: path, offset: 0, "not a BoardSync op log") }
            // A header torn by a crash during creation: nothing was ever saved after it.
            try fileSystem.writeFile(path, magic)
            try fileSystem.syncFile(path)
            recovery.createdHeader = true
            return (OpLog(path: path, fileSystem: fileSystem, size: magic.count, recordCount: 0), [], recovery)
        }
        let head = Array(bytes[0..<magic.count])
        guard head == magic || head == legacyMagic else {
            throw StoreError.damagedLog(path: path, offset: 0, "not a BoardSync op log (bad magic)")
        }
        let legacy = head == legacyMagic
        let parsed = legacy ? parseLegacy(bytes) : parse(bytes)
        switch parsed.end {
        case .damaged(let offset, let why):
            throw StoreError.damagedLog(path: path, offset: offset, why)
        case .torn(let offset, let why):
            recovery.truncatedReason = why
            recovery.truncatedBytes = bytes.count - offset
            try beforeCut()
            if !legacy {
                try fileSystem.truncateFile(path, to: offset)
                try fileSystem.syncFile(path)
            }
        case .clean:
            break
        }
        var log = OpLog(path: path, fileSystem: fileSystem, size: parsed.validBytes, recordCount: parsed.batches.count)
        if legacy {
            try log.rewrite(parsed.batches)
            recovery.upgraded = true
        }
        return (log, parsed.batches, recovery)
    }

    /// Whether `bytes` hold damage that `open` refuses (anything but a clean log or a torn tail).
    public static func isDamaged(_ bytes: [UInt8]) -> Bool {
        if bytes.count < magic.count { return !magic.starts(with: bytes) }
        let end: End
        switch Array(bytes[0..<magic.count]) {
        case magic: end = parse(bytes).end
        case legacyMagic: end = parseLegacy(bytes).end
        default: return true
        }
        if case .damaged = end { return true }
        return false
    }

    /// Every record that still checks out in a damaged log, and what was dropped. Scans past
    /// damage for the next header whose checksum, payload checksum and decoding all hold.
    public static func salvage(_ bytes: [UInt8]) -> (batches: [OperationBatch], dropped: [(offset: Int, length: Int, reason: String)]) {
        var batches: [OperationBatch] = []
        var dropped: [(offset: Int, length: Int, reason: String)] = []
        let legacy = bytes.starts(with: legacyMagic)
        var offset = bytes.starts(with: magic) || legacy ? magic.count : 0
        if offset == 0 { dropped.append((0, min(bytes.count, magic.count), "bad magic")) }
        if legacy {
            let parsed = parseLegacy(bytes)
            if case .damaged(let at, let why) = parsed.end { dropped.append((at, bytes.count - at, why)) }
            if case .torn(let at, let why) = parsed.end { dropped.append((at, bytes.count - at, why)) }
            return (parsed.batches, dropped)
        }
        while offset < bytes.count {
            switch record(in: bytes, at: offset) {
            case .record(let batch, let next):
                batches.append(batch)
                offset = next
            case .failed(let why, _):
                if bytes[offset...].allSatisfy({ $0 == 0 }) {
                    dropped.append((offset, bytes.count - offset, "zero bytes"))
                    return (batches, dropped)
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
        return (batches, dropped)
    }

    /// Appends one record and fsyncs: when this returns, the batch is saved. When the write or
    /// the fsync fails (a full disk, a read-only folder), the file is cut back to where it was,
    /// so no torn record stays in front of later appends; if even that fails, the log refuses
    /// further appends until it is opened again.
    /// Appends a record and (with `sync`, the default) makes it durable before returning.
    /// Without `sync` the record is written but durable only after the next `sync()` (or a
    /// synced append): group commit, one fsync for many merges.
    /// Returns where the record starts, its length and its payload checksum (which name it
    /// for the history index, `HistoryIndex`).
    @discardableResult
    public mutating func append(_ batch: OperationBatch, sync: Bool = true) throws -> RecordMark {
        try requireUsable()
        let record = OpLog.frame(batch.encoded())
        let mark = RecordMark(offset: size, length: record.count, crc: OpLog.readU32(record, 4))
        do {
            try fileSystem.appendFile(path, record)
            if sync { try fileSystem.syncFile(path) }
        } catch {
            do {
                try fileSystem.truncateFile(path, to: size)
                try fileSystem.syncFile(path)
            } catch let rollback {
                broken = "\(rollback)"
                brokenBy = rollback
            }
            throw error
        }
        size += record.count
        recordCount += 1
        needsSync = !sync  // a synced append made every record before it durable too
        if sync { durableSize = size }
        return mark
    }

    /// One record of the log: where it starts, its framed length and its payload checksum.
    public struct RecordMark: Sendable, Hashable {
        public var offset: Int
        public var length: Int
        public var crc: UInt32
    }

    /// Every record up to the first that fails a check, with its mark.
    static func records(in bytes: [UInt8]) -> [(mark: RecordMark, batch: OperationBatch)] {
        guard bytes.starts(with: magic) else { return [] }
        var result: [(mark: RecordMark, batch: OperationBatch)] = []
        var offset = magic.count
        while offset < bytes.count, case .record(let batch, let next) = record(in: bytes, at: offset) {
            result.append((RecordMark(offset: offset, length: next - offset, crc: readU32(bytes, offset + 4)), batch))
            offset = next
        }
        return result
    }

    /// Makes every appended record durable. A failure leaves the log unusable until the
    /// package is reopened (what reached the disk is unknown; reopening reads what did).
    public mutating func sync() throws {
        guard needsSync else { return }
        try requireUsable()
        do {
            try fileSystem.syncFile(path)
        } catch {
            broken = "fsync failed: \(error)"
            brokenBy = error
            throw error
        }
        needsSync = false
        durableSize = size
    }

    private func requireUsable() throws {
        if let broken { throw StoreError.writeFailed(path: path, "an earlier write failed and could not be undone (\(broken)); reopen the package",
                                                       cause: brokenBy) }
    }

    /// Replaces the log with a single record holding `state` (a complete delta from the empty
    /// vector), atomically: a crash leaves the old log or the new one.
    public mutating func compact(to state: OperationBatch) throws {
        try rewrite([state])
    }

    /// `compact(to:)` with the state's record framed already (`OpLog.frame(state.encoded())`).
    mutating func compact(toFramed record: [UInt8]) throws {
        let bytes = OpLog.magic + record
        try fileSystem.writeAtomically(path, bytes)
        size = bytes.count
        recordCount = 1
        durableSize = size
        broken = nil
        brokenBy = nil
        needsSync = false
    }

    /// Replaces the log with `batches`, one record each, atomically.
    mutating func rewrite(_ batches: [OperationBatch]) throws {
        var bytes = OpLog.magic
        for batch in batches { bytes += OpLog.frame(batch.encoded()) }
        try fileSystem.writeAtomically(path, bytes)
        size = bytes.count
        recordCount = batches.count
        durableSize = size
        broken = nil
        brokenBy = nil
        needsSync = false
    }

    static func frame(_ payload: [UInt8]) -> [UInt8] {
        var record: [UInt8] = []
        record.reserveCapacity(payload.count + headerSize)
        func put(_ value: UInt32) { ByteWriter.append(fixed32: value, to: &record) }
        put(UInt32(payload.count))
        put(CRC32.checksum(payload))
        put(CRC32.checksum(record))
        record += payload
        return record
    }

    // MARK: Parsing

    enum End: Equatable {
        case clean
        case torn(Int, String)
        case damaged(Int, String)
    }

    enum RecordResult {
        case record(OperationBatch, next: Int)
        /// `torn`: provably a tail cut short (header checks out, payload runs past the end).
        case failed(String, torn: Bool)
    }

    static func record(in bytes: [UInt8], at offset: Int) -> RecordResult {
        switch frameRecord(in: bytes, at: offset) {
        case .failed(let why, let torn):
            return .failed(why, torn: torn)
        case .payload(let range, let next):
            do {
                return .record(try OperationBatch(decoding: Array(bytes[range])), next: next)
            } catch {
                return .failed("record does not decode: \(error)", torn: false)
            }
        }
    }

    enum FrameResult {
        /// The payload's bytes (checksums hold) and where the next record starts.
        case payload(Range<Int>, next: Int)
        case failed(String, torn: Bool)
    }

    /// One record's framing checked (header checksum, length bound, payload checksum); the
    /// payload is not decoded. Shared with the history archive (`HistoryArchive`).
    static func frameRecord(in bytes: [UInt8], at offset: Int) -> FrameResult {
        let remaining = bytes.count - offset
        guard remaining >= headerSize else { return .failed("record header cut short", torn: true) }
        let length = Int(readU32(bytes, offset))
        let payloadCRC = readU32(bytes, offset + 4)
        guard CRC32.checksum(Array(bytes[offset..<(offset + 8)])) == readU32(bytes, offset + 8) else {
            return .failed("record header fails its checksum", torn: false)
        }
        guard length <= maxRecordSize else { return .failed("record claims \(length) bytes (over \(maxRecordSize))", torn: false) }
        guard length <= remaining - headerSize else {
            return .failed("record of \(length) bytes runs past the end", torn: true)
        }
        let range = (offset + headerSize)..<(offset + headerSize + length)
        guard CRC32.checksum(Array(bytes[range])) == payloadCRC else { return .failed("record fails its checksum", torn: false) }
        return .payload(range, next: range.upperBound)
    }

    static func parse(_ bytes: [UInt8]) -> (batches: [OperationBatch], validBytes: Int, end: End) {
        var batches: [OperationBatch] = []
        var offset = magic.count
        while offset < bytes.count {
            if bytes[offset...].allSatisfy({ $0 == 0 }) {
                return (batches, offset, .torn(offset, "\(bytes.count - offset) zero bytes after the last record"))
            }
            switch record(in: bytes, at: offset) {
            case .record(let batch, let next):
                batches.append(batch)
                offset = next
            case .failed(let why, let torn):
                if torn { return (batches, offset, .torn(offset, why)) }
                let after = bytes.count - offset
                return (batches, offset, .damaged(offset, "\(why) (\(after) bytes from here on); run `board-sync repair` on the package to keep every record that still checks out"))
            }
        }
        return (batches, offset, .clean)
    }

    /// The first format: `length u32, crc32 u32, payload`. Without a header checksum a torn tail
    /// cannot be told from a damaged length, so only a short header or zero bytes count as torn.
    static func parseLegacy(_ bytes: [UInt8]) -> (batches: [OperationBatch], validBytes: Int, end: End) {
        var batches: [OperationBatch] = []
        var offset = legacyMagic.count
        while offset < bytes.count {
            let remaining = bytes.count - offset
            if bytes[offset...].allSatisfy({ $0 == 0 }) || remaining < 8 {
                return (batches, offset, .torn(offset, "torn record header"))
            }
            let length = Int(readU32(bytes, offset))
            guard length <= maxRecordSize, length <= remaining - 8 else {
                return (batches, offset, .damaged(offset, "record of \(length) bytes runs past the end (this older log format cannot tell a torn write from damage); run `board-sync repair`"))
            }
            let payload = Array(bytes[(offset + 8)..<(offset + 8 + length)])
            guard CRC32.checksum(payload) == readU32(bytes, offset + 4), let batch = try? OperationBatch(decoding: payload) else {
                return (batches, offset, .damaged(offset, "record fails its checksum; run `board-sync repair`"))
            }
            batches.append(batch)
            offset += 8 + length
        }
        return (batches, offset, .clean)
    }

    static func readU32(_ bytes: [UInt8], _ offset: Int) -> UInt32 { ByteReader.fixed32(in: bytes, at: offset) }
}
