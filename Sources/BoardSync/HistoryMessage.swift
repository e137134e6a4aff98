import BoardCRDT
import BoardModel

// History on demand (docs/PROTOCOL.md, "History on demand"): a peer asks the other side for the
// history it holds, by version number range, in pages it sizes itself; the other side answers
// each request once. Nothing of it travels unless asked: a normal catch-up never carries history.

/// A request for history (HISTORY_REQUEST, type 14).
public struct HistoryRequest: Equatable, Sendable {
    public enum What: UInt8, Sendable {
        /// The versions numbered `from...to`: number, time, operation count, authors, vector.
        case versions = 1
        /// The board at version `from` (a full state) and the operations of each version in
        /// `from+1...to`, so the asker can view every version of the range.
        case records = 2
        /// As `records`, without the board at `from` (the asker holds it: the next page).
        case operations = 3
    }

    /// Chosen by the asker; the answer carries it back. At most `SessionLimits.historyRequestsInFlight`
    /// unanswered at once.
    public var id: UInt64
    public var what: What
    /// Version numbers (1-based, as `BoardHistory.Version.number`), `from <= to`. For records
    /// and operations, `from` may be 0: the empty board.
    public var from: UInt64
    public var to: UInt64
    /// The most bytes of entries the asker takes in the answer (the answerer sends fewer when
    /// its own bound, `SessionLimits.maxHistoryAnswer`, is lower; a records answer's first entry,
    /// the board at `from`, is counted against `maxFrame` instead).
    public var maxBytes: UInt64

    public init(id: UInt64, what: What, from: UInt64, to: UInt64, maxBytes: UInt64 = UInt64(SessionLimits().maxHistoryAnswer)) {
        self.id = id
        self.what = what
        self.from = from
        self.to = to
        self.maxBytes = maxBytes
    }

    /// Version numbers on the wire stay below this (a history of more versions is beyond any
    /// package `BoardHistory` reads).
    public static let maxNumber: UInt64 = 1 << 40
}

/// One version as a history answer lists it.
public struct HistoryVersionInfo: Equatable, Sendable {
    public var number: UInt64
    /// Milliseconds since 1970 when the version was recorded (nil: unknown).
    public var time: Int64?
    public var operationCount: UInt64
    public var authors: [ReplicaID]
    public var vector: VersionVector

    public init(number: UInt64, time: Int64?, operationCount: UInt64, authors: [ReplicaID], vector: VersionVector) {
        self.number = number
        self.time = time
        self.operationCount = operationCount
        self.authors = authors
        self.vector = vector
    }
}

/// One version's operations (or, first in a records answer, the board at `from` as a full state).
public struct HistoryRecord: Equatable, Sendable {
    public var number: UInt64
    public var time: Int64?
    /// An encoded `OperationBatch` (format 2 or 1, self-contained): a complete delta from the
    /// previous record's vector to this version's.
    public var batch: [UInt8]

    public init(number: UInt64, time: Int64?, batch: [UInt8]) {
        self.number = number
        self.time = time
        self.batch = batch
    }
}

/// The answer to one `HistoryRequest` (HISTORY, type 15).
public struct HistoryAnswer: Equatable, Sendable {
    public enum Status: UInt8, Sendable {
        case ok = 0
        /// Too many requests in flight or per second on this connection, or the server's history
        /// work is saturated: ask again later.
        case busy = 1
        /// The answerer keeps no history for this board (a peer, a server without packages).
        case unavailable = 2
        /// No such version (beyond the last, or before the history's horizon after a prune).
        case outOfRange = 3
        /// Over a bound of the answerer (a history too large to read, a board state over a frame).
        case tooLarge = 4
        /// The request was not well-formed (`from > to`, a number beyond the limit).
        case invalid = 5
    }

    public var id: UInt64
    public var status: Status
    /// Why, for anything but `.ok` (at most 1,024 bytes).
    public var message: String
    public var what: HistoryRequest.What
    /// How many versions the answerer's history holds (the last one's number).
    public var total: UInt64
    /// The first version that can be viewed (1, or the first after a pruned horizon).
    public var first: UInt64
    /// Where to go on (0: the range is complete): for versions, the next number to ask for; for
    /// records and operations, the last version answered, the next `operations` request's `from`.
    public var next: UInt64
    public var versions: [HistoryVersionInfo]
    public var records: [HistoryRecord]

    public init(id: UInt64, status: Status = .ok, message: String = "", what: HistoryRequest.What,
                total: UInt64 = 0, first: UInt64 = 0, next: UInt64 = 0,
                versions: [HistoryVersionInfo] = [], records: [HistoryRecord] = []) {
        self.id = id
        self.status = status
        self.message = message
        self.what = what
        self.total = total
        self.first = first
        self.next = next
        self.versions = versions
        self.records = records
    }

    /// A refusal of `request`.
    public static func refusal(_ request: HistoryRequest, _ status: Status, _ message: String) -> HistoryAnswer {
        HistoryAnswer(id: request.id, status: status, message: message, what: request.what)
    }

    /// Bytes one version takes in an answer (for an answerer filling a page).
    public static func encodedSize(of version: HistoryVersionInfo) -> Int {
        var w = ByteWriter()
        version.write(&w)
        return w.bytes.count
    }
}

extension HistoryRequest {
    func write(_ w: inout ByteWriter) {
        w.write(varint: id)
        w.write(byte: what.rawValue)
        w.write(varint: from)
        w.write(varint: to)
        w.write(varint: maxBytes)
    }

