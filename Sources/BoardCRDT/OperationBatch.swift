/// Operations travelling together: a delta for a peer, a log record, a wire message.
///
/// A *complete delta* also carries `base` (the version vector it was computed against) and
/// `covers` (the sender's version vector): it holds every surviving operation beyond `base` that
/// the sender had. A receiver already at `base` may then treat itself as at `covers`, even where
/// the sender had compacted overwritten operations away.
public struct OperationBatch: Hashable, Sendable {
    public var operations: [Op] {
        didSet { operationsValidated = false }
    }
    public var base: VersionVector?
    public var covers: VersionVector?
    /// Set by the decoders, which validate every operation they return: admission then does
    /// not check each one again (one validation per merge). Cleared when `operations` change;
    /// not part of equality.
    var operationsValidated = false

    public init(operations: [Op], base: VersionVector? = nil, covers: VersionVector? = nil) {
        self.operations = operations
        self.base = base
        self.covers = covers
    }

    init(validated operations: [Op], base: VersionVector? = nil, covers: VersionVector? = nil) {
        self.init(operations: operations, base: base, covers: covers)
        operationsValidated = true
    }

    public static func == (lhs: OperationBatch, rhs: OperationBatch) -> Bool {
        lhs.operations == rhs.operations && lhs.base == rhs.base && lhs.covers == rhs.covers
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(operations)
        hasher.combine(base)
        hasher.combine(covers)
    }
}

extension Replica {
    /// Exactly what a peer at `version` lacks: every surviving operation beyond it, ordered by
    /// author id then sequence number, as a complete delta.
    public func operations(since version: VersionVector) -> OperationBatch {
        var result: [Op] = []
        // A full state holds every surviving operation: room for all of them at once (an exact
        // reserve per author would reallocate and copy the result once per author).
        if version.entries.isEmpty { result.reserveCapacity(storedOperationCount) }
        for replica in log.keys.sorted() {
            guard let ops = log[replica] else { continue }
            // Each author's log is kept in sequence-number order: no sort, no hashing.
            result.append(contentsOf: ops.operations(after: version[replica]))
        }
        return OperationBatch(operations: result, base: version, covers: versionVector)
    }

    /// The surviving operation of `author` with the highest sequence number.
    public func latestOperation(by author: ReplicaID) -> Op? {
        log[author]?.latest
    }

    /// The whole state as one complete delta (every surviving operation).
    public func fullState() -> OperationBatch {
        operations(since: .empty)
    }
}

/// Why an operation was refused. Closed domain: an operation is either well-formed or one of these.
public enum OperationError: Error, Hashable, CustomStringConvertible {
    case sequenceOutOfRange(OpID)
    case lamportOutOfRange(OpID, UInt64)
    case tooManyPoints(OpID, Int)
    case coordinateOutOfRange(OpID)
    case notFinite(OpID, String)
    case negativeWidth(OpID)
    case invalidCanvas(OpID)
    case lamportJump(OpID, UInt64, seen: UInt64)
    case sequenceJump(OpID, seen: UInt64)
    case coversJump(ReplicaID, UInt64, seen: UInt64)
    case forgedOwnOperation(OpID)
    case forgedOwnVersion(ReplicaID, claimed: UInt64, made: UInt64)
    case equivocation(OpID)
    case duplicateCreation(ItemID, OpID, existing: OpID)
    case foreignItemID(ItemID, OpID)
    case tooManyWaiting(Int, limit: Int)
    case zKeyTooLong(OpID, Int)
    case invalidLabel(OpID, String)
    case tooManyLabels(Int, limit: Int)

