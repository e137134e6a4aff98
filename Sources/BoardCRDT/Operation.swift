import BoardModel

/// One replicated change. Operations are immutable facts: a replica makes them for local edits,
/// ships them to peers, and merges the ones it receives in any order, any number of times.
public struct Op: Hashable, Sendable, CustomStringConvertible {
    public let id: OpID
    /// Lamport counter: greater than every counter the author had seen when it made this op.
    public let lamport: UInt64
    public let payload: Payload

    public init(id: OpID, lamport: UInt64, payload: Payload) {
        self.id = id
        self.lamport = lamport
        self.payload = payload
    }

    public var timestamp: Timestamp { Timestamp(lamport: lamport, replica: id.replica) }

    public var description: String { "\(id) t=\(lamport) \(payload)" }
}

/// What an operation does.
public enum Payload: Hashable, Sendable, CustomStringConvertible {
    /// Creates a stroke with its first points. Only the creator appends more.
    case beginStroke(ItemID, StrokeStart)
    /// Adds points to the end of a stroke; applies only when made by the stroke's creator.
    case appendPoints(ItemID, [GridPoint])
    /// Creates a sticker showing the asset with this content hash.
    indirect case addSticker(ItemID, StickerStart)
    /// Writes one last-writer-wins register of an item.
    case setItem(ItemID, ItemField)
    /// Writes one last-writer-wins register of the board.
    case setBoard(BoardField)
    /// Writes one label's register: a named version (nil deletes the label). Never changes what
    /// the board shows.
    indirect case setLabel(LabelID, Label?)

    /// The item this operation touches, if any.
    public var item: ItemID? {
        switch self {
        case .beginStroke(let item, _), .appendPoints(let item, _), .addSticker(let item, _), .setItem(let item, _):
            return item
        case .setBoard, .setLabel:
            return nil
        }
    }

    /// The image this operation shows, if any (a sticker's, or the background's).
    public var asset: AssetHash? {
        switch self {
        case .addSticker(_, let start): return start.asset
        case .setItem(_, .asset(let hash)): return hash
        case .setBoard(.background(let hash)): return hash
        default: return nil
        }
    }

    /// The paint-order key this operation writes, if any.
    public var zKey: ZKey? {
        switch self {
        case .beginStroke(_, let start): return start.z
        case .addSticker(_, let start): return start.z
        case .setItem(_, .z(let key)): return key
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .beginStroke(let item, let start): return "beginStroke \(item) \(start.points.count) points"
        case .appendPoints(let item, let points): return "appendPoints \(item) \(points.count) points"
        case .addSticker(let item, let start): return "addSticker \(item) asset \(start.asset.hex.prefix(12))"
        case .setItem(let item, let field): return "set \(item) \(field)"
        case .setBoard(let field): return "setBoard \(field)"
        case .setLabel(let id, let label?): return "setLabel \(id) \"\(label.text)\" at \(label.version)"
        case .setLabel(let id, nil): return "removeLabel \(id)"
        }
    }
}

/// The initial values of a new stroke.
public struct StrokeStart: Hashable, Sendable {
    public var color: Color8
    /// Width in 1/16 points.
    public var width: Int64
    public var z: ZKey
    public var points: [GridPoint]

    public init(color: Color8, width: Int64, z: ZKey, points: [GridPoint]) {
        self.color = color
        self.width = width
        self.z = z
        self.points = points
    }
}

/// The initial values of a new sticker.
public struct StickerStart: Hashable, Sendable {
    public var asset: AssetHash
    public var position: GridPoint
    public var scale: Double
    public var rotation: Double
    public var z: ZKey

    public init(asset: AssetHash, position: GridPoint, scale: Double, rotation: Double, z: ZKey) {
        self.asset = asset
        self.position = position
        self.scale = scale
        self.rotation = rotation
        self.z = z
    }
}

/// One register of an item, with the value written to it. Each case is its own
/// last-writer-wins register, so concurrent writes to different cases all survive.
public enum ItemField: Hashable, Sendable, CustomStringConvertible {
    /// Existence: false for a deleted sticker or erased stroke; true again after a restore.
    case exists(Bool)
    case color(Color8)
    case width(Int64)
    indirect case asset(AssetHash)
    /// The sticker's centre: x and y are one register, so a move wins whole.
    case position(GridPoint)
    case scale(Double)
    case rotation(Double)
    case z(ZKey)

    public var kind: Kind {
        switch self {
        case .exists: return .exists
        case .color: return .color
        case .width: return .width
        case .asset: return .asset
        case .position: return .position
        case .scale: return .scale
        case .rotation: return .rotation
        case .z: return .z
        }
    }

    public enum Kind: Int, CaseIterable, Sendable {
        case exists, color, width, asset, position, scale, rotation, z
    }

    public var description: String {
        switch self {
        case .exists(let value): return "exists=\(value)"
        case .color(let c): return "color=\(c.red),\(c.green),\(c.blue),\(c.alpha)"
        case .width(let w): return "width=\(FixedPoint.points(w))"
        case .asset(let hash): return "asset=\(hash.hex.prefix(12))"
        case .position(let p): return "position=\(FixedPoint.points(p.x)),\(FixedPoint.points(p.y))"
        case .scale(let s): return "scale=\(s)"
        case .rotation(let r): return "rotation=\(r)"
        case .z(let key): return "z=\(key)"
        }
    }
}

/// One register of the board itself.
public enum BoardField: Hashable, Sendable, CustomStringConvertible {
    case background(AssetHash?)
    /// Canvas width and height in 1/16 points.
    case canvas(width: Int64, height: Int64)

    public var kind: Kind {
        switch self {
        case .background: return .background
        case .canvas: return .canvas
        }
    }

    public enum Kind: Int, CaseIterable, Sendable {
        case background, canvas
    }

    public var description: String {
        switch self {
        case .background(let hash): return "background=\(hash.map { String($0.hex.prefix(12)) } ?? "none")"
        case .canvas(let w, let h): return "canvas=\(FixedPoint.points(w))x\(FixedPoint.points(h))"
        }
    }
}
