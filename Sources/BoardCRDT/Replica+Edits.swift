import BoardModel
import Foundation

// Local edits. Each validates its input, makes operations with this replica's next sequence
// numbers and Lamport counters, integrates them, records their inverse for undo, and returns them.
extension Replica {
    // MARK: Strokes

    /// Starts a stroke on top of the board and keeps it in progress until `finishStroke(_:)`:
    /// `appendPoints(_:to:)` extends it. Several strokes may be in progress at once (fingers,
    /// pens). A stroke is one undo step of its own, whatever else is edited while it is drawn.
    /// `id` is for imports that keep an existing UUID; new strokes leave it nil and are named
    /// after their creating operation.
    public mutating func beginStroke(id explicitID: ItemID? = nil, color: RGBAColor, width: Double, points: [CodablePoint] = []) throws -> LocalEdit {
        guard let color8 = Color8(color) else { throw EditError.notFinite("stroke color") }
        let widthUnits = try Replica.width(width)
        let grid = try Replica.grid(points)
        if let explicitID, items[explicitID]?.creation != nil { throw EditError.duplicateItem(explicitID) }
        let item = explicitID ?? ItemID(createdBy: OpID(replica: id, seq: lastSeq + 1))
        let operations = try create(item) { z in
            .beginStroke(item, StrokeStart(color: color8, width: widthUnits, z: z, points: grid))
        }
        openStrokes.append(item)
        return LocalEdit(item: item, operations: operations)
    }

    /// Adds points to the end of `stroke`, which this replica must be drawing (begun here and
    /// not finished); anything else throws and changes nothing.
    public mutating func appendPoints(_ points: [CodablePoint], to stroke: ItemID) throws -> LocalEdit {
        guard openStrokes.contains(stroke) else {
            try require(stroke, .stroke)
            throw EditError.strokeNotInProgress(stroke)
        }
        let grid = try Replica.grid(points)
        guard !grid.isEmpty else { return LocalEdit(item: stroke) }
        try reserve(1)
        return LocalEdit(item: stroke, operations: [makeOperation(.appendPoints(stroke, grid))])
    }

    /// Adds points to the stroke begun most recently and not finished (one pen at a time).
    public mutating func appendPoints(_ points: [CodablePoint]) throws -> LocalEdit {
        guard let stroke = openStroke else { throw EditError.noStrokeInProgress }
        return try appendPoints(points, to: stroke)
    }

    /// Ends one stroke in progress (no operation: peers need no marker).
    public mutating func finishStroke(_ stroke: ItemID) {
        openStrokes.removeAll { $0 == stroke }
    }

    /// Ends every stroke in progress.
    public mutating func finishStroke() {
        openStrokes.removeAll()
    }

    public mutating func setColor(_ item: ItemID, to color: RGBAColor) throws -> LocalEdit {
        try require(item, .stroke)
        guard let color8 = Color8(color) else { throw EditError.notFinite("stroke color") }
        return try set(item, .color(color8))
    }

    public mutating func setWidth(_ item: ItemID, to width: Double) throws -> LocalEdit {
        try require(item, .stroke)
        let units = try Replica.width(width)
        return try set(item, .width(units))
    }

    // MARK: Stickers

    /// Places a sticker showing the asset with `asset` as hash, on top of the board. The bytes
    /// may arrive later; until then the sticker is pending.
    public mutating func addSticker(id explicitID: ItemID? = nil, asset: AssetHash, at position: CodablePoint, scale: Double = 1, rotation: Double = 0) throws -> LocalEdit {
        guard let point = GridPoint(position) else { throw EditError.notFinite("sticker position") }
        let scale = try Replica.finite(scale, "sticker scale")
        let rotation = try Replica.finite(rotation, "sticker rotation")
        if let explicitID, items[explicitID]?.creation != nil { throw EditError.duplicateItem(explicitID) }
        let item = explicitID ?? ItemID(createdBy: OpID(replica: id, seq: lastSeq + 1))
        let operations = try create(item) { z in
            .addSticker(item, StickerStart(asset: asset, position: point, scale: scale, rotation: rotation, z: z))
        }
        return LocalEdit(item: item, operations: operations)
    }

    /// Stores `imagePNG` in the asset store and places it as a sticker.
    public mutating func addSticker(imagePNG: Data, at position: CodablePoint, scale: Double = 1, rotation: Double = 0) throws -> LocalEdit {
        let hash = AssetHash.of(imagePNG)
        let edit = try addSticker(asset: hash, at: position, scale: scale, rotation: rotation)
        _ = storeAsset(imagePNG)
        return edit
    }

