extension Replica {
    public var canUndo: Bool { !undoLog.undoStack.isEmpty || undoLog.depth > 0 }
    public var canRedo: Bool { !undoLog.redoStack.isEmpty }

    /// Undoes this replica's most recent undo step (a stroke, a drag, or one edit) by writing the
    /// values it replaced, with new timestamps. Other replicas' edits are never undone. Returns no
    /// operations when there is nothing to undo. An open stroke or group is closed first.
    public mutating func undo() throws -> LocalEdit {
        closeOpenSteps()
        guard let group = undoLog.undoStack.last else { return LocalEdit() }
        try reserve(room(toReplay: group.inverses))
        undoLog.undoStack.removeLast()
        // Inverses in reverse order, so a step that wrote a register twice ends at its start.
        let operations = try replay(group.inverses.reversed())
        undoLog.redoStack.append(group)
        return LocalEdit(operations: operations)
    }

    /// Re-applies the most recently undone step: writes the values that step wrote (not values
    /// other replicas wrote since). Any new local edit clears the redo stack.
    public mutating func redo() throws -> LocalEdit {
        closeOpenSteps()
        guard let group = undoLog.redoStack.last else { return LocalEdit() }
        try reserve(room(toReplay: group.forwards))
        undoLog.redoStack.removeLast()
        let operations = try replay(group.forwards)
        undoLog.undoStack.append(group)
        return LocalEdit(operations: operations)
    }

    private mutating func closeOpenSteps() {
        finishStroke()
        while undoLog.depth > 0 { undoLog.end() }
    }

    /// Writes a step's values again. A z key longer than `ZKey.comfortableLength` (a peer's
    /// absurd key that a local edit replaced, or one from a saved history) is not written: the
    /// item goes where that key would paint it, with a short key (`place(atKeys:)`), after the
    /// step's other values.
    private mutating func replay(_ payloads: [Payload]) throws -> [Op] {
        undoLog.mode = .replaying
        defer { undoLog.mode = .editing }
        var operations: [Op] = []
        var displaced: [PaintKey] = []
        for payload in payloads {
            if let (item, key) = Self.longZ(payload), kind(of: item) != nil {
                displaced.append(PaintKey(z: key, item: item))
            } else {
                operations.append(makeOperation(payload))
            }
        }
        if !displaced.isEmpty { operations += try place(atKeys: displaced) }
        return operations
    }

    /// Operations a replay may make: one per payload, and for each key it places instead of
    /// writing at most one per item (a rebalance re-keys no more than the board). Reserved up
    /// front, so a refused undo changes nothing.
    private func room(toReplay payloads: [Payload]) -> Int {
        let long = payloads.count { Self.longZ($0) != nil }
        return payloads.count + long * items.count
    }

    private static func longZ(_ payload: Payload) -> (ItemID, ZKey)? {
        guard case .setItem(let item, .z(let key)) = payload, key.bytes.count > ZKey.comfortableLength else { return nil }
        return (item, key)
    }
}
