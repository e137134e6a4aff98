// board-sim: deterministic network simulations of BoardSync (docs/SIMULATION.md).
import BoardSimulation
import Dispatch
import Foundation

let usage = "board-sim --seed N [--peers P] [--verbose] [--json] | --seeds K [--from N] [--peers P] [--json] | run FILE..."
let help = """
OVERVIEW: Run BoardSync's real server and peer code over simulated links, time and disks, with
seeded faults (link cuts, corrupted bytes, server and peer crashes, full disks, peers offline),
then heal and check that every replica converges with nothing acknowledged or saved lost.

USAGE: \(usage)

SUBCOMMANDS:
  run FILE...              Run conflict scenario files (docs/SIMULATION.md, Simulations/Scenarios):
                           print each timeline and every replica's final board, check the
                           expectations; exit 1 when one fails, 64 when a file is malformed.

OPTIONS:
  --seed N                 Run one seed and print its report; the last line is `hash: <hex>`,
                           a fingerprint of every decision (the same seed gives the same hash).
  --seeds K                Run K seeds (from --from, default 0) on every core and summarize.
  --from N                 First seed of --seeds.
  --peers P                Peers besides the server (default 3).
  --json                   Print JSON for scripts.
  --verbose                With --seed: print every host's log and every fault, with the time.
  -h, --help               Show help information.

EXIT CODES: 0 every seed passed, 1 a seed failed (its replay command is printed), 64 bad usage.
"""

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("Error: \(message)\nUsage: \(usage)\n".utf8))
    exit(64)
}

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.isEmpty || arguments.contains("-h") || arguments.contains("--help") {
    print(help)
    exit(0)
}

// board-sim run FILE...: conflict scenarios.
if arguments.first == "run" {
    let files = Array(arguments.dropFirst())
    guard !files.isEmpty else { fail("`run` needs one or more scenario files") }
    var failed = 0
    for file in files {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
            FileHandle.standardError.write(Data("Error: cannot read \(file)\n".utf8))
            exit(1)
        }
        let scenario = Scenario(name: file, text: text)
        do {
            let outcome = try scenario.run()
            print("== \(file)")
            for line in outcome.transcript { print("  " + line) }
            print("final boards:")
            for board in outcome.boards { print("  " + board.replacingOccurrences(of: "\n", with: "\n  ")) }
            print(outcome.passed ? "PASSED \(file)" : "FAILED \(file): \(outcome.failures.count) expectation(s)")
            if !outcome.passed { failed += 1 }
        } catch {
            FileHandle.standardError.write(Data("Error: \(file): \(error)\n".utf8))
            exit(64)
        }
    }
    if files.count > 1 { print("\(files.count - failed) passed, \(failed) failed") }
    exit(failed == 0 ? 0 : 1)
}
var options: [String: UInt64] = [:]
var json = false
var verbose = false
while !arguments.isEmpty {
    let name = arguments.removeFirst()
    if name == "--json" { json = true; continue }
    if name == "--verbose" { verbose = true; continue }
    guard ["--seed", "--seeds", "--from", "--peers"].contains(name) else { fail("unknown option \(name)") }
    guard let text = arguments.first, let value = UInt64(text) else { fail("\(name) needs a whole number") }
    arguments.removeFirst()
    options[String(name.dropFirst(2))] = value
}
let peers = Int(options["peers"] ?? 3)
guard (1...16).contains(peers) else { fail("--peers must be 1 to 16") }

let printLine: @Sendable (String) -> Void = { print($0) }
func simulate(_ seed: UInt64, verbose: Bool) -> World.Report {
    World.simulate(seed: seed, peers: peers, log: verbose ? printLine : nil)
}

func hex(_ value: UInt64) -> String {
    let text = String(value, radix: 16)
    return String(repeating: "0", count: 16 - text.count) + text
}

if let seed = options["seed"] {
    let start = Date()
    let report = simulate(seed, verbose: verbose)
    if json {
        let object: [String: Any] = [
            "seed": seed, "passed": report.passed, "topology": report.topology, "failures": report.failures, "faults": report.faultsHit,
            "operations": report.operationsMade, "deliveries": report.deliveries,
            "simulatedSeconds": report.simulatedSeconds, "convergedAfter": report.convergedAfter ?? NSNull(),
            "hash": hex(report.decisionHash),
        ]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
        FileHandle.standardOutput.write(data + Data([10]))
    } else {
        print("seed \(seed): \(report.faults)")
        print("topology \(report.topology)")
        print("faults hit: \(report.faultsHit.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
        print("operations \(report.operationsMade), deliveries \(report.deliveries), simulated \(String(format: "%.1f", report.simulatedSeconds)) s, wall \(String(format: "%.2f", Date().timeIntervalSince(start))) s")
        if let after = report.convergedAfter { print("converged \(String(format: "%.2f", after)) s after the heal") }
        for failure in report.failures { print("FAILED: \(failure)") }
        print("hash: \(hex(report.decisionHash))")
    }
    exit(report.passed ? 0 : 1)
}

guard let count = options["seeds"] else { fail("give --seed N or --seeds K") }
let from = options["from"] ?? 0
let start = Date()
let showProgress = !json && isatty(2) != 0
let reports = World.swarm(seeds: from..<(from + count), peers: peers) { done in
    if showProgress { FileHandle.standardError.write(Data("\r\(done)/\(count) seeds".utf8)) }
}
let wall = Date().timeIntervalSince(start)
let failed = reports.filter { !$0.passed }
var faults: [String: Int] = [:]
for report in reports { for (kind, _) in report.faultsHit { faults[kind, default: 0] += 1 } }
let deliveries = reports.reduce(0) { $0 + $1.deliveries }
let simulated = reports.reduce(0.0) { $0 + $1.simulatedSeconds }
if json {
    let object: [String: Any] = [
        "seeds": reports.count, "failed": failed.map(\.seed), "seedsHittingFault": faults,
        "deliveries": deliveries, "simulatedSeconds": simulated, "wallSeconds": wall,
    ]
    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
    FileHandle.standardOutput.write(data + Data([10]))
} else {
    if isatty(2) != 0 { FileHandle.standardError.write(Data("\n".utf8)) }
    print("seeds \(from)..<\(from + count): \(reports.count - failed.count) passed, \(failed.count) failed")
    print("seeds hitting each fault: \(faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
    print("simulated \(String(format: "%.0f", simulated)) s, \(deliveries) deliveries, wall \(String(format: "%.1f", wall)) s, \(String(format: "%.0f", Double(deliveries) / max(wall, 0.001))) deliveries/s")
    for report in failed {
        print("FAILED seed \(report.seed): \(report.failures.first ?? "?") — replay: bin/board-sim --seed \(report.seed)")
    }
}
exit(failed.isEmpty ? 0 : 1)