    static func read(_ r: inout ByteReader) throws -> HistoryRequest {
        let id = try r.readVarint()
        let raw = try r.readByte()
        guard let what = What(rawValue: raw) else { throw SessionError(.malformedFrame, "history request of unknown kind \(raw)") }
        let from = try r.readVarint(max: maxNumber, "history request's first version")
        let to = try r.readVarint(max: maxNumber, "history request's last version")
        let maxBytes = try r.readVarint()
        guard from <= to else { throw SessionError(.malformedFrame, "history request from version \(from) to \(to)") }
        guard what == .records || from >= 1 else { throw SessionError(.malformedFrame, "history request for version 0") }
        return HistoryRequest(id: id, what: what, from: from, to: to, maxBytes: maxBytes)
    }
}

extension HistoryVersionInfo {
    /// Authors of one version on the wire (a version's authors are at most the vector's entries).
    static let maxAuthors = Hello.maxVersionEntries

    func write(_ w: inout ByteWriter) {
        w.write(varint: number)
        writeTime(time, &w)
        w.write(varint: operationCount)
        w.write(varint: UInt64(authors.count))
        for author in authors { w.write(fixed64: author.rawValue) }
        writeHistoryVector(vector, &w)
    }

    static func read(_ r: inout ByteReader) throws -> HistoryVersionInfo {
        let number = try r.readVarint(max: HistoryRequest.maxNumber, "version number")
        let time = try readTime(&r)
        let count = try r.readVarint(max: 1 << 40, "operation count")
        let authorCount = try r.readCount(max: maxAuthors, minimumSize: 8, "authors")
        var authors: [ReplicaID] = []
        authors.reserveCapacity(authorCount)
        for _ in 0..<authorCount { authors.append(ReplicaID(try r.readFixed64())) }
        return HistoryVersionInfo(number: number, time: time, operationCount: count, authors: authors,
                                  vector: try readHistoryVector(&r))
    }
}

extension HistoryAnswer {
    func write(_ w: inout ByteWriter) {
        w.write(varint: id)
        w.write(byte: status.rawValue)
        w.write(lengthPrefixed: Array(message.utf8.prefix(1024)))
        w.write(byte: what.rawValue)
        guard status == .ok else { return }
        w.write(varint: total)
        w.write(varint: first)
        w.write(varint: next)
        switch what {
        case .versions:
            w.write(varint: UInt64(versions.count))
            for version in versions { version.write(&w) }
        case .records, .operations:
            w.write(varint: UInt64(records.count))
            for record in records {
                w.write(varint: record.number)
                writeTime(record.time, &w)
                w.write(lengthPrefixed: record.batch)
            }
        }
    }

    /// Reads an answer; every count is checked against the bytes left before anything is
    /// allocated, and record batches stay encoded (the asker decodes and validates them).
    static func read(_ r: inout ByteReader, maxFrame: Int) throws -> HistoryAnswer {
        let id = try r.readVarint()
        let rawStatus = try r.readByte()
        guard let status = Status(rawValue: rawStatus) else { throw SessionError(.malformedFrame, "history answer of unknown status \(rawStatus)") }
        let text = try r.readLengthPrefixed(max: 4096, "history answer's message")
        let rawWhat = try r.readByte()
        guard let what = HistoryRequest.What(rawValue: rawWhat) else { throw SessionError(.malformedFrame, "history answer of unknown kind \(rawWhat)") }
        var answer = HistoryAnswer(id: id, status: status, message: String(decoding: text, as: UTF8.self), what: what)
        guard status == .ok else { return answer }
        answer.total = try r.readVarint(max: HistoryRequest.maxNumber, "history size")
        answer.first = try r.readVarint(max: HistoryRequest.maxNumber, "first version")
        answer.next = try r.readVarint(max: HistoryRequest.maxNumber, "next version")
        switch what {
        case .versions:
            // A version takes at least 12 bytes (number, time, count, no authors, empty vector).
            let count = try r.readCount(max: r.remaining / 5 + 1, minimumSize: 5, "versions")
            for _ in 0..<count { answer.versions.append(try HistoryVersionInfo.read(&r)) }
        case .records, .operations:
            let count = try r.readCount(max: r.remaining / 3 + 1, minimumSize: 3, "records")
            for _ in 0..<count {
                let number = try r.readVarint(max: HistoryRequest.maxNumber, "record's version number")
                let time = try readTime(&r)
                let batch = try r.readLengthPrefixed(max: maxFrame, "record's batch")
                answer.records.append(HistoryRecord(number: number, time: time, batch: batch))
            }
        }
        return answer
    }
}

/// A time: 0 for unknown, else 1 then the milliseconds as a zigzag varint.
private func writeTime(_ time: Int64?, _ w: inout ByteWriter) {
    guard let time else { return w.write(byte: 0) }
    w.write(byte: 1)
    w.write(zigzag: time)
}

private func readTime(_ r: inout ByteReader) throws -> Int64? {
    switch try r.readByte() {
    case 0: return nil
    case 1: return try r.readZigzag()
    case let other: throw SessionError(.malformedFrame, "a time flag of \(other)")
    }
}

func writeHistoryVector(_ vector: VersionVector, _ w: inout ByteWriter) {
    let entries = vector.sortedEntries
    w.write(varint: UInt64(entries.count))
    for entry in entries {
        w.write(fixed64: entry.replica.rawValue)
        w.write(varint: entry.seq)
    }
}

func readHistoryVector(_ r: inout ByteReader) throws -> VersionVector {
    let count = try r.readCount(max: Hello.maxVersionEntries, minimumSize: 9, "version vector size")
    var entries: [ReplicaID: UInt64] = [:]
    for _ in 0..<count {
        let replica = ReplicaID(try r.readFixed64())
        guard entries[replica] == nil else { throw SessionError(.malformedFrame, "a version vector names replica \(replica) twice") }
        entries[replica] = try r.readVarint(max: Op.maxCounter, "version vector entry")
    }
    return VersionVector(entries)
}
