/// This replica's undo and redo stacks as a value, so a host can persist them beside the op log
/// and undo keeps working across process restarts.
public struct UndoHistory: Hashable, Sendable {
    /// One step: the register writes that undo it, and those that redo it (its own values).
    public struct Step: Hashable, Sendable {
        public var inverses: [Payload]
        public var forwards: [Payload]

        public init(inverses: [Payload], forwards: [Payload]) {
            self.inverses = inverses
            self.forwards = forwards
        }
    }

    public var undo: [Step]
    public var redo: [Step]

    public init(undo: [Step] = [], redo: [Step] = []) {
        self.undo = undo
        self.redo = redo
    }

    public var isEmpty: Bool { undo.isEmpty && redo.isEmpty }

    /// Binary form: version byte 2, then each stack as a count of steps, each step two
    /// length-prefixed operation batches (inverses, then forwards) whose operations carry the
    /// step's payloads (their ids and counters are placeholders). Version 1 (inverses only)
    /// cannot redo correctly and is refused; hosts then start with an empty history.
    public func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.write(byte: 2)
        func batch(_ payloads: [Payload]) -> [UInt8] {
            OperationBatch(operations: payloads.enumerated().map { index, payload in
                Op(id: OpID(replica: ReplicaID(0), seq: UInt64(index + 1)), lamport: UInt64(index + 1), payload: payload)
            }).encoded()
        }
        for stack in [undo, redo] {
            writer.write(varint: UInt64(stack.count))
            for step in stack {
                writer.write(lengthPrefixed: batch(step.inverses))
                writer.write(lengthPrefixed: batch(step.forwards))
            }
        }
        return writer.bytes
    }

    public init(decoding bytes: [UInt8]) throws {
        var reader = ByteReader(bytes)
        let version = try reader.readByte()
        guard version == 2 else { throw CodecError.unsupportedVersion(version) }
        var stacks: [[Step]] = []
        for _ in 0..<2 {
            let count = try reader.readCount(max: UndoLog.limit * 2, "undo steps")
            var stack: [Step] = []
            for _ in 0..<count {
                let inverses = try OperationBatch(decoding: try reader.readLengthPrefixed(max: 1 << 26, "undo step"))
                let forwards = try OperationBatch(decoding: try reader.readLengthPrefixed(max: 1 << 26, "redo step"))
                guard inverses.operations.count == forwards.operations.count else {
                    throw CodecError.malformed("undo step with \(inverses.operations.count) inverses and \(forwards.operations.count) values", offset: reader.offset)
                }
                stack.append(Step(inverses: inverses.operations.map(\.payload), forwards: forwards.operations.map(\.payload)))
            }
            stacks.append(stack)
        }
        guard reader.isAtEnd else { throw CodecError.malformed("trailing bytes after undo history", offset: reader.offset) }
        self.init(undo: stacks[0], redo: stacks[1])
    }
}

extension Replica {
    /// The undo and redo stacks (an open stroke or group counts as closed).
    public var undoHistory: UndoHistory {
        get {
            func step(_ group: UndoLog.Group) -> UndoHistory.Step {
                UndoHistory.Step(inverses: group.inverses, forwards: group.forwards)
            }
            var undo = undoLog.undoStack.map(step)
            if undoLog.depth > 0, !undoLog.open.inverses.isEmpty { undo.append(step(undoLog.open)) }
            return UndoHistory(undo: undo, redo: undoLog.redoStack.map(step))
        }
        set {
            func group(_ step: UndoHistory.Step) -> UndoLog.Group {
                var group = UndoLog.Group()
                for (inverse, forward) in zip(step.inverses, step.forwards) {
                    switch (inverse, forward) {
                    case (.setItem(let item, let field), .setItem(let other, let value)) where item == other && field.kind == value.kind:
                        group.record(inverse, forward: forward, for: .item(item, field.kind))
                    case (.setBoard(let field), .setBoard(let value)) where field.kind == value.kind:
                        group.record(inverse, forward: forward, for: .board(field.kind))
                    default: continue  // only matching register writes are undo steps
                    }
                }
                return group
            }
            undoLog = UndoLog()
            undoLog.undoStack = newValue.undo.suffix(UndoLog.limit).map(group)
            undoLog.redoStack = newValue.redo.suffix(UndoLog.limit).map(group)
            openStrokes = []
        }
    }
}
