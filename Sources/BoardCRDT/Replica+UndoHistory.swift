/// This replica's undo and redo stacks as a value, so a host can persist them beside the op log
/// and undo keeps working across process restarts. Each step is the list of register writes that
/// undoing (or redoing) it will make.
public struct UndoHistory: Hashable, Sendable {
    public var undo: [[Payload]]
    public var redo: [[Payload]]

    public init(undo: [[Payload]] = [], redo: [[Payload]] = []) {
        self.undo = undo
        self.redo = redo
    }

    /// Binary form: version byte, then each stack as a count of steps, each step a
    /// length-prefixed operation batch whose operations carry the step's payloads (their ids
    /// and counters are placeholders).
    public func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.write(byte: 1)
        for stack in [undo, redo] {
            writer.write(varint: UInt64(stack.count))
            for step in stack {
                let ops = step.enumerated().map { index, payload in
                    Op(id: OpID(replica: ReplicaID(0), seq: UInt64(index + 1)), lamport: UInt64(index + 1), payload: payload)
                }
                writer.write(lengthPrefixed: OperationBatch(operations: ops).encoded())
            }
        }
        return writer.bytes
    }

    public init(decoding bytes: [UInt8]) throws {
        var reader = ByteReader(bytes)
        let version = try reader.readByte()
        guard version == 1 else { throw CodecError.unsupportedVersion(version) }
        var stacks: [[[Payload]]] = []
        for _ in 0..<2 {
            let count = try reader.readCount(max: UndoLog.limit * 2, "undo steps")
            var stack: [[Payload]] = []
            for _ in 0..<count {
                let batch = try OperationBatch(decoding: try reader.readLengthPrefixed(max: 1 << 26, "undo step"))
                stack.append(batch.operations.map(\.payload))
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
            var undo = undoLog.undoStack.map(\.inverses)
            if undoLog.depth > 0, !undoLog.open.inverses.isEmpty { undo.append(undoLog.open.inverses) }
            return UndoHistory(undo: undo, redo: undoLog.redoStack.map(\.inverses))
        }
        set {
            func group(_ payloads: [Payload]) -> UndoLog.Group {
                var group = UndoLog.Group()
                for payload in payloads {
                    switch payload {
                    case .setItem(let item, let field): group.record(payload, for: .item(item, field.kind))
                    case .setBoard(let field): group.record(payload, for: .board(field.kind))
                    default: continue  // only register writes are undo steps
                    }
                }
                return group
            }
            undoLog = UndoLog()
            undoLog.undoStack = newValue.undo.suffix(UndoLog.limit).map(group)
            undoLog.redoStack = newValue.redo.suffix(UndoLog.limit).map(group)
            openStroke = nil
        }
    }
}
