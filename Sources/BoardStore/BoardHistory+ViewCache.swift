import BoardCRDT
import BoardModel
import Foundation
import Synchronization

/// What views of one history reuse: the boards of the checkpoints used most recently (applying a
/// checkpoint's full state costs far more than copying a replica, which shares its storage until
/// it is changed), a few recent views spread over the versions they show (a later version goes
/// forward from the nearest one it dominates: scrubbing either way applies only the operations
/// between neighbouring views), and the last snapshot with each visible item's paint key
/// (`snapshot(at:)` redraws only the items whose operations lie between two versions). Its
/// entries are boards computed from the history's records, which never change once `read`
/// returns (copies of a `BoardHistory` share one cache). Every access takes the lock; a view is
/// computed outside it, so two threads may compute the same board and the later one is kept.
final class ViewCache: Sendable {
    /// Materialized checkpoints kept (each holds a whole board, sharing storage with the views
    /// made from it until they change).
    static let capacity = 4
    /// Views kept (each a board whose storage it no longer shares once operations were applied
    /// to it: its item table and the logs of the authors it changed).
    static let viewCapacity = 12
    private struct State {
        var checkpoints: [(index: Int, replica: Replica)] = []
        var views: [(vector: VersionVector, replica: Replica)] = []
        var shown: ShownBoard?
        var timelineView: TimelineView?
        var assets = AssetStore()
    }
    private let state = Mutex(State())
    /// The history's item timelines, built by the first snapshot of a listed version with the
    /// images they show (`BoardHistory.preloadImages`), under their own lock: a second viewer
    /// waits for the first build instead of repeating it.
    private let builtTimelines = Mutex<ItemTimelines?>(nil)

    func timelines(of history: BoardHistory) -> ItemTimelines {
        builtTimelines.withLock { built in
            if let built { return built }
            let timelines = ItemTimelines(history)
            history.preloadImages(timelines.images)
            built = timelines
            return timelines
        }
    }

    /// The last snapshot made from timelines, taken out (so that updating it copies nothing).
    func takeTimelineView() -> TimelineView? {
        state.withLock { state in
            defer { state.timelineView = nil }
            return state.timelineView
        }
    }

    /// Keeps the snapshot made from timelines; the last snapshot made from a replica is dropped
    /// (a slider shows listed versions: one kept board is enough).
    func keepTimelineView(_ view: TimelineView) {
        state.withLock { state in
            state.timelineView = view
            state.shown = nil
        }
    }

    /// Views closer together than this (in operations) are not both kept while scrubbing
    /// forward: the older is taken and changed in place.
    static let viewSpacing: UInt64 = 48

    /// Views farther than this (in operations) from the newest are dropped before any other.
    static let viewReach: UInt64 = 2_048

    /// Takes the view of `vector` out of the cache (nil if it is not there).
    func take(_ vector: VersionVector) -> Replica? {
        state.withLock { state in
            guard let at = state.views.lastIndex(where: { $0.vector == vector }) else { return nil }
            return state.views.remove(at: at).replica
        }
    }

    /// The kept views, the most recent last.
    var views: [(vector: VersionVector, replica: Replica)] {
        state.withLock { $0.views }
    }

    /// Keeps a view; over capacity, drops one far from the newest (`viewReach`), else the one
    /// (not the newest) whose neighbours by operation count lie closest together, so the views
    /// kept stay spread out around the versions viewed last.
    func remember(_ vector: VersionVector, _ replica: Replica) {
        state.withLock { state in
            state.views.removeAll { $0.vector == vector }
            state.views.append((vector, replica))
            guard state.views.count > Self.viewCapacity else { return }
            // First a view far from the newest (left by views elsewhere in the history), the
            // farthest first.
            let newest = state.views[state.views.count - 1].vector
            let far = state.views.indices.dropLast().max { BoardHistory.distance(state.views[$0].vector, newest) < BoardHistory.distance(state.views[$1].vector, newest) }
            if let far, BoardHistory.distance(state.views[far].vector, newest) > Self.viewReach {
                state.views.remove(at: far)
                return
            }
            let sizes = state.views.map { $0.vector.totalCount }
            let byPosition = sizes.indices.dropLast().sorted { sizes[$0] < sizes[$1] }
            var drop = byPosition[0]
            if byPosition.count >= 3 {
                var narrowest = UInt64.max
                for at in 1..<(byPosition.count - 1) {
                    let gap = sizes[byPosition[at + 1]] - sizes[byPosition[at - 1]]
                    if gap < narrowest { (narrowest, drop) = (gap, byPosition[at]) }
                }
            }
            state.views.remove(at: drop)
        }
    }

    var shown: ShownBoard? {
        get { state.withLock { $0.shown } }
        set { state.withLock { $0.shown = newValue } }
    }

    /// The last snapshot, taken out (so that updating it copies nothing; it is put back after).
    func takeShown() -> ShownBoard? {
        state.withLock { state in
            defer { state.shown = nil }
            return state.shown
        }
    }

    /// Image bytes loaded so far (by `snapshot(at:)`), for the next view.
    var assets: AssetStore {
        get { state.withLock { $0.assets } }
        set { state.withLock { $0.assets = newValue } }
    }

    func hasCheckpoint(_ index: Int) -> Bool {
        state.withLock { $0.checkpoints.contains { $0.index == index } }
    }

    func checkpoint(_ index: Int) -> Replica? {
        state.withLock { state in
            guard let at = state.checkpoints.firstIndex(where: { $0.index == index }) else { return nil }
            let found = state.checkpoints.remove(at: at)
            state.checkpoints.append(found)
            return found.replica
        }
    }

    func keep(_ replica: Replica, checkpoint index: Int) {
        state.withLock { state in
            state.checkpoints.removeAll { $0.index == index }
            state.checkpoints.append((index, replica))
            if state.checkpoints.count > Self.capacity { state.checkpoints.removeFirst() }
        }
    }
}