    public var description: String {
        switch self {
        case .sequenceOutOfRange(let id): return "operation \(id): sequence number outside 1...\(Op.maxCounter)"
        case .lamportOutOfRange(let id, let value): return "operation \(id): lamport \(value) outside 1...\(Op.maxCounter)"
        case .tooManyPoints(let id, let count): return "operation \(id): \(count) points (at most \(Op.maxPoints))"
        case .coordinateOutOfRange(let id): return "operation \(id): a coordinate is beyond ±\(FixedPoint.limit) units"
        case .notFinite(let id, let field): return "operation \(id): \(field) is not a finite number"
        case .negativeWidth(let id): return "operation \(id): negative stroke width"
        case .invalidCanvas(let id): return "operation \(id): canvas size must be positive"
        case .lamportJump(let id, let value, let seen):
            return "operation \(id): lamport \(value) jumps more than 2^32 past the largest seen (\(seen)); refused so that no peer can push clocks to their end"
        case .sequenceJump(let id, let seen):
            return "operation \(id): sequence number jumps more than 2^32 past the largest seen from replica \(id.replica) (\(seen))"
        case .coversJump(let replica, let value, let seen):
            return "a delta claims to cover replica \(replica) up to \(value), more than 2^32 past the largest seen (\(seen))"
        case .forgedOwnOperation(let id):
            return "operation \(id) claims to be this replica's own, but this replica never made it: someone is forging operations under replica id \(id.replica)"
        case .forgedOwnVersion(let replica, let claimed, let made):
            return "a peer claims to hold operations of this replica (\(replica)) up to \(claimed), but it made only \(made): someone forged operations under its id, and syncing on would leave its real operations behind"
        case .equivocation(let id):
            return "replica \(id.replica) sent two different operations with one id \(id) (equivocation): refused; the board must not diverge silently"
        case .duplicateCreation(let item, let id, let existing):
            return "operation \(id) by replica \(id.replica) creates item \(item), which operation \(existing) already created: a second creation is refused"
        case .zKeyTooLong(let id, let length):
            return "operation \(id): a paint-order key of \(length) bytes (at most \(ZKey.maxLength))"
        case .invalidLabel(let id, let problem): return "operation \(id): \(problem)"
        case .tooManyLabels(let count, let limit):
            return "\(count) labels on the board (limit \(limit)): refused"
        case .tooManyWaiting(let count, let limit):
            return "\(count) operations would wait for items that were never created (limit \(limit)): refused"
        case .foreignItemID(let item, let id):
            return "operation \(id) by replica \(id.replica) creates item \(item), whose id belongs to replica \(ReplicaID(item.high)): refused"
        }
    }
}

extension Op {
    /// Sequence numbers and Lamport counters stay below 2^62 so that no peer can push a clock to
    /// overflow.
    public static let maxCounter: UInt64 = 1 << 62
    /// Points in one operation.
    public static let maxPoints = 1 << 20

    /// Throws when the operation breaks a limit or carries a value no replica would make.
    public func validate() throws {
        guard (1...Op.maxCounter).contains(id.seq) else { throw OperationError.sequenceOutOfRange(id) }
        guard (1...Op.maxCounter).contains(lamport) else { throw OperationError.lamportOutOfRange(id, lamport) }
        func check(_ points: [GridPoint]) throws {
            guard points.count <= Op.maxPoints else { throw OperationError.tooManyPoints(id, points.count) }
            // `magnitude`, not `abs`: abs(Int64.min) traps, and a peer can send that value (found by
            // the operations fuzz target: one crafted point crashed any replica decoding it).
            for point in points where point.x.magnitude > UInt64(FixedPoint.limit) || point.y.magnitude > UInt64(FixedPoint.limit) {
                throw OperationError.coordinateOutOfRange(id)
            }
        }
        func finite(_ value: Double, _ name: String) throws {
            guard value.isFinite else { throw OperationError.notFinite(id, name) }
        }
        if let key = payload.zKey, key.bytes.count > ZKey.maxLength {
            throw OperationError.zKeyTooLong(id, key.bytes.count)
        }
        switch payload {
        case .beginStroke(_, let start):
            try check(start.points)
            guard start.width >= 0, start.width <= FixedPoint.limit else { throw OperationError.negativeWidth(id) }
        case .appendPoints(_, let points):
            try check(points)
        case .addSticker(_, let start):
            try check([start.position])
            try finite(start.scale, "scale")
            try finite(start.rotation, "rotation")
        case .setItem(_, let field):
            switch field {
            case .position(let point): try check([point])
            case .scale(let value): try finite(value, "scale")
            case .rotation(let value): try finite(value, "rotation")
            case .width(let width):
                guard width >= 0, width <= FixedPoint.limit else { throw OperationError.negativeWidth(id) }
            case .exists, .color, .asset, .z: break
            }
        case .setBoard(let field):
            if case .canvas(let width, let height) = field {
                guard width > 0, height > 0, width <= FixedPoint.limit, height <= FixedPoint.limit else {
                    throw OperationError.invalidCanvas(id)
                }
            }
        case .setLabel(let label, let value):
            guard label.number >= 1, label.number <= Op.maxCounter else {
                throw OperationError.invalidLabel(id, "label id \(label) has a number outside 1...\(Op.maxCounter)")
            }
            if let problem = value?.problem { throw OperationError.invalidLabel(id, problem) }
        }
    }
}
