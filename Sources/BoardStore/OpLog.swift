import BoardCRDT
import BoardModel

/// The append-only operation log under `sync/oplog`: the source of truth of a package.
///
/// Layout: the 8-byte magic `BSOPLOG1`, then records. A record is `length: u32 LE`,
/// `crc32(payload): u32 LE`, then `payload`, an encoded `OperationBatch`. A record counts as
/// saved once `append` returns (the file is fsynced). Compaction rewrites the log as one record
/// holding the replica's full state, atomically.
public struct OpLog: Sendable {
    public static let magic: [UInt8] = Array("BSOPLOG1".utf8)
    /// A record larger than this is treated as damage, not allocated.
    public static let maxRecordSize = 256 << 20

    public let path: String
    public let fileSystem: any FileSystem
    /// Bytes in the log file.
    public private(set) var size: Int
    public private(set) var recordCount: Int

    /// What `open` found and did.
    public struct Recovery: Sendable, Equatable {
        /// Bytes of a torn last record that were cut off (never acknowledged as saved).
        public var truncatedBytes = 0
        public var truncatedReason: String?
        public var createdHeader = false
    }

    /// Opens (creating if missing) and reads every record. A torn or corrupt *last* record is cut
    /// off and reported; damage followed by more records is an error that changes nothing,
    /// because cutting there would lose records that were saved.
    public static func open(_ path: String, fileSystem: any FileSystem) throws -> (log: OpLog, batches: [OperationBatch], recovery: Recovery) {
        var recovery = Recovery()
        guard let existing = try fileSystem.fileSize(path), existing > 0 else {
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
        guard Array(bytes[0..<magic.count]) == magic else {
            throw StoreError.damagedLog(path: path, offset: 0, "not a BoardSync op log (bad magic)")
        }
        var batches: [OperationBatch] = []
        var offset = magic.count
        while offset < bytes.count {
            let remaining = bytes.count - offset
            let torn: String?
            if remaining < 8 {
                torn = "record header cut short"
            } else {
                let length = Int(readU32(bytes, offset))
                let crc = readU32(bytes, offset + 4)
                if length > maxRecordSize || length > remaining - 8 {
                    torn = "record of \(length) bytes runs past the end"
                } else {
                    let payload = Array(bytes[(offset + 8)..<(offset + 8 + length)])
                    if CRC32.checksum(payload) != crc {
                        if offset + 8 + length < bytes.count {
                            throw StoreError.damagedLog(path: path, offset: offset,
                                "record fails its checksum and \(bytes.count - offset - 8 - length) bytes of records follow it")
                        }
                        torn = "last record fails its checksum"
                    } else {
                        do {
                            batches.append(try OperationBatch(decoding: payload))
                        } catch let error as CodecError {
                            throw StoreError.damagedLog(path: path, offset: offset, "record does not decode: \(error)")
                        }
                        offset += 8 + length
                        continue
                    }
                }
            }
            recovery.truncatedReason = torn
            recovery.truncatedBytes = bytes.count - offset
            try fileSystem.truncateFile(path, to: offset)
            try fileSystem.syncFile(path)
            break
        }
        return (OpLog(path: path, fileSystem: fileSystem, size: offset, recordCount: batches.count), batches, recovery)
    }

    /// Appends one record and fsyncs: when this returns, the batch is saved.
    public mutating func append(_ batch: OperationBatch) throws {
        let payload = batch.encoded()
        try fileSystem.appendFile(path, OpLog.frame(payload))
        try fileSystem.syncFile(path)
        size += payload.count + 8
        recordCount += 1
    }

    /// Replaces the log with a single record holding `state` (a complete delta from the empty
    /// vector), atomically: a crash leaves the old log or the new one.
    public mutating func compact(to state: OperationBatch) throws {
        let record = OpLog.frame(state.encoded())
        try fileSystem.writeAtomically(path, OpLog.magic + record)
        size = OpLog.magic.count + record.count
        recordCount = 1
    }

    static func frame(_ payload: [UInt8]) -> [UInt8] {
        var record: [UInt8] = []
        record.reserveCapacity(payload.count + 8)
        let crc = CRC32.checksum(payload)
        for value in [UInt32(payload.count), crc] {
            for shift in stride(from: 0, to: 32, by: 8) { record.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
        }
        record += payload
        return record
    }

    private static func readU32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
    }
}
