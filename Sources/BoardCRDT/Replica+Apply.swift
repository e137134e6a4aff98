extension Replica {
    /// Merges a batch: validates every operation first (an invalid batch changes nothing), then
    /// integrates the ones not seen before. When the batch is a complete delta (`base` and
    /// `covers` set) and this replica already held everything up to `base`, the version vector
    /// rises to `covers`, which accounts for operations the sender had compacted away.
    ///
    /// Returns the number of operations that were new.
    /// Operations from peers pass `admit` first (validity, bounded clocks, no forgery of this
    /// replica's operations, no equivocation). Records of this replica's own log (`.ownLog`:
    /// replayed on open, or just appended by a merge) were admitted before they were written,
    /// and the decoder validates every operation it reads, so they are not checked again.
    @discardableResult
    public mutating func apply(_ batch: OperationBatch, from origin: Origin = .peer) throws -> Int {
        if origin == .peer { try admit(batch) }
        let complete: Bool
        if let base = batch.base, batch.covers != nil {
            complete = versionVector.dominates(base)
        } else {
            complete = false
        }
        var integrated = 0
        if complete, let covers = batch.covers, let perAuthor = Self.countsIfIncreasing(batch.operations) {
            // A complete delta (a full state, a catch-up): its prefixes rise to `covers` below,
            // so operations at or under them are not recorded one by one on the way (a gapped
            // compacted history went into each seen set's `ahead` set, a hash insert per
            // operation, only to be dropped at the end). No operation repeats inside the batch
            // (each author's sequence numbers increase), and ones held already are skipped.
            reserveCapacity(perAuthor, operationCount: batch.operations.count)
            for op in batch.operations {
                let deferred = op.id.seq <= covers[op.id.replica]
                if deferred ? integrateUnrecorded(op) : integrate(op) { integrated += 1 }
            }
        } else {
            for op in batch.operations where integrate(op) {
                integrated += 1
            }
        }
        if complete, let covers = batch.covers {
            for (replica, seq) in covers.entries {
                noteSeen(replica)
                seen[replica, default: SeenSet()].raisePrefix(to: seq)
                if replica == id { lastSeq = max(lastSeq, seq) }
            }
        }
        return integrated
    }

    /// Merges operations in any order; duplicates are ignored. Throws `OperationError` (and
    /// changes nothing) if any operation is invalid.
    @discardableResult
    public mutating func apply(_ operations: [Op]) throws -> Int {
        try apply(OperationBatch(operations: operations))
    }

    /// Operations and creations per author when each author's sequence numbers strictly
    /// increase along `operations` (then no operation appears twice); nil when they do not.
    static func countsIfIncreasing(_ operations: [Op]) -> [ReplicaID: (operations: Int, creations: Int)]? {
        var counts: [ReplicaID: (operations: Int, creations: Int)] = [:]
        var last: [ReplicaID: UInt64] = [:]
        var runAuthor: ReplicaID?
        var run = (last: UInt64(0), operations: 0, creations: 0)
        func close() {
            guard let runAuthor else { return }
            last[runAuthor] = run.last
            counts[runAuthor, default: (0, 0)].operations += run.operations
            counts[runAuthor, default: (0, 0)].creations += run.creations
        }
        for op in operations {
            if op.id.replica != runAuthor {
                close()
                runAuthor = op.id.replica
                run = (last[op.id.replica] ?? 0, 0, 0)
            }
            guard op.id.seq > run.last else { return nil }
            run.last = op.id.seq
            run.operations += 1
            switch op.payload {
            case .beginStroke, .addSticker: run.creations += 1
            default: break
            }
        }
        close()
        return counts
    }

    /// Room in the log and the item table for a batch of surviving operations (a complete
    /// delta holds no overwritten ones), so they do not grow by rehashing as it is applied.
    private mutating func reserveCapacity(_ perAuthor: [ReplicaID: (operations: Int, creations: Int)], operationCount: Int) {
        guard operationCount >= 1024 else { return }
        for (author, count) in perAuthor {
            log[author, default: AuthorLog()].reserveCapacity((log[author]?.count ?? 0) + count.operations)
        }
        items.reserveCapacity(items.count + perAuthor.values.reduce(0) { $0 + $1.creations })
    }

    /// `integrate` for an operation whose sequence number a complete delta's `covers` will
    /// mark as seen: checks that it is new, without recording it.
    private mutating func integrateUnrecorded(_ op: Op) -> Bool {
        guard !hasIntegrated(op.id) else { return false }
        return integrate(op, record: false)
    }

    /// Integrates one valid operation; false when it was seen before.
    @discardableResult
    mutating func integrate(_ op: Op, record: Bool = true) -> Bool {
        if record {
            noteSeen(op.id.replica)
            guard seen[op.id.replica, default: SeenSet()].insert(op.id.seq) else { return false }
        }
        lamport = max(lamport, op.lamport)
        if op.id.replica == id {
            lastSeq = max(lastSeq, op.id.seq)
        }
        let stamp = breaksTiesByArrival ? Timestamp(lamport: op.lamport, replica: ReplicaID(.max)) : op.timestamp
        if let key = op.payload.zKey {
            zRange = zRange.map { (min($0.lowest, key), max($0.highest, key)) } ?? (key, key)
        }
        switch op.payload {
        case .beginStroke(let item, _), .addSticker(let item, _), .appendPoints(let item, _), .setItem(let item, _):
            noteItem(item)  // for a transaction, before the state changes
            switch items[item, default: ItemState()].integrate(op, stamp: stamp) {
            case .created(let waited):
                waitingOperations -= waited  // what waited for this creation no longer waits
                store(op)
            case .appended(let waits):
                if waits { waitingOperations += 1 }
                store(op)
            case .wrote(let outcome, let waits):
                if waits { waitingOperations += 1 }
                settle(outcome, of: op)
            case .ignored:
                break
            }
        case .setBoard(let field):
            let outcome: Register<BoardField>.Outcome
            switch field {
            case .canvas: outcome = canvas.write(field, stamp: stamp, writer: op.id)
            case .background: outcome = background.write(field, stamp: stamp, writer: op.id)
            }
            switch outcome {
            case .won(let displaced):
                store(op)
                if let displaced { drop(displaced) }
            case .lost:
                break
            }
        case .setLabel(let label, let value):
            switch labelRegisters[label, default: Register(value: nil, stamp: .zero, writer: nil)].write(value, stamp: stamp, writer: op.id) {
            case .won(let displaced):
                store(op)
                if let displaced { drop(displaced) }
            case .lost:
                break
            }
        }
        return true
    }

    private mutating func settle(_ outcome: Register<ItemField>.Outcome, of op: Op) {
        switch outcome {
        case .won(let displaced):
            store(op)
            if let displaced { drop(displaced) }
        case .lost:
            break
        }
    }

    private mutating func store(_ op: Op) {
        noteLog(op.id)
        log[op.id.replica, default: AuthorLog()][op.id.seq] = op
    }

    private mutating func drop(_ op: OpID) {
        noteLog(op)
        log[op.replica]?[op.seq] = nil
    }
}
