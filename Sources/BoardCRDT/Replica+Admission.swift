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
    public func admit(_ batch: OperationBatch) throws {
        for op in batch.operations { try op.validate() }
        try checkEquivocation(batch.operations)
        try checkClocks(batch)
        try checkCreations(batch.operations)
    }

    /// Throws when a peer's version vector claims operations of this replica beyond the last one
    /// it made: someone forged operations under this replica's id, and syncing on would silently
    /// leave this replica's real operations behind.
    public func checkPeerVersion(_ version: VersionVector) throws {
        if version[id] > lastSeq {
            throw OperationError.forgedOwnVersion(id, claimed: version[id], made: lastSeq)
        }
    }

    private func checkEquivocation(_ operations: [Op]) throws {
        for op in operations where hasIntegrated(op.id) {
            if let held = log[op.id.replica]?[op.id.seq], held != op {
                throw OperationError.equivocation(op.id)
            }
        }
        // Two contents for one id inside the batch. Batches from `operations(since:)` are sorted
        // by id, so the common case is one pass.
        var sorted = true
        for index in operations.indices.dropFirst() where !(operations[index - 1].id < operations[index].id) {
            sorted = false
            break
        }
        guard !sorted else { return }
        let ordered = operations.sorted { $0.id < $1.id }
        for index in ordered.indices.dropFirst() where ordered[index - 1].id == ordered[index].id {
            if ordered[index - 1] != ordered[index] { throw OperationError.equivocation(ordered[index].id) }
        }
    }

    private func checkClocks(_ batch: OperationBatch) throws {
        let fresh = batch.operations.filter { !hasIntegrated($0.id) }
        // Lamport counters, walked upward so a causally complete batch moves in small steps.
        if let highest = fresh.map(\.lamport).max(), highest > lamport &+ Replica.maxClockJump {
            var ceiling = lamport
            for op in fresh.sorted(by: { $0.lamport < $1.lamport }) {
                guard op.lamport <= ceiling &+ Replica.maxClockJump else {
                    throw OperationError.lamportJump(op.id, op.lamport, seen: ceiling)
                }
                ceiling = Swift.max(ceiling, op.lamport)
            }
        }
        // Sequence numbers per author.
        var byAuthor: [ReplicaID: [UInt64]] = [:]
        for op in fresh {
            if op.id.replica == id { throw OperationError.forgedOwnOperation(op.id) }
            byAuthor[op.id.replica, default: []].append(op.id.seq)
        }
        var known: [ReplicaID: UInt64] = [:]
        for (author, seqs) in byAuthor {
            var ceiling = highestSeen(of: author)
            for seq in seqs.max()! > ceiling &+ Replica.maxClockJump ? seqs.sorted() : [] {
                guard seq <= ceiling &+ Replica.maxClockJump else {
                    throw OperationError.sequenceJump(OpID(replica: author, seq: seq), seen: ceiling)
                }
                ceiling = Swift.max(ceiling, seq)
            }
            known[author] = Swift.max(ceiling, seqs.max()!)
        }
        // A complete delta's `covers` may lift a vector over compacted operations, not past
        // what is plausible, and never over this replica's own future.
        if let covers = batch.covers {
            for (author, seq) in covers.entries {
                if author == id {
                    if seq > lastSeq { throw OperationError.forgedOwnVersion(id, claimed: seq, made: lastSeq) }
                    continue
                }
                let ceiling = known[author] ?? highestSeen(of: author)
                guard seq <= ceiling &+ Replica.maxClockJump else {
                    throw OperationError.coversJump(author, seq, seen: ceiling)
                }
            }
        }
    }

    private func checkCreations(_ operations: [Op]) throws {
        var created: [ItemID: OpID] = [:]
        var waiting = 0
        for op in operations where !hasIntegrated(op.id) {
            if let item = op.payload.item, items[item]?.creation == nil { waiting += 1 }
        }
        if waiting > 0, waitingOperations + waiting > Replica.maxWaitingOperations {
            // Creations in this batch may resolve some: count precisely only then.
            let creating = Set(operations.compactMap { op -> ItemID? in
                switch op.payload {
                case .beginStroke(let item, _), .addSticker(let item, _): return item
                default: return nil
                }
            })
            let still = operations.filter { op in
                guard !hasIntegrated(op.id), let item = op.payload.item else { return false }
                return items[item]?.creation == nil && !creating.contains(item)
            }.count
            if waitingOperations + still > Replica.maxWaitingOperations {
                throw OperationError.tooManyWaiting(waitingOperations + still, limit: Replica.maxWaitingOperations)
            }
        }
        for op in operations {
            let item: ItemID
            switch op.payload {
            case .beginStroke(let target, _), .addSticker(let target, _): item = target
            default: continue
            }
            if let existing = items[item]?.creation?.op, existing != op.id {
                throw OperationError.duplicateCreation(item, op.id, existing: existing)
            }
            if let other = created.updateValue(op.id, forKey: item), other != op.id {
                throw OperationError.duplicateCreation(item, op.id, existing: other)
            }
            // Ids shaped like another known replica's (high word = its id) are that replica's to
            // make: claiming one first would make its own creation unacceptable later.
            let owner = ReplicaID(item.high)
            if owner != op.id.replica, owner == id || seen[owner] != nil {
                throw OperationError.foreignItemID(item, op.id)
            }
        }
    }

    /// The largest sequence number of `author` this replica holds (prefix or ahead of a gap).
    private func highestSeen(of author: ReplicaID) -> UInt64 {
        guard let set = seen[author] else { return 0 }
        return Swift.max(set.prefix, set.ahead.max() ?? 0)
    }
}