    public mutating func replaceImage(_ item: ItemID, with asset: AssetHash) throws -> LocalEdit {
        try require(item, .sticker)
        return try set(item, .asset(asset))
    }

    public mutating func replaceImage(_ item: ItemID, withPNG imagePNG: Data) throws -> LocalEdit {
        try require(item, .sticker)
        try reserve(1)  // before the bytes go into the store: a refused edit changes nothing
        return try set(item, .asset(storeAsset(imagePNG)))
    }

    /// Moves a sticker's centre. Call between `beginUndoGroup()` and `endUndoGroup()` for a drag,
    /// so the whole drag is one undo step.
    public mutating func move(_ item: ItemID, to position: CodablePoint) throws -> LocalEdit {
        try require(item, .sticker)
        guard let point = GridPoint(position) else { throw EditError.notFinite("sticker position") }
        return try set(item, .position(point))
    }

    public mutating func setScale(_ item: ItemID, to scale: Double) throws -> LocalEdit {
        try require(item, .sticker)
        let value = try Replica.finite(scale, "sticker scale")
        return try set(item, .scale(value))
    }

    public mutating func setRotation(_ item: ItemID, to radians: Double) throws -> LocalEdit {
        try require(item, .sticker)
        let value = try Replica.finite(radians, "sticker rotation")
        return try set(item, .rotation(value))
    }

    /// Scales and/or rotates a sticker as one undo step (two registers, each merging on its
    /// own: a concurrent rotation elsewhere keeps this scale). Both values are checked before
    /// anything changes.
    public mutating func transform(_ item: ItemID, scale: Double? = nil, rotation: Double? = nil) throws -> LocalEdit {
        try require(item, .sticker)
        let scaleValue = try scale.map { try Replica.finite($0, "sticker scale") }
        let rotationValue = try rotation.map { try Replica.finite($0, "sticker rotation") }
        try reserve(2)
        undoLog.begin()
        defer { undoLog.end() }
        var made: [Op] = []
        if let scaleValue { made += try set(item, .scale(scaleValue)).operations }
        if let rotationValue { made += try set(item, .rotation(rotationValue)).operations }
        return LocalEdit(item: item, operations: made)
    }

    // MARK: Any item

    /// Deletes a sticker or erases a stroke. Its registers keep merging; `restore` shows it again.
    public mutating func delete(_ item: ItemID) throws -> LocalEdit {
        try require(item, nil)
        return try set(item, .exists(false))
    }

    /// Brings back a deleted sticker or erased stroke with every edit merged meanwhile.
    public mutating func restore(_ item: ItemID) throws -> LocalEdit {
        try require(item, nil)
        return try set(item, .exists(true))
    }

    /// Paints `item` above every other item. Usually one operation; when the top key has grown
    /// long (or a peer wrote an absurd one), neighbouring items are re-keyed in the same step.
    public mutating func bringToFront(_ item: ItemID) throws -> LocalEdit {
        try require(item, nil)
        return try place(item, at: .top)
    }

    /// Paints `item` below every other item (see `bringToFront`).
    public mutating func sendToBack(_ item: ItemID) throws -> LocalEdit {
        try require(item, nil)
        return try place(item, at: .bottom)
    }

    /// Paints `item` above `lower` and below `upper` (the two may be given in either order).
    /// When there is no short key between theirs (they share a key, a tie broken by id, or a
    /// peer left no room), neighbours are re-keyed in the same step.
    public mutating func put(_ item: ItemID, between first: ItemID, and second: ItemID) throws -> LocalEdit {
        try require(item, nil)
        try require(first, nil)
        try require(second, nil)
        guard item != first, item != second, first != second else { throw EditError.sameItem(item) }
        var (lower, upper) = (first, second)
        if paintKey(upper) < paintKey(lower) { swap(&lower, &upper) }
        return try place(item, at: .between(lower, upper))
    }

    // MARK: Board

    /// Sets (or with nil, clears) the background to the asset with this hash.
    public mutating func setBackground(asset: AssetHash?) throws -> LocalEdit {
        try reserve(1)
        return LocalEdit(operations: [makeOperation(.setBoard(.background(asset)))])
    }

    /// Stores the PNG bytes and makes them the background.
    public mutating func setBackground(imagePNG: Data) throws -> LocalEdit {
        try reserve(1)  // before the bytes go into the store: a refused edit changes nothing
        return try setBackground(asset: storeAsset(imagePNG))
    }

