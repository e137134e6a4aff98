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
        let shrinker = Shrinker<Plan, Plan.Event, Report>(
            events: \.events, run: { simulate($0) }, failureKind: \.failureKind,
            shapes: { best in
                // The world's shape: slow links, then second dials, then latency.
                let slow: [(Plan) -> Plan?] = best.bandwidth.keys.sorted().map { peer in
                    { plan in
                        var candidate = plan
                        candidate.bandwidth[peer] = nil
                        return candidate
                    }
                }
                let dials: [(Plan) -> Plan?] = best.dials.indices.map { peer in
                    { plan in
                        guard plan.dials[peer].count > 1 else { return nil }
                        var candidate = plan
                        candidate.dials[peer] = [plan.server]
                        return candidate
                    }
                }
                let latency: (Plan) -> Plan? = { plan in
                    guard plan.latency != 0.01...0.01 else { return nil }
                    var candidate = plan
                    candidate.latency = 0.01...0.01
                    return candidate
                }
                return slow + dials + [latency]
            },
            budget: budget)
        guard let (best, report, runs) = shrinker.shrink(plan, progress: progress) else { return nil }
        return Shrunk(plan: best, report: report, runs: runs, originalEvents: plan.events.count)
    }
}
