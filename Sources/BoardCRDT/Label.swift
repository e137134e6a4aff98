import BoardModel

/// Names a label (a named version): the replica that made it and a number, the sequence number
/// of the operation that first set it, so ids are unique without randomness. Shown and parsed
/// as `REPLICA#NUMBER` (16 hex digits, `#`, decimal), like an operation id.
public struct LabelID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let replica: ReplicaID
    public let number: UInt64

    public init(replica: ReplicaID, number: UInt64) {
        self.replica = replica
        self.number = number
    }

    /// Parses `REPLICA#NUMBER` as `description` prints it.
    public init?(_ text: String) {
        let parts = text.split(separator: "#", omittingEmptySubsequences: false)
        guard parts.count == 2, let replica = ReplicaID(hex: String(parts[0])),
              let number = UInt64(parts[1]), number > 0 else { return nil }
        self.init(replica: replica, number: number)
    }

    public static func < (lhs: LabelID, rhs: LabelID) -> Bool {
        (lhs.replica, lhs.number) < (rhs.replica, rhs.number)
    }

    public var description: String { "\(replica)#\(number)" }
}

/// What a label register holds: the version it names, its text, and the wall time its writer
/// set it at (milliseconds since 1970; metadata, never used to decide a conflict).
public struct Label: Hashable, Sendable {
    public var text: String
    public var version: VersionVector
    public var time: Int64

    public init(text: String, version: VersionVector, time: Int64) {
        self.text = text
        self.version = version
        self.time = time
    }

    /// Bytes of UTF-8 a label's text may hold (`Label.maxTextBytes`).
    public static let maxTextBytes = 200
    /// Entries a label's version vector may hold: a board with more authors than this can be
    /// labelled only at versions that name at most this many of them.
    public static let maxVersionEntries = 1_024
    /// Label registers (set or deleted) one replica makes locally: `setLabel` of a new id is
    /// refused beyond it.
    public static let maxLabelsPerBoard = 1_000
    /// Label registers a replica admits from peers: twice the local bound, so replicas that
    /// label concurrently near the bound still sync; a peer's batch that would pass it is
    /// refused (`OperationError.tooManyLabels`).
    public static let maxAdmittedLabels = 2 * maxLabelsPerBoard

    /// Why `text` cannot be a label's text, nil when it can: empty, longer than
    /// `maxTextBytes` bytes of UTF-8, or holding a control character (a line break would
    /// break the CLI's listing and a log line).
    public static func problem(withText text: String) -> String? {
        if text.isEmpty { return "a label's text is empty" }
        if text.utf8.count > maxTextBytes { return "a label's text is \(text.utf8.count) bytes of UTF-8 (at most \(maxTextBytes))" }
        if text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "a label's text holds a control character (a line break, a tab, ...)"
        }
        return nil
    }

    /// Why this label cannot be written, nil when it can.
    public var problem: String? {
        if let problem = Label.problem(withText: text) { return problem }
        if version.entries.count > Label.maxVersionEntries {
            return "a label's version names \(version.entries.count) replicas (at most \(Label.maxVersionEntries))"
        }
        if version.entries.values.contains(where: { $0 > Op.maxCounter }) {
            return "a label's version holds a sequence number beyond \(Op.maxCounter)"
        }
        return nil
    }
}

/// A label as a replica shows it: its id, what it says and names, who wrote its current value
/// (the winning write: a rename's author, not necessarily the creator) and when.
public struct NamedVersion: Hashable, Sendable {
    public var id: LabelID
    public var text: String
    public var version: VersionVector
    /// Milliseconds since 1970 when the winning write was made (its writer's wall clock).
    public var time: Int64
    /// The replica whose write won.
    public var author: ReplicaID

    public init(id: LabelID, text: String, version: VersionVector, time: Int64, author: ReplicaID) {
        self.id = id
        self.text = text
        self.version = version
        self.time = time
        self.author = author
    }
}

extension Replica {
    /// Every label on the board (deleted ones left out), by id. Labels never change what
    /// `snapshot()` shows.
    public var labels: [NamedVersion] {
        labelRegisters.compactMap { id, register -> NamedVersion? in
            guard let label = register.value, let writer = register.writer else { return nil }
            return NamedVersion(id: id, text: label.text, version: label.version, time: label.time, author: writer.replica)
        }.sorted { $0.id < $1.id }
    }

    /// One label, nil when it was never set or was deleted.
    public func label(_ id: LabelID) -> NamedVersion? {
        guard let register = labelRegisters[id], let label = register.value, let writer = register.writer else { return nil }
        return NamedVersion(id: id, text: label.text, version: label.version, time: label.time, author: writer.replica)
    }

    /// Label registers held, deleted ones included (what `Label.maxLabelsPerBoard` counts).
    public var labelRegisterCount: Int { labelRegisters.count }

