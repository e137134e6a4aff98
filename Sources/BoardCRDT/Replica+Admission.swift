// Admission: what a replica checks before it stores, applies or relays a peer's operations, on
// top of each operation's own validity (`Op.validate`). These checks depend on what the replica
// already holds, so they stop a peer from bricking or silently forking a board:
// - bounded clocks: no Lamport counter, sequence number or `covers` entry may jump more than
//   `Replica.maxClockJump` past the largest this replica has seen, so pushing counters to their
//   end takes billions of operations instead of one;
// - nobody else may author this replica's operations, or claim to hold ones it never made;
// - equivocation is loud: one operation id with two contents, or a second creation of one item,
//   is refused with an error naming the replica.
extension Replica {
    /// How far past the largest value seen one operation may move a Lamport counter, sequence
    /// number or `covers` entry. An honest operation's counter exceeds what the receiver has seen
    /// by at most the number of operations the receiver has not seen, so 2^32 refuses nothing a
    /// person could make while an attacker needs 2^30 operations to exhaust the 2^62 counters.
    public static let maxClockJump: UInt64 = 1 << 32

    /// Operations a replica holds for items whose creation has not arrived. They wait legitimately
    /// for a while (delivery order is free), but a peer sending edits of items that never exist
    /// must not make every replica hold and relay them without end.
    public static let maxWaitingOperations = 10_000

    /// Whether operations come from a peer (admitted) or from this replica's own durable log
    /// (admitted before they were written: replaying them is trusted).
    public enum Origin: Sendable {
        case peer
        case ownLog
    }

    /// Throws the first reason this replica must refuse `batch` from a peer; changes nothing.
    ///
    /// One pass over the batch does the common case (operations of each author in increasing
    /// order, counters close to what is held); the slower exact checks run only when the fast
    /// bounds are exceeded.
    public func admit(_ batch: OperationBatch) throws {
        _ = try admit(batch, collectingNew: false)
    }

    /// Admits `batch` (as `admit`, changing nothing) and returns the operations this replica
    /// does not hold yet, in batch order: what merging the batch integrates. One pass does both,
    /// so a store logging only what is new filters nothing again.
    public func admitted(_ batch: OperationBatch) throws -> [Op] {
        try admit(batch, collectingNew: true)
    }