    public mutating func setCanvasSize(_ size: CodableSize) throws -> LocalEdit {
        guard let width = FixedPoint.units(size.width), let height = FixedPoint.units(size.height),
              width > 0, height > 0 else {
            throw EditError.invalidCanvas(width: size.width, height: size.height)
        }
        try reserve(1)
        return LocalEdit(operations: [makeOperation(.setBoard(.canvas(width: width, height: height)))])
    }

    // MARK: Undo grouping

    /// Opens an undo step: every local edit until the matching `endUndoGroup()` undoes together.
    /// Groups nest; only the outermost one makes a step.
    public mutating func beginUndoGroup() {
        undoLog.begin()
    }

    public mutating func endUndoGroup() {
        undoLog.end()
    }
}

// MARK: Helpers

extension Replica {
    /// Makes, records for undo, and integrates one local operation.
    mutating func makeOperation(_ payload: Payload) -> Op {
        recordInverse(of: payload)
        lastSeq += 1
        lamport += 1
        let op = Op(id: OpID(replica: id, seq: lastSeq), lamport: lamport, payload: payload)
        integrate(op)
        return op
    }

    /// Makes the creation of `item` on top of the board (`payload` given its z key) and, when
    /// the top leaves no short key, re-keys neighbours after it, in one undo step. The creation
    /// comes first: an item is named after its creating operation.
    private mutating func create(_ item: ItemID, _ payload: (ZKey) -> Payload) throws -> [Op] {
        let placement = try placement(of: item, at: .top)
        try reserve(placement.count)
        guard placement.rebalanced else { return [makeOperation(payload(placement.key))] }
        undoLog.begin()
        defer { undoLog.end() }
        let creation = makeOperation(payload(placement.key))
        return [creation] + write(placement, withItem: false)
    }

    /// One register write: a single operation, refused when the clock has no room for it.
    private mutating func set(_ item: ItemID, _ field: ItemField) throws -> LocalEdit {
        try reserve(1)
        return LocalEdit(item: item, operations: [makeOperation(.setItem(item, field))])
    }

    /// Write-read symmetry: refuses an edit whose operations would carry a sequence number or
    /// Lamport counter that every reader refuses (only reachable after a peer pushed the clock
    /// to its end, which admission makes take billions of operations).
    func reserve(_ count: Int) throws {
        let room = Op.maxCounter
        guard lastSeq <= room - UInt64(count), lamport <= room - UInt64(count) else {
            throw EditError.clockExhausted
        }
    }

    private mutating func recordInverse(of payload: Payload) {
        switch payload {
        case .beginStroke(let item, _), .addSticker(let item, _):
            undoLog.record(.setItem(item, .exists(false)), forward: .setItem(item, .exists(true)), for: .item(item, .exists))
        case .appendPoints:
            break
        case .setItem(let item, let field):
            if let current = items[item]?[field.kind] {
                undoLog.record(.setItem(item, current), forward: payload, for: .item(item, field.kind))
            }
        case .setBoard(let field):
            let current = field.kind == .canvas ? canvas.value : background.value
            undoLog.record(.setBoard(current), forward: payload, for: .board(field.kind))
        case .setLabel:
            break  // labels are not part of the board's undo history
        }
    }

    private func require(_ item: ItemID, _ kind: ItemKind?) throws {
        guard let actual = self.kind(of: item) else { throw EditError.unknownItem(item) }
        if let kind, actual != kind { throw EditError.wrongKind(item, expected: kind) }
    }

    /// The paint-order key of an item: z first, id to break ties.
    func paintKey(_ item: ItemID) -> PaintKey {
        PaintKey(z: items[item]?.z ?? ZKey.initial, item: item)
    }

    private static func grid(_ points: [CodablePoint]) throws -> [GridPoint] {
        guard points.count <= Op.maxPoints else { throw EditError.tooManyPoints(points.count) }
        return try points.map { point in
            guard let grid = GridPoint(point) else { throw EditError.notFinite("stroke point") }
            return grid
        }
    }

    private static func width(_ width: Double) throws -> Int64 {
        guard let units = FixedPoint.units(width), units >= 0 else { throw EditError.invalidWidth(width) }
        return units
    }

    private static func finite(_ value: Double, _ what: String) throws -> Double {
        guard value.isFinite else { throw EditError.notFinite(what) }
        return value == 0 ? 0 : value  // one spelling of zero, so canonical bytes agree
    }
}

/// Paint order: by z key, then item id.
struct PaintKey: Comparable {
    var z: ZKey
    var item: ItemID

    static func < (lhs: PaintKey, rhs: PaintKey) -> Bool {
        (lhs.z, lhs.item) < (rhs.z, rhs.item)
    }
}
