import BoardCRDT
import BoardModel
import Foundation

// MARK: Authors (servers with access control)

extension BoardPackage {
    /// The largest `sync/authors` that loads. A hub binds at most
    /// `BoardHub.defaultMaxAuthorsPerBoard` (65,536) replicas per board, each line at most 82
    /// bytes (16 hex digits, a space, a 64-byte subject, a newline): 5.4 MB, well below it.
    public static let maxAuthorsFileBytes = 8 << 20

    /// Which token subject owns each replica id on this board (`sync/authors`: one line per
    /// binding, `<replica hex> <subject>`, appended and synced before the replica's first
    /// operation is accepted). An incomplete last line (a torn append) never took effect: it is
    /// cut off here, so the next binding starts on a line of its own.
    public func loadAuthors() throws -> [ReplicaID: String] {
        let path = Path.join(self.path, PackageLayout.authors)
        guard let size = try fileSystem.fileSize(path) else { return [:] }
        guard size <= Self.maxAuthorsFileBytes else {
            throw StoreError.damagedFile(path: path, "\(size) bytes is more than any board's authors take (\(Self.maxAuthorsFileBytes >> 20) MiB)")
        }
        let bytes = try fileSystem.readFile(path)
        if let last = bytes.last, last != UInt8(ascii: "\n") {
            let kept = (bytes.lastIndex(of: UInt8(ascii: "\n")) ?? -1) + 1
            try fileSystem.truncateFile(path, to: kept)
            try fileSystem.syncFile(path)
        }
        var authors: [ReplicaID: String] = [:]
        for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast() {
            let fields = String(decoding: line, as: UTF8.self).split(separator: " ")
            guard fields.count == 2, let raw = UInt64(fields[0], radix: 16) else {
                throw StoreError.damagedFile(path: path, "a line is not `<replica hex> <subject>`")
            }
            if authors[ReplicaID(raw)] == nil { authors[ReplicaID(raw)] = String(fields[1]) }
        }
        return authors
    }

    /// Records durably that `replica` belongs to `subject`.
    public func bindAuthor(_ replica: ReplicaID, to subject: String) throws {
        let path = Path.join(self.path, PackageLayout.authors)
        let existed = try fileSystem.fileSize(path) != nil
        try fileSystem.appendFile(path, Array("\(String(replica.rawValue, radix: 16)) \(subject)\n".utf8))
        try fileSystem.syncFile(path)
        if !existed { try fileSystem.syncDirectory(Path.join(self.path, PackageLayout.sync)) }
    }
}
