import BoardCRDT
import BoardModel
import Foundation

/// One value a repair changed: what the package showed before (its view, `manifest.json` and the
/// images beside it) against what the salvaged log holds, which the package shows from then on.
public struct RegisterChange: Sendable, Equatable {
    /// Whose register: the board's own (canvas, background) or an item's.
    public enum Subject: Sendable, Equatable, Hashable {
        case board
        case item(UUID, ItemKind)

        public var item: UUID? {
            if case .item(let id, _) = self { return id }
            return nil
        }
    }

    /// The registers of the model (docs/SEMANTICS.md), as a board shows them.
    public enum Register: String, Sendable, CaseIterable {
        /// The board's canvas size and background image.
        case canvas, background
        /// Whether the item is on the board (false: deleted or erased; true after a restore).
        case shown
        /// A stroke's colour, width, and how many points it has (appended runs can be lost).
        case color, width, points
        /// A sticker's image, centre, scale and rotation.
        case image, position, scale, rotation
        /// The item's place in the paint order (z), bottom to top.
        case paintOrder
    }

    public enum Value: Sendable, Equatable {
        case size(CodableSize)
        /// An image by its lowercase hex SHA-256; nil for no image.
        case image(sha256: String?)
        case shown(Bool)
        case color(RGBAColor)
        case number(Double)
        case point(CodablePoint)
        case count(Int)
        /// 1 is the bottom item, `of` is how many items the board shows.
        case place(Int, of: Int)
    }

    public var subject: Subject
    public var register: Register
    public var before: Value
    public var after: Value

    public init(_ subject: Subject, _ register: Register, before: Value, after: Value) {
        self.subject = subject
        self.register = register
        self.before = before
        self.after = after
    }
}

extension RepairReport {
    /// An item the board showed before the repair that the salvaged log does not hold at all.
    public struct LostItem: Sendable, Equatable {
        public var id: UUID
        public var kind: ItemKind
    }

