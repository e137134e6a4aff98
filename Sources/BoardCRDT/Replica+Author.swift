import BoardModel
import Foundation

/// One author editing through a replica it does not own: its replica id, the sequence number of
/// its last operation, its own undo and redo stacks and its strokes in progress. A few hundred
/// bytes, where a replica of its own would hold the whole board.
///
/// A server hosting a board makes each web page that edits an author on the board's one replica
/// (`Replica.draft(as:_:)`): the page's edits carry the page's replica id, its undo touches only
/// its own edits, and nothing of the board is copied per page.
public struct Author: Sendable {
    public let id: ReplicaID
    /// The sequence number of this author's last operation that was kept.
    public fileprivate(set) var lastSeq: UInt64 = 0
    var undoLog = UndoLog()
    var openStrokes: [ItemID] = []

    public init(id: ReplicaID) {
        self.id = id
    }

    public var canUndo: Bool { !undoLog.undoStack.isEmpty || undoLog.depth > 0 }
    public var canRedo: Bool { !undoLog.redoStack.isEmpty }
}

/// An edit made as an `Author` and not yet applied: the operations to merge (as any peer's
/// would be), the image bytes they need that the replica did not hold, and the author as it is
/// once they are merged.
public struct Draft: Sendable {
    public var edit: LocalEdit
    public var images: [AssetHash: Data]
    public var author: Author
}

extension Replica {
    /// Makes `body`'s edit as `author` and returns it without keeping it: the replica is left
    /// exactly as it was (the edit runs in a transaction that is always rolled back, at the cost
    /// of what it touched), and `author` is not changed. Merge `draft.edit.operations` (with
    /// `draft.images`) the way a peer's are merged, then keep `draft.author`; if the merge fails,
    /// keep the old author, so its sequence never skips a number.
    ///
    /// Throws what `body` throws (an `EditError`), with the replica and author unchanged.
    public mutating func draft(as author: Author, _ body: (inout Replica) throws -> LocalEdit) throws -> Draft {
        precondition(journal == nil, "drafts do not run inside transactions")
        let own = (id: id, lastSeq: lastSeq, undoLog: undoLog, openStrokes: openStrokes)
        // Its sequence follows whatever of its operations the board already holds (a merge that
        // went through after all, say), never reusing a number.
        let known = seen[author.id].map { max($0.prefix, $0.ahead.max() ?? 0) } ?? 0
        id = author.id
        lastSeq = max(author.lastSeq, known)
        undoLog = author.undoLog
        openStrokes = author.openStrokes
        defer {
            id = own.id
            lastSeq = own.lastSeq
            undoLog = own.undoLog
            openStrokes = own.openStrokes
        }
        var result: Draft?
        do {
            try transaction { replica in
                let edit = try body(&replica)
                var images: [AssetHash: Data] = [:]
                for hash in replica.journal?.insertedAssets ?? [] {
                    if let data = replica.assets.data(for: hash) { images[hash] = data }
                }
                var after = author
                after.lastSeq = replica.lastSeq
                after.undoLog = replica.undoLog
                after.openStrokes = replica.openStrokes
                result = Draft(edit: edit, images: images, author: after)
                throw DraftDiscarded()
            }
        } catch is DraftDiscarded {}
        return result!
    }
}

/// Thrown inside `draft`'s transaction to roll it back once the edit is taken.
private struct DraftDiscarded: Error {}
