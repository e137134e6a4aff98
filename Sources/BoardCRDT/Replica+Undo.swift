extension Replica {
    public var canUndo: Bool { !undoLog.undoStack.isEmpty || undoLog.depth > 0 }
    public var canRedo: Bool { !undoLog.redoStack.isEmpty }

    /// Undoes this replica's most recent undo step (a stroke, a drag, or one edit) by writing the
    /// values it replaced, with new timestamps. Other replicas' edits are never undone. Returns no
    /// operations when there is nothing to undo. An open stroke or group is closed first.
    public mutating func undo() throws -> LocalEdit {
        closeOpenSteps()
        guard let group = undoLog.undoStack.last else { return LocalEdit() }
        try reserve(group.inverses.count)
        undoLog.undoStack.removeLast()
        // Inverses in reverse order, so a step that wrote a register twice ends at its start.
        let operations = replay(group.inverses.reversed())
        undoLog.redoStack.append(group)
        return LocalEdit(operations: operations)
    }

    /// Re-applies the most recently undone step: writes the values that step wrote (not values
    /// other replicas wrote since). Any new local edit clears the redo stack.
    public mutating func redo() throws -> LocalEdit {
        closeOpenSteps()
        guard let group = undoLog.redoStack.last else { return LocalEdit() }
        try reserve(group.forwards.count)
        undoLog.redoStack.removeLast()
        let operations = replay(group.forwards)
        undoLog.undoStack.append(group)
        return LocalEdit(operations: operations)
    }

    private mutating func closeOpenSteps() {
        finishStroke()
        while undoLog.depth > 0 { undoLog.end() }
    }

    private mutating func replay(_ payloads: [Payload]) -> [Op] {
        undoLog.mode = .replaying
        defer { undoLog.mode = .editing }
        return payloads.map { makeOperation($0) }
    }
}
