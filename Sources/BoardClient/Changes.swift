import BoardCRDT
import BoardModel
import Foundation

/// Where a change came from.
public enum UpdateOrigin: Sendable, Hashable, CustomStringConvertible {
    /// The board as it was when the stream was subscribed to (its changes add every item).
    case loaded
    /// An `edit` through this `LiveBoard`.
    case local
    case undo
    case redo
    /// Operations another replica made, received from the server.
    case remote(ReplicaID)
    /// Image bytes arrived from the server (pending stickers or background now drawable).
    case images

    public var description: String {
        switch self {
        case .loaded: return "loaded"
        case .local: return "local"
        case .undo: return "undo"
        case .redo: return "redo"
        case .remote(let replica): return "remote \(replica)"
        case .images: return "images"
        }
    }
}

/// One element of `LiveBoard.updates`: the board now, and what changed since the subscriber's
/// previous element (a slow subscriber gets the changes of several updates folded into one).
///
/// `changes` costs what changed; `snapshot` is made the first time it is read (the previous
/// snapshot with the changes applied, O(board) once), so a consumer that works from `changes`
/// never pays for whole boards.
public struct BoardUpdate: Sendable, Equatable {
    let source: SnapshotSource
    public var changes: BoardChanges
    /// Every origin folded into this update.
    public var origins: Set<UpdateOrigin>
    /// Counts this board's updates since it was opened (coalescing skips numbers).
    public var version: UInt64

    /// The whole board after this update (made on first read, then kept).
    public var snapshot: BoardSnapshot { source.snapshot }

    public init(snapshot: BoardSnapshot, changes: BoardChanges, origins: Set<UpdateOrigin>, version: UInt64) {
        self.init(source: SnapshotSource(snapshot), changes: changes, origins: origins, version: version)
    }

    init(source: SnapshotSource, changes: BoardChanges, origins: Set<UpdateOrigin>, version: UInt64) {
        self.source = source
        self.changes = changes
        self.origins = origins
        self.version = version
    }

    public var isRemote: Bool { origins.contains { if case .remote = $0 { return true } else { return false } } }

    public static func == (lhs: BoardUpdate, rhs: BoardUpdate) -> Bool {
        lhs.version == rhs.version && lhs.origins == rhs.origins && lhs.changes == rhs.changes
            && (lhs.source === rhs.source || lhs.snapshot == rhs.snapshot)
    }

    /// `earlier` then `later` as one update.
    static func folding(_ earlier: BoardUpdate, _ later: BoardUpdate) -> BoardUpdate {
        BoardUpdate(source: later.source, changes: earlier.changes.followed(by: later.changes),
                    origins: earlier.origins.union(later.origins), version: later.version)
    }
}
