import BoardCRDT
import BoardModel
import Dispatch
import Foundation
import Synchronization

/// An update's snapshot, made when first asked for: the previous update's snapshot with this
/// update's changes applied (a chain of updates nobody looked at folds its changes first and
/// applies them once). Thread-safe; the result is kept.
final class SnapshotSource: Sendable {
    private enum State {
        case ready(BoardSnapshot)
        case pending(previous: SnapshotSource, changes: BoardChanges)
    }
    private let state: Mutex<State>

    init(_ snapshot: BoardSnapshot) { state = Mutex(.ready(snapshot)) }
    init(previous: SnapshotSource, changes: BoardChanges) { state = Mutex(.pending(previous: previous, changes: changes)) }

    /// The snapshot (made now if nobody asked before).
    var snapshot: BoardSnapshot {
        if case .ready(let snapshot) = state.withLock({ $0 }) { return snapshot }
        // Walk back to a ready snapshot, fold the changes on the way (newest last), apply once.
        var chain: [BoardChanges] = []
        var base: BoardSnapshot?
        var cursor: SnapshotSource? = self
        while let source = cursor {
            switch source.state.withLock({ $0 }) {
            case .ready(let snapshot):
                base = snapshot
                cursor = nil
            case .pending(let previous, let changes):
                chain.append(changes)
                cursor = previous
            }
        }
        var folded = chain.removeLast()
        while let next = chain.popLast() { folded = folded.followed(by: next) }
        let result = folded.applied(to: base!)
        state.withLock { $0 = .ready(result) }
        Self.made.add(1, ordering: .relaxed)
        return result
    }

    /// Snapshots made from changes in this process (benchmarks count them).
    static let made = Atomic<Int>(0)

    /// Makes the snapshot on a utility thread, not the caller's (a board's actor bounding its
    /// chain of unmade snapshots: O(board), 10-20 ms on the workload board).
    func makeInBackground() {
        DispatchQueue.global(qos: .utility).async { _ = self.snapshot }
    }
}
