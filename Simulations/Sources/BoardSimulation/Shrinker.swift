/// Delta debugging over a failing plan, shared by `World.shrink` and `ClusterSimulation.shrink`:
/// drop chunks of the plan's events (halves, then quarters, ... while the failure stays the same
/// kind), then try the plan's shape reductions one by one. Every candidate is a full
/// deterministic run, at most `budget` of them (the first run included).
struct Shrinker<Plan, Event, Report> {
    /// Where a plan keeps its events.
    var events: WritableKeyPath<Plan, [Event]>
    /// One full run of a plan.
    var run: (Plan) -> Report
    /// The kind of a report's first failure (nil: it passed): what shrinking keeps.
    var failureKind: (Report) -> String?
    /// The shape reductions to try after the events, asked of the shortest failing plan then:
    /// each makes a candidate from the shortest failing plan so far, or nil when it has nothing
    /// to reduce.
    var shapes: (Plan) -> [(Plan) -> Plan?]
    var budget: Int

    /// The shortest plan found that fails the same way, its report and the runs it took; nil
    /// when `plan` does not fail. `progress` hears the runs so far and each candidate's events.
    func shrink(_ plan: Plan, progress: (Int, Int) -> Void) -> (plan: Plan, report: Report, runs: Int)? {
        let first = run(plan)
        guard let kind = failureKind(first) else { return nil }
        var best = plan
        var bestReport = first
        var runs = 1
        func stillFails(_ candidate: Plan) -> Bool {
            guard runs < budget else { return false }
            runs += 1
            let report = run(candidate)
            progress(runs, candidate[keyPath: events].count)
            guard failureKind(report) == kind else { return false }
            best = candidate
            bestReport = report
            return true
        }

        // Events: remove chunks, halving the chunk size when nothing more can go.
        var chunk = max(1, best[keyPath: events].count / 2)
        while runs < budget {
            var removedAny = false
            var start = 0
            while start < best[keyPath: events].count, runs < budget {
                var candidate = best
                candidate[keyPath: events].removeSubrange(start..<min(start + chunk, best[keyPath: events].count))
                if !stillFails(candidate) { start += chunk } else { removedAny = true }
            }
            if chunk == 1 && !removedAny { break }
            if !removedAny { chunk = max(1, chunk / 2) }
        }
        // The plan's shape, each reduction from the shortest failing plan so far.
        for reduce in shapes(best) {
            if let candidate = reduce(best) { _ = stillFails(candidate) }
        }
        return (best, bestReport, runs)
    }
}
