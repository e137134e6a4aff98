/// Why a local edit was refused. Nothing changes when an edit throws.
public enum EditError: Error, Hashable, CustomStringConvertible {
    case unknownItem(ItemID)
    case wrongKind(ItemID, expected: ItemKind)
    case notFinite(String)
    case noStrokeInProgress
    /// `appendPoints(_:to:)` on a stroke this replica is not drawing (another replica's, or one
    /// already finished).
    case strokeNotInProgress(ItemID)
    case tooManyPoints(Int)
    case invalidWidth(Double)
    case invalidCanvas(width: Double, height: Double)
    case sameItem(ItemID)
    case unknownAsset(String)
    case duplicateItem(ItemID)
    /// Sequence numbers or Lamport counters are at `Op.maxCounter`: no valid operation can follow.
    case clockExhausted
    /// No short paint-order keys could be found (cannot happen below billions of items).
    case noRoomInPaintOrder
    /// A label's text or version breaks a bound (`Label.problem`).
    case invalidLabel(String)
    case unknownLabel(LabelID)
    /// The board holds `Label.maxLabelsPerBoard` label registers already.
    case tooManyLabels(limit: Int)

    public var description: String {
        switch self {
        case .unknownItem(let id): return "no item with id \(id) on this board"
        case .wrongKind(let id, let expected): return "item \(id) is not a \(expected.rawValue)"
        case .notFinite(let what): return "\(what) must be a finite number"
        case .noStrokeInProgress: return "no stroke is being drawn: begin a stroke first"
        case .strokeNotInProgress(let id): return "stroke \(id) is not being drawn by this replica (finished, or another replica's)"
        case .tooManyPoints(let count): return "\(count) points in one edit (at most \(Op.maxPoints))"
        case .invalidWidth(let width): return "stroke width \(width) must be between 0 and \(FixedPoint.points(FixedPoint.limit))"
        case .invalidCanvas(let width, let height): return "canvas size \(width)x\(height) must be positive and finite"
        case .sameItem(let id): return "item \(id) cannot be placed relative to itself"
        case .unknownAsset(let hash): return "no asset with hash \(hash) in this replica's store"
        case .duplicateItem(let id): return "an item with id \(id) already exists"
        case .clockExhausted:
            return "this replica's counters reached \(Op.maxCounter): no further edit can be made (a peer sent operations with absurd counters; see the sync log)"
        case .noRoomInPaintOrder: return "no room left in the paint order"
        case .invalidLabel(let problem): return problem
        case .unknownLabel(let id): return "no label with id \(id) on this board"
        case .tooManyLabels(let limit): return "the board holds \(limit) labels (deleted ones included; at most \(limit)): no new label can be made"
        }
    }
}

/// What a local edit made: the item it created, if any, and the operations to send to peers.
public struct LocalEdit: Sendable {
    public var item: ItemID?
    public var operations: [Op]

    public init(item: ItemID? = nil, operations: [Op] = []) {
        self.item = item
        self.operations = operations
    }
}
