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
        guard bytes.count >= magic.count else {
            return Check(validBytes: 0, records: 0, operations: 0,
                         damage: magic.starts(with: bytes) ? nil : "not a BoardSync op log", tornTail: nil)
        }
        guard bytes.starts(with: magic) else {
            let legacy = bytes.starts(with: legacyMagic)
            return Check(validBytes: 0, records: 0, operations: 0,
                         damage: legacy ? "an op log in the first format (open and save the package once)" : "not a BoardSync op log (bad magic)", tornTail: nil)
        }
        let parsed = parse(bytes)
        var check = Check(validBytes: parsed.validBytes, records: parsed.batches.count,
                          operations: parsed.batches.reduce(0) { $0 + $1.operations.count }, damage: nil, tornTail: nil)
        for batch in parsed.batches {
            for operation in batch.operations { if let hash = operation.payload.asset { check.images.insert(hash.hex) } }
        }
        switch parsed.end {
        case .clean: break
        case .torn(_, let why): check.tornTail = why
        case .damaged(let offset, let why): check.damage = "at byte \(offset): \(why)"
        }
        return check
    }
}
