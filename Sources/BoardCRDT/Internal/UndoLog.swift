/// This replica's undo and redo stacks. An entry holds the writes that put back what a group of
/// local operations changed; undoing writes them again as new operations with new timestamps,
/// so undo is itself an edit that merges like any other and touches only what this replica did.
struct UndoLog: Sendable {
    /// One undo step: per register touched, the value it held before the step (`inverses`, in
    /// the order first touched) and the value the step left in it (`forwards`). Undo writes the
    /// inverses; redo writes the step's own values again, never whatever another replica wrote
    /// meanwhile.
    struct Group: Sendable {
        var inverses: [Payload] = []
        var forwards: [Payload] = []
        /// The register of each entry, in the same order: found by a scan while the group is
        /// small (most steps are one edit: no table to allocate and hash), through `lookup` once
        /// it holds more than `scanLimit`.
        var targets: [Target] = []
        var lookup: [Target: Int]?
        static let scanLimit = 8

        /// Keeps the first inverse and the last forward value per register: a drag of many
        /// moves undoes to where it started and redoes to where it ended.
        mutating func record(_ inverse: Payload, forward: Payload, for target: Target) {
            if let index = lookup.map({ $0[target] }) ?? targets.firstIndex(of: target) {
                forwards[index] = forward
                return
            }
            targets.append(target)
            inverses.append(inverse)
            forwards.append(forward)
            if lookup != nil {
                lookup![target] = targets.count - 1
            } else if targets.count > Group.scanLimit {
                lookup = Dictionary(uniqueKeysWithValues: targets.enumerated().map { ($1, $0) })
            }
        }
    }

    enum Target: Hashable, Sendable {
        case item(ItemID, ItemField.Kind)
        case board(BoardField.Kind)
    }

    enum Mode: Sendable {
        case editing
        /// Undo and redo write values from a step: they record nothing new.
        case replaying
    }

    /// Undo history kept per replica; the oldest groups are forgotten beyond this (up to a
    /// quarter more may be held between trims).
    static let limit = 1000

    var undoStack: [Group] = []
    var redoStack: [Group] = []
    var open = Group()
    var depth = 0
    var mode = Mode.editing

    mutating func record(_ inverse: Payload, forward: Payload, for target: Target) {
        guard mode == .editing else { return }
        redoStack.removeAll()
        if depth > 0 {
            open.record(inverse, forward: forward, for: target)
        } else {
            var single = Group()
            single.record(inverse, forward: forward, for: target)
            push(single)
        }
    }

    mutating func begin() {
        depth += 1
    }

    mutating func end() {
        guard depth > 0 else { return }
        depth -= 1
        if depth == 0 {
            if !open.inverses.isEmpty { push(open) }
            open = Group()
        }
    }

    mutating func push(_ group: Group) {
        undoStack.append(group)
        // Trim in chunks: dropping one group per edit would move the whole stack every time.
        if undoStack.count > UndoLog.limit + UndoLog.limit / 4 {
            undoStack.removeFirst(undoStack.count - UndoLog.limit)
        }
    }
}
