import BoardModel

/// One copy of a board: merges operations from any number of peers by the conflict contract
/// (docs/SEMANTICS.md) and makes operations for local edits.
///
/// A `Replica` is a value with no hidden inputs: its id is given, it reads no clock and draws no
/// randomness, so the same operations always give the same state. Driving it:
///
/// 1. Local edits (`beginStroke`, `move`, `undo`, ...) return the operations they made; send them
///    to peers.
/// 2. `apply(_:)` merges a peer's operations, in any order, any number of times.
/// 3. `operations(since:)` gives exactly what a peer at a version vector lacks.
/// 4. `snapshot()` materializes the board for writers and renderers.
///
/// Overwritten values are compacted as they lose: the log keeps only operations that still
/// affect the state (creations, point runs, and the winning write of each register).
public struct Replica: Sendable {
    public internal(set) var id: ReplicaID
    /// Asset bytes by hash. Insert bytes here as they arrive; snapshots read from it.
    public var assets = AssetStore()

    /// The Lamport clock: the largest counter seen or made.
    public internal(set) var lamport: UInt64 = 0
    /// This replica's last sequence number.
    public internal(set) var lastSeq: UInt64 = 0

    var seen: [ReplicaID: SeenSet] = [:]
    /// Surviving operations by author, in sequence-number order.
    var log: [ReplicaID: AuthorLog] = [:]
    var items: [ItemID: ItemState] = [:]
    var canvas = Register<BoardField>(value: BoardFieldsFold.initialCanvas, stamp: .zero, writer: nil)
    var background = Register<BoardField>(value: .background(nil), stamp: .zero, writer: nil)
    /// Named versions: one last-writer-wins register per label id (nil: deleted). Never part
    /// of a snapshot.
    var labelRegisters: [LabelID: Register<Label?>] = [:]

    /// A deliberately broken merge rule for mutation testing of the simulator's oracles
    /// (`board-sim`'s `tie-break-by-arrival`): registers break Lamport ties by arrival order.
    /// Never set outside such tests.
    @_spi(Mutations) public var breaksTiesByArrival = false

    /// Operations held for items whose creation has not arrived (bounded by admission).
    public internal(set) var waitingOperations = 0

    /// Keys at or below and at or above every key in use (the lowest and highest integrated
    /// since the last rebalance): a key above the highest is above every item, found in O(1).
    var zRange: (lowest: ZKey, highest: ZKey)?

    var undoLog = UndoLog()
    /// Old values of what the running transaction changed (`transaction(_:)`), if one runs.
    var journal: Journal?
    /// The strokes this replica is drawing (several at once: multi-touch, several pens), oldest
    /// first. Not persisted: a reopened replica has none in progress.
    public internal(set) var openStrokes: [ItemID] = []
    /// The stroke begun most recently and not yet finished, if any.
    public var openStroke: ItemID? { openStrokes.last }

    public init(id: ReplicaID) {
        self.id = id
    }

    /// What this replica holds: per author, the contiguous prefix of integrated operations.
    public var versionVector: VersionVector {
        var entries: [ReplicaID: UInt64] = [:]
        for (replica, set) in seen where set.prefix > 0 {
            entries[replica] = set.prefix
        }
        return VersionVector(entries)
    }

    /// Number of operations kept in the log (after compaction).
    public var storedOperationCount: Int {
        log.values.reduce(0) { $0 + $1.count }
    }

    /// Whether the operation was integrated already.
    public func hasIntegrated(_ op: OpID) -> Bool {
        seen[op.replica]?.contains(op.seq) ?? false
    }

    /// Whether any operation by `author` was integrated (or covered by a complete delta), even
    /// ahead of a gap: whether the board already knows this replica id as an author.
    public func hasOperations(by author: ReplicaID) -> Bool {
        guard let set = seen[author] else { return false }
        return set.prefix > 0 || !set.ahead.isEmpty
    }

    /// Ids of every item whose creation has arrived, deleted ones included, in id order.
    public var itemIDs: [ItemID] {
        items.filter { $0.value.creation != nil }.keys.sorted()
    }

    /// Whether the item exists now (created and not deleted).
    public func isVisible(_ item: ItemID) -> Bool {
        items[item]?.isVisible ?? false
    }

    /// What kind of item this is, nil when its creation has not arrived.
    public func kind(of item: ItemID) -> ItemKind? {
        guard let state = items[item], state.creation != nil else { return nil }
        return state.isStroke ? .stroke : .sticker
    }

    /// The current value of one register of an item, nil when it has none.
    public func value(of field: ItemField.Kind, for item: ItemID) -> ItemField? {
        items[item]?[field]
    }

    /// Asset hashes that current values refer to (every sticker, deleted ones included since a
    /// restore shows them again, and the background).
    public var referencedAssets: Set<AssetHash> {
        var hashes = Set<AssetHash>()
        for state in items.values {
            if case .asset(let hash) = state[.asset] { hashes.insert(hash) }
        }
        if case .background(let hash?) = background.value { hashes.insert(hash) }
        return hashes
    }

    /// Of `hashes`, those the board refers to now and holds no bytes for, in order — without
    /// scanning every item: `named` pairs each hash with the item whose register named it
    /// (nil for the background), as the operations that carried them say.
    public func missingAssets(named: [(hash: AssetHash, item: ItemID?)]) -> [AssetHash] {
        var missing = Set<AssetHash>()
        for (hash, item) in named where !assets.contains(hash) {
            if let item {
                if case .asset(hash)? = items[item]?[.asset] { missing.insert(hash) }
            } else if case .background(hash?) = background.value {
                missing.insert(hash)
            }
        }
        return missing.sorted()
    }

    /// Referenced assets whose bytes are not in `assets` yet.
    public var missingAssets: [AssetHash] {
        referencedAssets.filter { !assets.contains($0) }.sorted()
    }
}

public enum ItemKind: String, Sendable, Hashable {
    case stroke
    case sticker
}
