import BoardModel
import Foundation

/// What a transaction changed, as the values before it: the entries of the big tables it
/// touched (recorded the first time each is about to change) and copies of the small parts.
/// Rolling back writes them back in place, so a host that must be able to undo a local edit
/// (the log write after it failed) pays for what the edit touched, not for the whole board.
struct Journal: Sendable {
    var items: [ItemID: ItemState?] = [:]
    var log: [OpID: Op?] = [:]
    var seen: [ReplicaID: SeenSet?] = [:]
    var insertedAssets: [AssetHash] = []
    let lamport: UInt64
    let lastSeq: UInt64
    let waitingOperations: Int
    let zRange: (lowest: ZKey, highest: ZKey)?
    let canvas: Register<BoardField>
    let background: Register<BoardField>
    let labelRegisters: [LabelID: Register<Label?>]
    let undoLog: UndoLog
    let openStrokes: [ItemID]
}

extension Replica {
    /// Runs `body` on this replica; when it throws, everything it changed is put back as it was
    /// (items, log, clocks, undo history, strokes in progress, images it stored through the
    /// replica's edits) and the error is rethrown. The cost is proportional to what `body`
    /// touched: no copy of the board is made. Transactions do not nest.
    ///
    /// `BoardPackage.commit` runs a local edit and its log write in one, so a failed write leaves
    /// the replica exactly as before.
    public mutating func transaction<T>(_ body: (inout Replica) throws -> T) rethrows -> T {
        precondition(journal == nil, "transactions do not nest")
        journal = Journal(lamport: lamport, lastSeq: lastSeq, waitingOperations: waitingOperations,
                          zRange: zRange, canvas: canvas, background: background, labelRegisters: labelRegisters,
                          undoLog: undoLog, openStrokes: openStrokes)
        do {
            let result = try body(&self)
            journal = nil
            return result
        } catch {
            rollBack()
            throw error
        }
    }

    private mutating func rollBack() {
        guard let saved = journal else { return }
        journal = nil
        for (item, state) in saved.items { items[item] = state }
        for (op, value) in saved.log {
            if let value {
                log[op.replica, default: AuthorLog()][op.seq] = value
            } else {
                log[op.replica]?[op.seq] = nil
                if log[op.replica]?.isEmpty == true { log[op.replica] = nil }
            }
        }
        for (replica, set) in saved.seen { seen[replica] = set }
        for hash in saved.insertedAssets { assets.remove(hash) }
        lamport = saved.lamport
        lastSeq = saved.lastSeq
        waitingOperations = saved.waitingOperations
        zRange = saved.zRange
        canvas = saved.canvas
        background = saved.background
        labelRegisters = saved.labelRegisters
        undoLog = saved.undoLog
        openStrokes = saved.openStrokes
    }

    // Called before the first change of an entry inside a transaction (no-ops outside one).

    mutating func noteItem(_ item: ItemID) {
        guard journal != nil, journal!.items[item] == nil else { return }
        journal!.items[item] = .some(items[item])
    }

    mutating func noteLog(_ op: OpID) {
        guard journal != nil, journal!.log[op] == nil else { return }
        journal!.log[op] = .some(log[op.replica]?[op.seq])
    }

    mutating func noteSeen(_ replica: ReplicaID) {
        guard journal != nil, journal!.seen[replica] == nil else { return }
        journal!.seen[replica] = .some(seen[replica])
    }

    /// Stores image bytes for an edit, remembering them in a transaction if they are new.
    mutating func storeAsset(_ data: Data) -> AssetHash {
        let hash = AssetHash.of(data)
        if journal != nil, !assets.contains(hash) { journal!.insertedAssets.append(hash) }
        assets.insert(data, hash: hash)
        return hash
    }
}