    /// Names `version` with `text`: a new label (`id` nil: named after this operation) or a new
    /// value of label `id` (a rename, or moving it to another version). `time` is the wall
    /// clock in milliseconds since 1970, kept as metadata (the caller reads the clock: a
    /// replica reads none). One operation, not an undo step: labels are not part of the
    /// board's undo history.
    ///
    /// A deleted label keeps its register (a concurrent later write must still win over the
    /// delete), and registers count toward `Label.maxLabelsPerBoard`. So that deleting labels
    /// frees room, a new label at the bound takes the register of one of this replica's own
    /// deleted labels (the lowest id: its label was made first) instead of a new one; only
    /// when this replica deleted none is it refused. Its own ids only: no other replica
    /// writes a new label into them, so two labels never race for one register.
    public mutating func setLabel(_ id: LabelID? = nil, text: String, version: VersionVector, time: Int64) throws -> LocalEdit {
        let label = Label(text: text, version: version, time: time)
        if let problem = label.problem { throw EditError.invalidLabel(problem) }
        var reused: LabelID?
        if let id {
            guard labelRegisters[id] != nil else { throw EditError.unknownLabel(id) }
        } else if labelRegisters.count >= Label.maxLabelsPerBoard {
            reused = labelRegisters.filter { $0.key.replica == self.id && $0.value.value == nil }.keys.min()
            guard reused != nil else { throw EditError.tooManyLabels(limit: Label.maxLabelsPerBoard) }
        }
        try reserve(1)
        let labelID = id ?? reused ?? LabelID(replica: self.id, number: lastSeq + 1)
        return LocalEdit(operations: [makeOperation(.setLabel(labelID, label))])
    }

    /// Renames label `id` (same version, new text).
    public mutating func renameLabel(_ id: LabelID, to text: String, time: Int64) throws -> LocalEdit {
        guard let current = labelRegisters[id]?.value else { throw EditError.unknownLabel(id) }
        return try setLabel(id, text: text, version: current.version, time: time)
    }

    /// Deletes label `id` (its register then holds nothing; a concurrent later rename wins, as
    /// any register's later write does).
    public mutating func removeLabel(_ id: LabelID) throws -> LocalEdit {
        guard labelRegisters[id]?.value != nil else { throw EditError.unknownLabel(id) }
        try reserve(1)
        return LocalEdit(operations: [makeOperation(.setLabel(id, nil))])
    }
}

extension OperationBatch {
    /// Whether any operation writes a label.
    public var containsLabels: Bool {
        operations.contains { if case .setLabel = $0.payload { return true } else { return false } }
    }

    /// This batch for a peer that cannot read label operations (a build from before named
    /// versions: it refuses an unknown operation kind). Label operations never change what the
    /// board shows, so they are left out; what the peer's version vector must still learn is
    /// that their sequence numbers are taken, or it would keep a gap (and be sent everything
    /// after it again at every handshake, its acknowledgements stuck below the label):
    /// - a complete delta keeps its `base` and `covers`, which already account for them;
    /// - loose operations become a complete delta for each author whose operations in the batch
    ///   are consecutive (`base` one below the first, `covers` the last), so a peer holding
    ///   everything before them rises past the labels; an author with gaps stays loose (the
    ///   next handshake's complete delta closes its gap).
    /// One exception: `covers` never raises an author the receiver holds nothing of (`base` 0)
    /// unless the batch carries one of that author's other operations. A server with access
    /// control binds a replica id to its writer at the replica's first operation, and refuses
    /// every later one of a replica it holds operations of but never bound (found by the
    /// network simulator: a peer whose first edit was a label, behind a server from before
    /// labels, was refused for good). Those label operations are `held` instead (a session
    /// sends them in front of its next batch, with the author's next operation).
    /// Returns the batch unchanged when it holds no label operation.
    public func withoutLabels() -> OperationBatch {
        withoutLabelsHolding().batch
    }

    /// `withoutLabels`, and the label operations that must wait for their author's next
    /// operation (see there), in batch order.
    public func withoutLabelsHolding() -> (batch: OperationBatch, held: [Op]) {
        guard containsLabels else { return (self, []) }
        func isLabel(_ op: Op) -> Bool { if case .setLabel = op.payload { return true } else { return false } }
        let kept = operations.filter { !isLabel($0) }
        let keptAuthors = Set(kept.map(\.id.replica))
        let labelAuthors = Set(operations.filter(isLabel).map(\.id.replica))
        // Authors whose labels alone would raise them from nothing: held.
        func unbound(_ author: ReplicaID, base: UInt64) -> Bool { base == 0 && !keptAuthors.contains(author) }
        if base != nil || covers != nil {
            guard let covers else { return (OperationBatch(operations: kept, base: base, covers: nil), []) }
            let from = base ?? .empty
            let waiting = Set(labelAuthors.filter { unbound($0, base: from[$0]) && covers[$0] > 0 })
            var lowered = covers
            for author in waiting { lowered[author] = 0 }
            return (OperationBatch(operations: kept, base: base, covers: lowered),
                    operations.filter { isLabel($0) && waiting.contains($0.id.replica) })
        }
        var runs: [ReplicaID: (low: UInt64, high: UInt64, count: UInt64)] = [:]
        for op in operations {
            if var run = runs[op.id.replica] {
                run.low = Swift.min(run.low, op.id.seq)
                run.high = Swift.max(run.high, op.id.seq)
                run.count += 1
                runs[op.id.replica] = run
            } else {
                runs[op.id.replica] = (op.id.seq, op.id.seq, 1)
            }
        }
        var base: [ReplicaID: UInt64] = [:]
        var covers: [ReplicaID: UInt64] = [:]
        var waiting: Set<ReplicaID> = []
        for author in labelAuthors {
            let run = runs[author]!
            guard run.high - run.low + 1 == run.count else { continue }
            if unbound(author, base: run.low - 1) {
                waiting.insert(author)
                continue
            }
            base[author] = run.low - 1
            covers[author] = run.high
        }
        let held = operations.filter { isLabel($0) && waiting.contains($0.id.replica) }
        guard !covers.isEmpty else { return (OperationBatch(operations: kept), held) }
        return (OperationBatch(operations: kept, base: VersionVector(base), covers: VersionVector(covers)), held)
    }
}
