/// The surviving operations of one author, in sequence-number order.
///
/// One contiguous array instead of a hash table: an operation takes its own 72 bytes and no
/// empty buckets, a full state reads each author's operations in order without sorting, and
/// operations arrive almost always in order (appended at the end). A dropped operation (an
/// overwritten register write) is marked dead in place, so dropping a write deep in the history
/// moves nothing; the dead are swept out once they are as many as half the live ones.
struct AuthorLog: Sendable {
    /// Operations ordered by sequence number, dead ones included.
    private var entries: [Op] = []
    /// `dead[i]` is true when `entries[i]` was dropped.
    private var dead: [Bool] = []
    private var deadCount = 0

    /// Live operations.
    var count: Int { entries.count - deadCount }
    var isEmpty: Bool { count == 0 }

    mutating func reserveCapacity(_ capacity: Int) {
        entries.reserveCapacity(capacity)
        dead.reserveCapacity(capacity)
    }

    /// The live operation with this sequence number; assigning nil drops it.
    subscript(seq: UInt64) -> Op? {
        get {
            guard let index = index(of: seq), !dead[index] else { return nil }
            return entries[index]
        }
        set {
            if let op = newValue {
                precondition(op.id.seq == seq, "an author log entry is stored under its own sequence number")
                store(op)
            } else {
                drop(seq)
            }
        }
    }

    /// Live operations with a sequence number above `floor`, in order.
    func operations(after floor: UInt64) -> some Sequence<Op> {
        let start = floor == .max ? entries.count : lowerBound(floor + 1)
        return (start..<entries.count).lazy.filter { !dead[$0] }.map { entries[$0] }
    }

    /// The live operation with the highest sequence number.
    var latest: Op? {
        var index = entries.count - 1
        while index >= 0, dead[index] { index -= 1 }
        return index >= 0 ? entries[index] : nil
    }

    private mutating func store(_ op: Op) {
        let seq = op.id.seq
        if let last = entries.last, last.id.seq >= seq {
            let index = lowerBound(seq)
            if index < entries.count, entries[index].id.seq == seq {
                entries[index] = op
                if dead[index] {
                    dead[index] = false
                    deadCount -= 1
                }
                return
            }
            entries.insert(op, at: index)
            dead.insert(false, at: index)
        } else {
            entries.append(op)
            dead.append(false)
        }
    }

    private mutating func drop(_ seq: UInt64) {
        guard let index = index(of: seq), !dead[index] else { return }
        dead[index] = true
        deadCount += 1
        if deadCount >= 32, deadCount * 2 >= entries.count - deadCount { sweep() }
    }

    /// Removes the dead entries (amortized: only after as many drops as half the live ones).
    private mutating func sweep() {
        var kept: [Op] = []
        kept.reserveCapacity(entries.count - deadCount)
        for index in entries.indices where !dead[index] { kept.append(entries[index]) }
        entries = kept
        dead = Array(repeating: false, count: kept.count)
        deadCount = 0
    }

    private func index(of seq: UInt64) -> Int? {
        let index = lowerBound(seq)
        return index < entries.count && entries[index].id.seq == seq ? index : nil
    }

    /// The first position whose sequence number is `seq` or above.
    private func lowerBound(_ seq: UInt64) -> Int {
        if let last = entries.last, last.id.seq < seq { return entries.count }
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].id.seq < seq { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
