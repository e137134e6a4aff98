/// When to rewrite a package's view while edits stream in: the op log takes every edit at once
/// (durability), while the manifest and images are rewritten only after edits pause for
/// `quietPeriod`, and at least every `maxDelay` during a continuous burst. Sans-IO: the caller
/// passes the time in (seconds on any monotonic clock) and arms a timer for `deadline`.
public struct SaveScheduler: Sendable {
    public var quietPeriod: Double
    public var maxDelay: Double
    private var firstUnsaved: Double?
    private var lastChange: Double?
    /// A save's writes are running elsewhere (`didStartSave`): no save is due until it ends.
    public private(set) var isSaving = false

    public init(quietPeriod: Double = 0.25, maxDelay: Double = 1.0) {
        self.quietPeriod = quietPeriod
        self.maxDelay = maxDelay
    }

    /// Whether changes are waiting for a save.
    public var isPending: Bool { firstUnsaved != nil }

    public mutating func noteChange(now: Double) {
        if firstUnsaved == nil { firstUnsaved = now }
        lastChange = now
    }

    /// When the next save is due, nil when nothing waits (or a save is still running).
    public var deadline: Double? {
        guard !isSaving, let first = firstUnsaved, let last = lastChange else { return nil }
        return min(last + quietPeriod, first + maxDelay)
    }

    /// True when a save is due at `now`; the caller saves, then calls `didSave`.
    public func isDue(now: Double) -> Bool {
        guard let deadline else { return false }
        return now >= deadline
    }

    public mutating func didSave() {
        firstUnsaved = nil
        lastChange = nil
    }

    /// A save started whose writes finish later: changes from now on wait for the next one,
    /// which is not due before `didFinishSave`.
    public mutating func didStartSave() {
        didSave()
        isSaving = true
    }

    public mutating func didFinishSave() {
        isSaving = false
    }
}