    private func admit(_ batch: OperationBatch, collectingNew: Bool) throws -> [Op] {
        // Operations a decoder returned were validated there; others are validated here.
        let validate = !batch.operationsValidated
        // The new operations: the batch's own array while none is held (the usual live batch).
        var new: [Op] = []
        var held = 0
        var authors: [ReplicaID: AuthorRun] = [:]
        var run = AuthorRun()
        var runAuthor: ReplicaID?
        var runSeen = SeenSet()
        var highestLamport: UInt64 = 0
        var itemOperations = 0
        var creations: [ItemID: OpID] = [:]
        var newLabels: Set<LabelID> = []
        for (index, op) in batch.operations.enumerated() {
            if validate { try op.validate() }
            let author = op.id.replica
            if author != runAuthor {
                if let runAuthor { authors[runAuthor] = run }
                runAuthor = author
                run = authors[author] ?? AuthorRun()
                runSeen = seen[author] ?? SeenSet()
            }
            switch op.payload {
            case .beginStroke(let item, _), .addSticker(let item, _):
                // A second creation of one item inside the batch.
                if let other = creations.updateValue(op.id, forKey: item), other != op.id {
                    throw OperationError.duplicateCreation(item, op.id, existing: other)
                }
            default:
                break
            }
            if runSeen.contains(op.id.seq) {
                // Held already: it must be the same operation (when it survives compaction).
                if let stored = log[author]?[op.id.seq], stored != op { throw OperationError.equivocation(op.id) }
                if collectingNew, held == 0 { new = Array(batch.operations[..<index]) }
                held += 1
                continue
            }
            if collectingNew, held > 0 { new.append(op) }
            if author == id { throw OperationError.forgedOwnOperation(op.id) }
            if op.id.seq <= run.last { run.increasing = false }
            run.last = op.id.seq
            run.highest = Swift.max(run.highest, op.id.seq)
            highestLamport = Swift.max(highestLamport, op.lamport)
            if op.payload.item != nil { itemOperations += 1 }
            switch op.payload {
            case .beginStroke(let item, _), .addSticker(let item, _):
                try checkCreation(of: item, by: op)
            case .setLabel(let label, _):
                if labelRegisters[label] == nil { newLabels.insert(label) }
            default:
                break
            }
        }
        if let runAuthor { authors[runAuthor] = run }
        let fresh = authors.values.contains { !$0.increasing } || highestLamport > lamport &+ Replica.maxClockJump
            ? batch.operations.filter { !hasIntegrated($0.id) } : []
        // Two contents for one id inside the batch (only possible where an author's operations
        // are not in increasing order).
        for (author, run) in authors where !run.increasing {
            var seen: [UInt64: Op] = [:]
            for op in fresh where op.id.replica == author {
                if let other = seen.updateValue(op, forKey: op.id.seq), other != op { throw OperationError.equivocation(op.id) }
            }
        }
        // Lamport counters, walked upward so a causally complete batch moves in small steps.
        if highestLamport > lamport &+ Replica.maxClockJump {
            var ceiling = lamport
            for op in fresh.sorted(by: { $0.lamport < $1.lamport }) {
                guard op.lamport <= ceiling &+ Replica.maxClockJump else {
                    throw OperationError.lamportJump(op.id, op.lamport, seen: ceiling)
                }
                ceiling = Swift.max(ceiling, op.lamport)
            }
        }
        // Sequence numbers per author, likewise.
        var known: [ReplicaID: UInt64] = [:]
        for (author, run) in authors {
            var ceiling = highestSeen(of: author)
            if run.highest > ceiling &+ Replica.maxClockJump {
                let seqs = batch.operations.lazy.filter { $0.id.replica == author && !self.hasIntegrated($0.id) }.map(\.id.seq).sorted()
                for seq in seqs {
                    guard seq <= ceiling &+ Replica.maxClockJump else {
                        throw OperationError.sequenceJump(OpID(replica: author, seq: seq), seen: ceiling)
                    }
                    ceiling = Swift.max(ceiling, seq)
                }
            }
            known[author] = Swift.max(ceiling, run.highest)
        }
        // A complete delta's `covers` may lift a vector over compacted operations, not past
        // what is plausible, and never over this replica's own future.
        if let covers = batch.covers {
            try checkPeerVersion(covers)
            for (author, seq) in covers.entries where author != id {
                let ceiling = known[author] ?? highestSeen(of: author)
                guard seq <= ceiling &+ Replica.maxClockJump else {
                    throw OperationError.coversJump(author, seq, seen: ceiling)
                }
            }
        }
        // Label registers: bounded per board, so a peer cannot make every replica hold and
        // relay labels without end.
        if labelRegisters.count + newLabels.count > Label.maxAdmittedLabels {
            throw OperationError.tooManyLabels(labelRegisters.count + newLabels.count, limit: Label.maxAdmittedLabels)
        }
        // Operations waiting for items never created, counted exactly only near the limit.
        if waitingOperations + itemOperations > Replica.maxWaitingOperations {
            var waiting = 0
            for op in batch.operations where !hasIntegrated(op.id) {
                if let item = op.payload.item, items[item]?.creation == nil, creations[item] == nil { waiting += 1 }
            }
            if waitingOperations + waiting > Replica.maxWaitingOperations {
                throw OperationError.tooManyWaiting(waitingOperations + waiting, limit: Replica.maxWaitingOperations)
            }
        }
        return held == 0 ? batch.operations : new
    }

    /// What the fast pass learns about one author's operations in a batch.
    private struct AuthorRun {
        var last: UInt64 = 0
        var highest: UInt64 = 0
        var increasing = true
    }

    /// Throws when a peer's version vector claims operations of this replica beyond the last one
    /// it made: someone forged operations under this replica's id, and syncing on would silently
    /// leave this replica's real operations behind.
    public func checkPeerVersion(_ version: VersionVector) throws {
        if version[id] > lastSeq {
            throw OperationError.forgedOwnVersion(id, claimed: version[id], made: lastSeq)
        }
    }

    /// A creation must be the item's first, and an id shaped like another known replica's
    /// (high word = its id) is that replica's to make: claiming one first would make its own
    /// creation unacceptable later.
    private func checkCreation(of item: ItemID, by op: Op) throws {
        if let existing = items[item]?.creation?.op, existing != op.id {
            throw OperationError.duplicateCreation(item, op.id, existing: existing)
        }
        let owner = ReplicaID(item.high)
        if owner != op.id.replica, owner == id || seen[owner] != nil {
            throw OperationError.foreignItemID(item, op.id)
        }
    }

    /// The largest sequence number of `author` this replica holds (prefix or ahead of a gap).
    private func highestSeen(of author: ReplicaID) -> UInt64 {
        guard let set = seen[author] else { return 0 }
        return Swift.max(set.prefix, set.ahead.max() ?? 0)
    }
}
