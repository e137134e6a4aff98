import BoardModel

/// The head byte that starts every encoded operation, in batches (`OperationBatch+Binary.swift`)
/// and in linked batches (`LinkedCodec.swift`): the kind in the low four bits, then flags that
/// say which fields are left out because they follow from the operation before. One
/// definition, so an encoder and a decoder cannot disagree on a bit (docs/PROTOCOL.md).
enum OpHead {
    static let kindMask: UInt8 = 0x0F
    /// The sequence number is the previous operation's + 1 (no delta follows).
    static let seqNext: UInt8 = 0x10
    /// The item is the previous operation's (no item reference follows).
    static let sameItem: UInt8 = 0x20
    /// The Lamport timestamp is the previous operation's + 1 (no delta follows).
    static let lamportNext: UInt8 = 0x40
    /// Batches, format 2, point operations only: the point run has the shape (count, shift,
    /// width) of the batch's previous point run.
    static let samePointShape: UInt8 = 0x80
    /// Linked batches: an extension byte (`OpHeadExtension`) follows the head.
    static let extended: UInt8 = 0x80

    /// The kind a head names (nil: no such kind; the caller says where).
    static func kind(_ head: UInt8) -> OpKind? { OpKind(rawValue: head & kindMask) }
}

/// A linked batch's extension byte, after a head with `OpHead.extended`.
enum OpHeadExtension {
    /// The author changes: a replica reference follows.
    static let newAuthor: UInt8 = 0x01
    /// A point run with a new shape follows.
    static let newShape: UInt8 = 0x02
}

/// The kinds of operation, in the low four bits of an operation's head.
enum OpKind: UInt8 {
    case beginStroke = 0, appendPoints, addSticker, erase, unerase, color, width, asset
    case position, scale, rotation, z, noBackground, background, canvas
    /// A label's register (named versions): the last kind four bits can name.
    case label

    /// Kinds that name no item (board registers, labels).
    var isBoardKind: Bool { self == .noBackground || self == .background || self == .canvas || self == .label }
}

extension Payload {
    /// The points a stroke operation carries.
    var points: [GridPoint]? {
        switch self {
        case .beginStroke(_, let start): return start.points
        case .appendPoints(_, let points): return points
        default: return nil
        }
    }

    var kind: OpKind {
        switch self {
        case .beginStroke: return .beginStroke
        case .appendPoints: return .appendPoints
        case .addSticker: return .addSticker
        case .setItem(_, let field):
            switch field {
            case .exists(let value): return value ? .unerase : .erase
            case .color: return .color
            case .width: return .width
            case .asset: return .asset
            case .position: return .position
            case .scale: return .scale
            case .rotation: return .rotation
            case .z: return .z
            }
        case .setBoard(let field):
            switch field {
            case .background(let hash): return hash == nil ? .noBackground : .background
            case .canvas: return .canvas
            }
        case .setLabel: return .label
        }
    }
}
