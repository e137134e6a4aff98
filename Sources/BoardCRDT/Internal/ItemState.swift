/// Everything a replica knows about one item, including operations that arrived before the item's
/// creation (they wait here until it does).
struct ItemState: Sendable {
    enum Creation: Sendable {
        case stroke(StrokeStart)
        indirect case sticker(StickerStart)

        /// The value this creation gives a register, nil for the kinds it does not set.
        func initialValue(of kind: ItemField.Kind) -> ItemField? {
            switch (self, kind) {
            case (_, .exists): return .exists(true)
            case (.stroke(let start), .color): return .color(start.color)
            case (.stroke(let start), .width): return .width(start.width)
            case (.stroke(let start), .z): return .z(start.z)
            case (.sticker(let start), .asset): return .asset(start.asset)
            case (.sticker(let start), .position): return .position(start.position)
            case (.sticker(let start), .scale): return .scale(start.scale)
            case (.sticker(let start), .rotation): return .rotation(start.rotation)
            case (.sticker(let start), .z): return .z(start.z)
            default: return nil
            }
        }
    }

    /// The creating operation. If two creations ever claim one id, the earlier timestamp wins on
    /// every replica, so the outcome does not depend on delivery order.
    var creation: (op: OpID, stamp: Timestamp, kind: Creation)?
    /// The registers written by operations other than the creation, at most one per kind, found
    /// by a scan of a few entries. A register the creation set and nothing overwrote is not
    /// stored: it reads the creation's value at the creation's timestamp. So an item never
    /// edited after it was made (most strokes) keeps no registers at all.
    private(set) var fields: [Register<ItemField>] = []
    /// Appended point runs, sorted by operation id; only the creator's runs are shown.
    var appends: [(op: OpID, points: [GridPoint])] = []
    /// Operations integrated while the creation had not arrived (see `Replica.waitingOperations`).
    var waiting = 0

    subscript(kind: ItemField.Kind) -> ItemField? {
        for register in fields where register.value.kind == kind { return register.value }
        return creation?.kind.initialValue(of: kind)
    }

    mutating func write(_ field: ItemField, stamp: Timestamp, writer: OpID?) -> Register<ItemField>.Outcome {
        let kind = field.kind
        guard let index = fields.firstIndex(where: { $0.value.kind == kind }) else {
            // The creation's value, if it set this register, holds it at the creation's stamp.
            if let creation, creation.kind.initialValue(of: kind) != nil, stamp <= creation.stamp {
                return .lost
            }
            fields.append(Register(value: field, stamp: stamp, writer: writer))
            return .won(displaced: nil)
        }
        return fields[index].write(field, stamp: stamp, writer: writer)
    }

    /// What one operation did to the item (`integrate`).
    enum Effect {
        /// A creation; this many operations had waited for it.
        case created(waited: Int)
        /// A run of points kept; `waits` when the creation has not arrived.
        case appended(waits: Bool)
        /// A register write and its outcome; `waits` when the creation has not arrived.
        case wrote(Register<ItemField>.Outcome, waits: Bool)
        /// Not an operation on an item.
        case ignored
    }

    /// Integrates one of the item's operations, the one way both a replica
    /// (`Replica.integrate`) and a history's item timelines (`ItemFold`) do: a creation at the
    /// operation's timestamp, a kept run of points, or a register written at `stamp`. Each
    /// operation is given once.
    mutating func integrate(_ op: Op, stamp: Timestamp) -> Effect {
        switch op.payload {
        case .beginStroke(_, let start):
            return .created(waited: create(by: op.id, stamp: op.timestamp, as: .stroke(start)))
        case .addSticker(_, let start):
            return .created(waited: create(by: op.id, stamp: op.timestamp, as: .sticker(start)))
        case .appendPoints(_, let points):
            return .appended(waits: insertAppend(op: op.id, points: points))
        case .setItem(_, let field):
            let (outcome, waits) = writeNoting(field, stamp: stamp, writer: op.id)
            return .wrote(outcome, waits: waits)
        case .setBoard, .setLabel:
            return .ignored
        }
    }

    /// Records a creation, which writes its initial values to the registers at its timestamp.
    ///
    /// The first creation to arrive stores no registers: writes that arrived before it and lost
    /// to it are removed, so reads see its values (their operations stay in the log, as they did
    /// when the creation overwrote them). Two creations of one id are refused by admission but
    /// merge deterministically anyway: the earlier keeps the item's kind, and each register takes
    /// the later timestamp's value, so the first one's values are stored before the second
    /// writes its own. Returns how many operations waited for the creation (they wait no more).
    mutating func create(by op: OpID, stamp: Timestamp, as kind: Creation) -> Int {
        let waited = waiting
        waiting = 0
        guard let existing = creation else {
            creation = (op: op, stamp: stamp, kind: kind)
            fields.removeAll { kind.initialValue(of: $0.value.kind) != nil && $0.stamp < stamp }
            return waited
        }
        for fieldKind in ItemField.Kind.allCases where !fields.contains(where: { $0.value.kind == fieldKind }) {
            if let value = existing.kind.initialValue(of: fieldKind) {
                fields.append(Register(value: value, stamp: existing.stamp, writer: nil))
            }
        }
        if stamp < existing.stamp { creation = (op: op, stamp: stamp, kind: kind) }
        for fieldKind in ItemField.Kind.allCases {
            if let value = kind.initialValue(of: fieldKind) { _ = write(value, stamp: stamp, writer: nil) }
        }
        return waited
    }

    /// Writes a register of a plain set; also says whether the operation now waits for the
    /// item's creation (counted in `waiting`).
    mutating func writeNoting(_ field: ItemField, stamp: Timestamp, writer: OpID?) -> (Register<ItemField>.Outcome, waits: Bool) {
        let waits = noteIfWaiting()
        return (write(field, stamp: stamp, writer: writer), waits)
    }

    /// Keeps an appended point run; returns whether it waits for the item's creation.
    @discardableResult
    mutating func insertAppend(op: OpID, points: [GridPoint]) -> Bool {
        let waits = noteIfWaiting()
        var index = appends.endIndex
        while index > appends.startIndex, appends[index - 1].op > op {
            index -= 1
        }
        appends.insert((op: op, points: points), at: index)
        return waits
    }

    /// Counts one more operation waiting for the creation, if it has not arrived.
    private mutating func noteIfWaiting() -> Bool {
        guard creation == nil else { return false }
        waiting += 1
        return true
    }

    var isStroke: Bool {
        if case .stroke = creation?.kind { return true }
        return false
    }

    var isSticker: Bool {
        if case .sticker = creation?.kind { return true }
        return false
    }

    var isVisible: Bool {
        creation != nil && self[.exists] == .exists(true)
    }

    var z: ZKey? {
        if case .z(let key) = self[.z] { return key }
        return nil
    }
}
