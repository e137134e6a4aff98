/// Which sequence numbers of one replica have been integrated: a contiguous prefix plus the
/// numbers that arrived ahead of a gap.
struct SeenSet: Sendable {
    private(set) var prefix: UInt64 = 0
    private(set) var ahead: Set<UInt64> = []

    func contains(_ seq: UInt64) -> Bool {
        seq <= prefix || !ahead.isEmpty && ahead.contains(seq)
    }

    /// Records `seq`; false when it was already recorded.
    mutating func insert(_ seq: UInt64) -> Bool {
        if contains(seq) { return false }
        if seq == prefix + 1 {
            prefix = seq
            absorbAhead()
        } else {
            ahead.insert(seq)
        }
        return true
    }

    /// Marks everything up to `seq` as integrated (a complete delta covered it).
    mutating func raisePrefix(to seq: UInt64) {
        guard seq > prefix else { return }
        prefix = seq
        ahead = ahead.filter { $0 > prefix }
        absorbAhead()
    }

    private mutating func absorbAhead() {
        while !ahead.isEmpty, ahead.remove(prefix + 1) != nil {
            prefix += 1
        }
    }
}
