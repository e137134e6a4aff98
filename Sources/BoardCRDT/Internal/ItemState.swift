/// Everything a replica knows about one item, including operations that arrived before the item's
/// creation (they wait here until it does).
struct ItemState: Sendable {
    enum Creation: Sendable {
        case stroke(StrokeStart)
        indirect case sticker(StickerStart)
    }

    /// The creating operation. If two creations ever claim one id, the earlier timestamp wins on
    /// every replica, so the outcome does not depend on delivery order.
    var creation: (op: OpID, stamp: Timestamp, kind: Creation)?
    /// The registers written so far, at most one per kind (a stroke has 4, a sticker 6 of the 8
    /// kinds): only those take memory, found by a scan of a few entries.
    var fields: [Register<ItemField>] = []
    /// Appended point runs, sorted by operation id; only the creator's runs are shown.
    var appends: [(op: OpID, points: [GridPoint])] = []
    /// Operations integrated while the creation had not arrived (see `Replica.waitingOperations`).
    var waiting = 0

    subscript(kind: ItemField.Kind) -> ItemField? {
        for register in fields where register.value.kind == kind { return register.value }
        return nil
    }

    mutating func write(_ field: ItemField, stamp: Timestamp, writer: OpID?) -> Register<ItemField>.Outcome {
        let kind = field.kind
        guard let index = fields.firstIndex(where: { $0.value.kind == kind }) else {
            fields.append(Register(value: field, stamp: stamp, writer: writer))
            return .won(displaced: nil)
        }
        return fields[index].write(field, stamp: stamp, writer: writer)
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
