import BoardCRDT
import BoardModel

/// What a consistent online backup of a package copies, taken on the package's owner thread
/// (a server's loop) in O(1): the op log's durable prefix. Every record in the first
/// `logBytes` bytes was synced, so every operation anyone was told is saved up to that moment is
/// in them; records appended later (or waiting for a group commit's sync) are not. The log is
/// append-only apart from compaction, which renames a whole new file into place: a copier that
/// opens the log file before the owner runs again (BoardNet's `BackupSource`) reads the same
/// bytes however long the copy takes. The images are the content-addressed files in
/// `sync/assets`, which are only ever added.
public struct BackupPoint: Sendable, Equatable {
    /// The package directory.
    public var path: String
    /// `sync/oplog` inside it.
    public var logPath: String
    /// The durable prefix of the op log, in bytes.
    public var logBytes: Int
    /// `sync/assets` inside it.
    public var assetsPath: String
}

extension BoardPackage {
    /// The op log's durable prefix, for a backup (see `BackupPoint`).
    public var backupPoint: BackupPoint {
        BackupPoint(path: path, logPath: Path.join(path, PackageLayout.opLog), logBytes: log.durableSize,
                    assetsPath: Path.join(path, PackageLayout.assets))
    }

    /// The backup point of a package nobody has open (its whole log; the caller reads the size
    /// from the file it opened).
    public static func backupPoint(ofClosedPackage path: String, logBytes: Int) -> BackupPoint {
        BackupPoint(path: path, logPath: Path.join(path, PackageLayout.opLog), logBytes: logBytes,
                    assetsPath: Path.join(path, PackageLayout.assets))
    }
}

extension OpLog {
    /// What a log's bytes hold, for backups and restores: how many bytes form whole records
    /// (a provably torn tail, never acknowledged, is left out), the records and operations in
    /// them, and the damage `open` would refuse, if any.
    public struct Check: Sendable, Equatable {
        public var validBytes: Int
        public var records: Int
        public var operations: Int
        /// Why `open` would refuse these bytes (nil: it would not).
        public var damage: String?
        /// The torn tail that was left out, if there was one.
        public var tornTail: String?
        /// Every image an operation in the valid bytes names (lower-case hex SHA-256): a
        /// sticker's, a replaced image, a background.
        public var images: Set<String> = []
    }

    public static func check(_ bytes: [UInt8]) -> Check {
        check(size: bytes.count) { offset, count in Array(bytes[offset..<(offset + count)]) }
    }

    /// The same check, streamed: the log is read through `read(offset, count)` (exactly
    /// `count` bytes, inside `size`) one record at a time, so what is held is one record at
    /// most (`maxRecordSize`), never the whole log (backups of large boards, restores).
    public static func check(size: Int, read: (_ offset: Int, _ count: Int) throws -> [UInt8]) rethrows -> Check {
        let head = try read(0, min(size, magic.count))
        guard size >= magic.count else {
            return Check(validBytes: 0, records: 0, operations: 0,
                         damage: magic.starts(with: head) ? nil : "not a BoardSync op log", tornTail: nil)
        }
        guard head == magic else {
            let legacy = head == legacyMagic
            return Check(validBytes: 0, records: 0, operations: 0,
                         damage: legacy ? "an op log in the first format (open and save the package once)" : "not a BoardSync op log (bad magic)", tornTail: nil)
        }
        var check = Check(validBytes: magic.count, records: 0, operations: 0, damage: nil, tornTail: nil)
        var offset = magic.count
        func damaged(_ why: String) -> Check {
            var result = check
            result.damage = "at byte \(offset): \(why) (\(size - offset) bytes from here on); run `board-sync repair` on the package to keep every record that still checks out"
            return result
        }
        func torn(_ why: String) -> Check {
            var result = check
            result.tornTail = why
            return result
        }
        while offset < size {
            let remaining = size - offset
            let header = try read(offset, min(headerSize, remaining))
            if header.allSatisfy({ $0 == 0 }) {
                // Zero bytes to the end: a file system that grew the file before the data landed.
                var scan = offset + header.count
                var zeros = true
                while zeros, scan < size {
                    let piece = try read(scan, min(1 << 20, size - scan))
                    zeros = piece.allSatisfy { $0 == 0 }
                    scan += piece.count
                }
                if zeros { return torn("\(remaining) zero bytes after the last record") }
            }
            guard remaining >= headerSize else { return torn("record header cut short") }
            let length = Int(readU32(header, 0))
            let payloadCRC = readU32(header, 4)
            guard CRC32.checksum(header[0..<8]) == readU32(header, 8) else { return damaged("record header fails its checksum") }
            guard length <= maxRecordSize else { return damaged("record claims \(length) bytes (over \(maxRecordSize))") }
            guard length <= remaining - headerSize else { return torn("record of \(length) bytes runs past the end") }
            let payload = try read(offset + headerSize, length)
            guard CRC32.checksum(payload) == payloadCRC else { return damaged("record fails its checksum") }
            do {
                let batch = try OperationBatch(decoding: payload)
                check.records += 1
                check.operations += batch.operations.count
                for operation in batch.operations { if let hash = operation.payload.asset { check.images.insert(hash.hex) } }
            } catch {
                return damaged("record does not decode: \(error)")
            }
            offset += headerSize + length
            check.validBytes = offset
        }
        return check
    }
}
