extension Replica {
    public var canUndo: Bool { !undoLog.undoStack.isEmpty || undoLog.depth > 0 }
    public var canRedo: Bool { !undoLog.redoStack.isEmpty }

    /// Undoes this replica's most recent undo step (a stroke, a drag, or one edit) by writing the
    /// values it replaced, with new timestamps. Other replicas' edits are never undone. Returns no
    /// operations when there is nothing to undo. An open stroke or group is closed first.
    public mutating func undo() -> LocalEdit {
        closeOpenSteps()
        guard let group = undoLog.undoStack.popLast() else { return LocalEdit() }
        let operations = replay(group, mode: .undoing)
        undoLog.redoStack.append(undoLog.replay)
        undoLog.replay = UndoLog.Group()
        return LocalEdit(operations: operations)
    }

    /// Re-applies the most recently undone step. Any new local edit clears the redo stack.
    public mutating func redo() -> LocalEdit {
        closeOpenSteps()
        guard let group = undoLog.redoStack.popLast() else { return LocalEdit() }
        let operations = replay(group, mode: .redoing)
        undoLog.undoStack.append(undoLog.replay)
        undoLog.replay = UndoLog.Group()
        return LocalEdit(operations: operations)
    }

    private mutating func closeOpenSteps() {
        finishStroke()
        while undoLog.depth > 0 { undoLog.end() }
    }

    private mutating func replay(_ group: UndoLog.Group, mode: UndoLog.Mode) -> [Op] {
        undoLog.mode = mode
        undoLog.replay = UndoLog.Group()
        defer { undoLog.mode = .editing }
        // Inverses in reverse order, so a step that wrote a register twice ends at its start.
        return group.inverses.reversed().map { makeOperation($0) }
    }
}
