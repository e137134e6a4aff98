/// The next deadline of each of many timers (boards, connections), kept so that the earliest is
/// found without visiting the others: a binary min-heap of `(deadline, key)` entries with lazy
/// invalidation. Each key has at most one live deadline; re-arming a key pushes a new entry
/// and leaves the old one in the heap, stale, to be dropped when it reaches the top (an entry
/// is live while its generation is the key's current one). Arming, re-arming and cancelling
/// are O(log n) or O(1); `earliest` is amortised O(log n). Stale entries are compacted away
/// when they outnumber the live ones.
///
/// Ties are deterministic: among equal deadlines the smaller key comes first, whatever order
/// the keys were armed in. Sans-IO like the rest of the sync layer: deadlines are numbers the
/// caller passes in, on whatever clock it keeps.
// Performance: BoardNet's `EventLoop` keeps its timers in a `DeadlineQueue<Int>`, one entry per
// `schedule`, so these calls sit on every turn of every loop. Across modules a generic struct's
// methods run unspecialized (runtime metadata on every sift: an 8-client edit-to-arrival median
// of 1.4-2.3 ms against 0.6-0.9 ms before the loop used it, `BENCH_ONLY=latency`), so the hot
// entry points are inlinable and pre-specialized for `Int` keys (`@_specialize(exported:)`,
// which the client module then calls directly).
package struct DeadlineQueue<Key: Hashable & Comparable> {
    @usableFromInline struct Entry {
        @usableFromInline var deadline: Double
        @usableFromInline var key: Key
        @usableFromInline var generation: UInt64

        /// Heap order: the earlier deadline, then the smaller key.
        @inlinable func precedes(_ other: Entry) -> Bool {
            deadline != other.deadline ? deadline < other.deadline : key < other.key
        }
    }

    @usableFromInline var heap: [Entry] = []
    /// Each armed key's deadline and the generation of its live entry.
    @usableFromInline var armed: [Key: (deadline: Double, generation: UInt64)] = [:]
    @usableFromInline var generation: UInt64 = 0

    @inlinable package init() {}

    /// Keys with a deadline.
    @inlinable package var count: Int { armed.count }
    @inlinable package var isEmpty: Bool { armed.isEmpty }

    /// The deadline `key` is armed at, if any.
    @inlinable package func deadline(of key: Key) -> Double? { armed[key]?.deadline }

    /// Arms `key` at `deadline` (nil cancels it). Arming it at the deadline it already has
    /// changes nothing.
    @_specialize(exported: true, where Key == Int)
    @inlinable package mutating func schedule(_ key: Key, at deadline: Double?) {
        guard let deadline else { return cancel(key) }
        if armed[key]?.deadline == deadline { return }
        generation &+= 1
        armed[key] = (deadline, generation)
        push(Entry(deadline: deadline, key: key, generation: generation))
        if heap.count > 64 && heap.count > 2 * armed.count { compact() }
    }

    /// Disarms `key` (its entry goes stale).
    @_specialize(exported: true, where Key == Int)
    @inlinable package mutating func cancel(_ key: Key) {
        armed[key] = nil
    }

    /// The earliest armed deadline and its key (the smaller key among equal deadlines).
    @_specialize(exported: true, where Key == Int)
    @inlinable package mutating func earliest() -> (key: Key, deadline: Double)? {
        dropStaleTop()
        return heap.first.map { ($0.key, $0.deadline) }
    }

    /// Disarms and returns every key armed at or before `now`, earliest first (ties by key).
    @_specialize(exported: true, where Key == Int)
    @inlinable package mutating func popDue(now: Double) -> [Key] {
        var due: [Key] = []
        while let top = earliest(), top.deadline <= now {
            armed[top.key] = nil
            popTop()
            due.append(top.key)
        }
        return due
    }

    // MARK: Heap

    @inlinable func isLive(_ entry: Entry) -> Bool { armed[entry.key]?.generation == entry.generation }

    @inlinable mutating func dropStaleTop() {
        while let top = heap.first, !isLive(top) { popTop() }
    }

    @inlinable mutating func push(_ entry: Entry) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    @inlinable mutating func popTop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(from: 0)
    }

    @inlinable mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            var smallest = left
            if left + 1 < heap.count, heap[left + 1].precedes(heap[left]) { smallest = left + 1 }
            guard heap[smallest].precedes(heap[parent]) else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }

    /// Drops every stale entry and rebuilds the heap (O(n)).
    @inlinable mutating func compact() {
        let armed = self.armed
        heap.removeAll { armed[$0.key]?.generation != $0.generation }
        var index = heap.count / 2
        while index > 0 {
            index -= 1
            siftDown(from: index)
        }
    }
}
