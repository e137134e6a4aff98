import BoardCRDT
import BoardModel

/// `sync/history-index`: what the history needs to know of the live op log, kept beside it so
/// the log's format and its append path stay as they were.
///
/// Layout: the 8-byte magic `BSHIDX01`, a header — `archiveSize u64` (bytes of `sync/history`
/// that a finished compaction wrote: anything after them is a torn or unfinished append, cut by
/// the next compaction and ignored by readers), `sinceCheckpoint u64` (operations archived since
/// the last checkpoint), `headCRC u32` and `headLength u32` (the log's first record when it is
/// the state a compaction wrote, whose operations are archived already; length 0: none), and
/// `crc32` of the header's 36 bytes before it — then entries of 24 bytes: `offset u64`,
/// `crc u32`, `length u32` of one log record and `time i64`, the milliseconds since 1970 at
/// which the package integrated it.
///
/// Entries are appended without fsync when the package saves or closes (they are metadata: a
/// crash loses the times of the last records, shown as unknown); one that no longer names a
/// record of the log (offset, length and checksum must all match) is ignored. Compaction rewrites
/// the file atomically. A damaged header makes the file count as missing: the next compaction
/// then archives the whole log again (readers skip operations they have seen).
struct HistoryIndex: Equatable {
    static let magic: [UInt8] = Array("BSHIDX01".utf8)
    static let headerSize = 40
    static let entrySize = 24

    struct Entry: Equatable {
        var mark: OpLog.RecordMark
        var time: Int64
    }

    var archiveSize: Int
    var sinceCheckpoint: Int
    var head: OpLog.RecordMark?
    var entries: [Entry] = []

    /// Reads the index; nil when it is missing or its header is damaged. A torn last entry is
    /// dropped.
    static func read(_ path: String, _ fileSystem: any FileSystem) -> HistoryIndex? {
        guard let bytes = try? fileSystem.readFile(path), bytes.count >= headerSize,
              bytes.starts(with: magic),
              CRC32.checksum(bytes[0..<36]) == ByteReader.fixed32(in: bytes, at: 36) else { return nil }
        func u64(_ at: Int) -> UInt64 { UInt64(ByteReader.fixed32(in: bytes, at: at)) | UInt64(ByteReader.fixed32(in: bytes, at: at + 4)) << 32 }
        let archiveSize = u64(8), since = u64(16)
        let headCRC = ByteReader.fixed32(in: bytes, at: 24), headLength = ByteReader.fixed32(in: bytes, at: 28)
        guard archiveSize <= UInt64(Int.max), since <= UInt64(Int.max) else { return nil }
        var index = HistoryIndex(archiveSize: Int(archiveSize), sinceCheckpoint: Int(since),
                                 head: headLength == 0 ? nil : OpLog.RecordMark(offset: OpLog.magic.count, length: Int(headLength), crc: headCRC))
        var offset = headerSize
        while offset + entrySize <= bytes.count {
            let at = u64(offset)
            if at <= UInt64(Int.max) {
                let mark = OpLog.RecordMark(offset: Int(at), length: Int(ByteReader.fixed32(in: bytes, at: offset + 12)),
                                            crc: ByteReader.fixed32(in: bytes, at: offset + 8))
                index.entries.append(Entry(mark: mark, time: Int64(bitPattern: u64(offset + 16))))
            }
            offset += entrySize
        }
        return index
    }

    func header() -> [UInt8] {
        var writer = ByteWriter(capacity: HistoryIndex.headerSize)
        writer.write(bytes: HistoryIndex.magic)
        writer.write(fixed64: UInt64(archiveSize))
        writer.write(fixed64: UInt64(sinceCheckpoint))
        writer.write(fixed32: head?.crc ?? 0)
        writer.write(fixed32: UInt32(head?.length ?? 0))
        writer.write(fixed32: 0)  // reserved
        var bytes = writer.bytes
        ByteWriter.append(fixed32: CRC32.checksum(bytes[0..<36]), to: &bytes)
        return bytes
    }

    static func encode(_ entries: [Entry]) -> [UInt8] {
        var writer = ByteWriter(capacity: entries.count * entrySize)
        for entry in entries {
            writer.write(fixed64: UInt64(entry.mark.offset))
            writer.write(fixed32: entry.mark.crc)
            writer.write(fixed32: UInt32(truncatingIfNeeded: entry.mark.length))
            writer.write(fixed64: UInt64(bitPattern: entry.time))
        }
        return writer.bytes
    }

    /// The whole file.
    func encoded() -> [UInt8] { header() + HistoryIndex.encode(entries) }

    /// Times by the record they name.
    var times: [OpLog.RecordMark: Int64] {
        var result: [OpLog.RecordMark: Int64] = [:]
        for entry in entries { result[entry.mark] = entry.time }
        return result
    }
}
