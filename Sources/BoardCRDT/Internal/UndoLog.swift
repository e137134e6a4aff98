/// This replica's undo and redo stacks. An entry holds the writes that put back what a group of
/// local operations changed; undoing writes them again as new operations with new timestamps,
/// so undo is itself an edit that merges like any other and touches only what this replica did.
struct UndoLog: Sendable {
    struct Group: Sendable {
        var inverses: [Payload] = []
        var targets: Set<Target> = []

        /// Keeps the first inverse per register: a drag of many moves undoes to where it started.
        mutating func record(_ inverse: Payload, for target: Target) {
            if targets.insert(target).inserted {
                inverses.append(inverse)
            }
        }
    }

    enum Target: Hashable, Sendable {
        case item(ItemID, ItemField.Kind)
        case board(BoardField.Kind)
    }

    enum Mode: Sendable {
        case editing
        case undoing
        case redoing
    }

    /// Undo history kept per replica; the oldest groups are forgotten beyond this (up to a
    /// quarter more may be held between trims).
    static let limit = 1000

    var undoStack: [Group] = []
    var redoStack: [Group] = []
    var open = Group()
    var depth = 0
    var mode = Mode.editing
    var replay = Group()

    mutating func record(_ inverse: Payload, for target: Target) {
        switch mode {
        case .undoing, .redoing:
            replay.record(inverse, for: target)
        case .editing:
            redoStack.removeAll()
            if depth > 0 {
                open.record(inverse, for: target)
            } else {
                var single = Group()
                single.record(inverse, for: target)
                push(single)
            }
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

    private mutating func push(_ group: Group) {
        undoStack.append(group)
        // Trim in chunks: dropping one group per edit would move the whole stack every time.
        if undoStack.count > UndoLog.limit + UndoLog.limit / 4 {
            undoStack.removeFirst(undoStack.count - UndoLog.limit)
        }
    }
}
