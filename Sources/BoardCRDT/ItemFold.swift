import BoardModel

/// One item's state built from its own operations alone, by the rules a replica integrates
/// them with (`ItemState.integrate`, which `Replica.integrate` calls too). An item's look
/// depends on its own operations and nothing else, so a history can show an item as it was
/// after any of them without a replica of the whole board (`BoardHistory`'s item timelines).
public struct ItemFold: Sendable {
    public let id: ItemID
    private var state = ItemState()
    /// The sticker's image hash and its hex text, made once per image rather than per look.
    private var imageName: (hash: AssetHash, text: String)?
    /// How many points the stroke shows (`strokePointCount`), kept as operations arrive.
    private var pointCount = 0

    public init(_ id: ItemID) {
        self.id = id
    }

    /// Integrates one of the item's operations, at its own timestamp. Each operation is given
    /// once, as a replica reading its own log does; one on another item, the board or a label
    /// changes nothing.
    public mutating func integrate(_ op: Op) {
        guard op.payload.item == id else { return }
        let creator = state.creation?.op
        _ = state.integrate(op, stamp: op.timestamp)
        if let hash = state.stickerAsset, hash != imageName?.hash { imageName = (hash, hash.hex) }
        if state.creation?.op != creator {
            pointCount = state.strokePointCount()  // a creation: the runs that waited for it count now
        } else if case .appendPoints(_, let points) = op.payload, op.id.replica == creator?.replica {
            pointCount += points.count
        }
    }

    /// The creating operation that counts (nil before one arrives). A stroke's points are its
    /// creation's first points and its creator's runs: while the creation stays, each look's
    /// points are the first `strokePointCount` of a later look's.
    public var creation: OpID? { state.creation?.op }

    /// How many points the stroke shows now (0 for a sticker or before the creation), without
    /// making them: O(1).
    public var strokePointCount: Int { pointCount }

    /// The stroke's points now (empty for a sticker or before the creation).
    public var strokePoints: [CodablePoint] { state.strokePoints().map(\.codable) }

    /// The item as `Replica.visibleItem(_:)` shows it with these operations, sticker images
    /// from `assets` (nil when it is not visible).
    public func visible(assets: AssetStore) -> VisibleItem? {
        state.visible(id, assets: assets, imageName: imageName?.text)
    }

    /// `visible(assets:)` with a stroke's points left out (empty): O(1) however long the
    /// stroke, for a history that keeps each stroke's points once (`strokePoints`,
    /// `strokePointCount`).
    public func visibleWithoutPoints(assets: AssetStore) -> VisibleItem? {
        state.visible(id, assets: assets, imageName: imageName?.text, withPoints: false)
    }
}

/// The board's own registers (canvas size, background) built from the board's operations
/// alone, by the rules a replica writes them with.
public struct BoardFieldsFold: Sendable {
    /// The canvas every board starts with (`BoardSnapshot.defaultCanvasSize`).
    static let initialCanvas = BoardField.canvas(width: Int64(BoardSnapshot.defaultCanvasSize.width * FixedPoint.unitsPerPoint),
                                                 height: Int64(BoardSnapshot.defaultCanvasSize.height * FixedPoint.unitsPerPoint))
    private var canvas = Register<BoardField>(value: initialCanvas, stamp: .zero, writer: nil)
    private var background = Register<BoardField>(value: .background(nil), stamp: .zero, writer: nil)

    public init() {}

    /// Integrates one of the board's operations (`setBoard`); any other changes nothing.
    public mutating func integrate(_ op: Op) {
        guard case .setBoard(let field) = op.payload else { return }
        switch field {
        case .canvas: _ = canvas.write(field, stamp: op.timestamp, writer: op.id)
        case .background: _ = background.write(field, stamp: op.timestamp, writer: op.id)
        }
    }

    /// The background image's hash, nil for none.
    public var backgroundAsset: AssetHash? {
        if case .background(let hash?) = background.value { return hash }
        return nil
    }

    /// Sets the board's fields on `board` as `Replica.setBoardFields(of:)` does, the background
    /// image from `assets`.
    public func set(on board: inout BoardSnapshot, assets: AssetStore) {
        Replica.setBoardFields(canvas: canvas.value, background: background.value, assets: assets, of: &board)
    }
}