    /// Every register whose value differs between `shown` (the board the package showed) and the
    /// salvaged replica, in the order a person reads a board: the canvas, the background, then the
    /// items bottom to top as `shown` painted them (each item's registers in `Register` order),
    /// then items only the salvaged board shows. Items `shown` held that the replica does not
    /// (or holds as another kind) are `lost` instead. Nothing here trusts `shown`: it may be any
    /// manifest a reader accepted (duplicate ids, a paint order naming unknown ids).
    static func compare(shown before: BoardSnapshot, salvaged replica: Replica) -> (changes: [RegisterChange], lost: [LostItem]) {
        let after = replica.snapshot()
        var changes: [RegisterChange] = []
        var lost: [LostItem] = []
        if before.canvasSize != after.canvasSize {
            changes.append(RegisterChange(.board, .canvas, before: .size(before.canvasSize), after: .size(after.canvasSize)))
        }
        let backgroundBefore = before.backgroundSHA256?.lowercased() ?? before.backgroundPNG.map { AssetHash.of($0).hex }
        if backgroundBefore != after.backgroundSHA256 {
            changes.append(RegisterChange(.board, .background, before: .image(sha256: backgroundBefore), after: .image(sha256: after.backgroundSHA256)))
        }

        // The items the view showed, bottom to top, each once.
        enum Shown { case stroke(InkStroke), sticker(PlacedSticker) }
        var shownItems: [UUID: Shown] = [:]
        for stroke in before.strokes where shownItems[stroke.id] == nil { shownItems[stroke.id] = .stroke(stroke) }
        for sticker in before.stickers where shownItems[sticker.id] == nil { shownItems[sticker.id] = .sticker(sticker) }
        var beforeOrder: [UUID] = []
        var placed = Set<UUID>()
        for id in (before.paintOrder ?? []) + before.strokes.map(\.id) + before.stickers.map(\.id)
        where shownItems[id] != nil && placed.insert(id).inserted {
            beforeOrder.append(id)
        }
        let afterOrder = after.paintOrder ?? []

        var matched = Set<UUID>()  // the view's items the salvaged log holds as the same kind
        var common: [UUID] = []    // of those, the ones both boards show, in the view's order
        var itemChanges: [UUID: [RegisterChange]] = [:]
        for id in beforeOrder {
            let item = ItemID(uuid: id)
            switch shownItems[id]! {
            case .stroke(let stroke):
                guard replica.kind(of: item) == .stroke, let style = replica.strokeStyle(item) else {
                    lost.append(LostItem(id: id, kind: .stroke))
                    continue
                }
                matched.insert(id)
                let subject = RegisterChange.Subject.item(id, .stroke)
                var found: [RegisterChange] = []
                if style.isErased { found.append(RegisterChange(subject, .shown, before: .shown(true), after: .shown(false))) }
                if !sameColor(stroke.color, style.color) {
                    found.append(RegisterChange(subject, .color, before: .color(stroke.color), after: .color(style.color)))
                }
                if stroke.width != style.width {
                    found.append(RegisterChange(subject, .width, before: .number(stroke.width), after: .number(style.width)))
                }
                let points = replica.points(of: item)
                if stroke.points != points {
                    found.append(RegisterChange(subject, .points, before: .count(stroke.points.count), after: .count(points.count)))
                }
                itemChanges[id] = found
                if !style.isErased { common.append(id) }
            case .sticker(let sticker):
                guard replica.kind(of: item) == .sticker, let state = replica.sticker(item) else {
                    lost.append(LostItem(id: id, kind: .sticker))
                    continue
                }
                matched.insert(id)
                let subject = RegisterChange.Subject.item(id, .sticker)
                var found: [RegisterChange] = []
                if state.isDeleted { found.append(RegisterChange(subject, .shown, before: .shown(true), after: .shown(false))) }
                let imageBefore = sticker.imageSHA256?.lowercased() ?? (sticker.imagePNG.isEmpty ? nil : AssetHash.of(sticker.imagePNG).hex)
                if imageBefore != state.asset.hex {
                    found.append(RegisterChange(subject, .image, before: .image(sha256: imageBefore), after: .image(sha256: state.asset.hex)))
                }
                if sticker.position != state.position {
                    found.append(RegisterChange(subject, .position, before: .point(sticker.position), after: .point(state.position)))
                }
                if sticker.scale != state.scale {
                    found.append(RegisterChange(subject, .scale, before: .number(sticker.scale), after: .number(state.scale)))
                }
                if sticker.rotationRadians != state.rotation {
                    found.append(RegisterChange(subject, .rotation, before: .number(sticker.rotationRadians), after: .number(state.rotation)))
                }
                itemChanges[id] = found
                if !state.isDeleted { common.append(id) }
            }
        }

        // Paint order: of the items both boards show, the fewest whose order changed (those
        // outside a longest run the salvaged board keeps in the view's order). An item lost
        // or added shifts the others' places without changing their order: not a change. A view
        // without a paint order (the seed's schema 1) knows the order only within each kind (its
        // two lists), so each kind is compared on its own, places counting that kind's items.
        let kindOf = { (id: UUID) in replica.kind(of: ItemID(uuid: id)) }
        let shownKind = { (id: UUID) -> ItemKind? in
            switch shownItems[id] {
            case .stroke?: return .stroke
            case .sticker?: return .sticker
            case nil: return nil
            }
        }
        let scopes: [(items: [UUID], before: [UUID], after: [UUID])] = before.paintOrder != nil
            ? [(common, beforeOrder, afterOrder)]
            : [ItemKind.stroke, .sticker].map { kind in
                (common.filter { kindOf($0) == kind }, beforeOrder.filter { shownKind($0) == kind }, afterOrder.filter { kindOf($0) == kind })
            }
        for scope in scopes {
            let beforePlace = Dictionary(scope.before.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
            let afterPlace = Dictionary(scope.after.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
            let kept = Set(longestIncreasingRun(scope.items.map { afterPlace[$0] ?? Int.max }).map { scope.items[$0] })
            for id in scope.items where !kept.contains(id) {
                guard let was = beforePlace[id], let now = afterPlace[id], let kind = kindOf(id) else { continue }
                itemChanges[id, default: []].append(RegisterChange(.item(id, kind), .paintOrder,
                    before: .place(was + 1, of: scope.before.count), after: .place(now + 1, of: scope.after.count)))
            }
        }
        for id in beforeOrder { changes += itemChanges[id] ?? [] }

        // Items the salvaged board shows that the view did not (a delete the log lost, say).
        for id in afterOrder where !matched.contains(id) {
            guard let kind = replica.kind(of: ItemID(uuid: id)) else { continue }
            changes.append(RegisterChange(.item(id, kind), .shown, before: .shown(false), after: .shown(true)))
        }
        return (changes, lost)
    }

    /// Colours as boards store them (8 bits a channel); exactly, when a channel is not finite.
    private static func sameColor(_ a: RGBAColor, _ b: RGBAColor) -> Bool {
        if let a8 = Color8(a), let b8 = Color8(b) { return a8 == b8 }
        return a == b
    }

    /// Indices of one longest strictly increasing subsequence of `values` (the earliest such run
    /// by patience sorting, so the result does not depend on anything but `values`).
    static func longestIncreasingRun(_ values: [Int]) -> [Int] {
        var tails: [Int] = []          // index into values of the smallest tail of each length
        var previous = [Int](repeating: -1, count: values.count)
        for (index, value) in values.enumerated() {
            var low = 0, high = tails.count
            while low < high {
                let middle = (low + high) / 2
                if values[tails[middle]] < value { low = middle + 1 } else { high = middle }
            }
            if low > 0 { previous[index] = tails[low - 1] }
            if low == tails.count { tails.append(index) } else { tails[low] = index }
        }
        var run: [Int] = []
        var index = tails.last ?? -1
        while index >= 0 {
            run.append(index)
            index = previous[index]
        }
        return run.reversed()
    }
}
