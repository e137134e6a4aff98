import Foundation

extension World {
    /// The result of shrinking a failing plan.
    public struct Shrunk: Sendable {
        /// The smallest plan found that still fails the same way.
        public var plan: Plan
        /// Its report (failing, with the original failure kind).
        public var report: Report
        /// Plans run while shrinking.
        public var runs: Int
        public var originalEvents: Int

        /// The shrunk plan as a world scenario file, with a header saying where it came from.
        public var scenario: String {
            var lines = [
                "# Shrunk by board-sim from seed \(plan.seed): \(originalEvents) events -> \(plan.events.count) (\(runs) runs).",
                "# It still fails (\(report.failureKind ?? "?")): \(report.failures.first ?? "")",
                "# Replay: bin/board-sim run FILE",
            ]
            lines = lines.map { $0.replacingOccurrences(of: "\n", with: " ") }
            return lines.joined(separator: "\n") + "\n" + plan.text
        }
    }

    /// Reduces a failing plan to a short one that fails the same way (the same kind of failure):
    /// delta debugging over its events (drop halves, then quarters, ... while the failure stays),
    /// then over slow links and extra dials. Every candidate is a full deterministic run, at
    /// most `budget` of them. Returns nil when the plan does not fail.
    public static func shrink(_ plan: Plan, budget: Int = 400, progress: (Int, Int) -> Void = { _, _ in }) -> Shrunk? {
        let first = simulate(plan)
        guard let kind = first.failureKind else { return nil }
        var best = plan
        var bestReport = first
        var runs = 1
        func stillFails(_ candidate: Plan) -> Bool {
            guard runs < budget else { return false }
            runs += 1
            let report = simulate(candidate)
            progress(runs, candidate.events.count)
            guard report.failureKind == kind else { return false }
            best = candidate
            bestReport = report
            return true
        }

        // Events: remove chunks, halving the chunk size when nothing more can go.
        var chunk = max(1, best.events.count / 2)
        while runs < budget {
            var removedAny = false
            var start = 0
            while start < best.events.count, runs < budget {
                var candidate = best
                candidate.events.removeSubrange(start..<min(start + chunk, best.events.count))
                if !stillFails(candidate) { start += chunk } else { removedAny = true }
            }
            if chunk == 1 && !removedAny { break }
            if !removedAny { chunk = max(1, chunk / 2) }
        }
        // The world's shape: slow links, then second dials, then latency.
        for peer in best.bandwidth.keys.sorted() {
            var candidate = best
            candidate.bandwidth[peer] = nil
            _ = stillFails(candidate)
        }
        for peer in best.dials.indices where best.dials[peer].count > 1 {
            var candidate = best
            candidate.dials[peer] = [best.server]
            _ = stillFails(candidate)
        }
        if best.latency != 0.01...0.01 {
            var candidate = best
            candidate.latency = 0.01...0.01
            _ = stillFails(candidate)
        }
        return Shrunk(plan: best, report: bestReport, runs: runs, originalEvents: plan.events.count)
    }
}
