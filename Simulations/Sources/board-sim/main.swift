// board-sim: deterministic network simulations of BoardSync (docs/SIMULATION.md).
import BoardRender
import BoardSimulation
import Dispatch
import Foundation

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.isEmpty || arguments.contains("-h") || arguments.contains("--help") {
    print(help)
    exit(0)
}

// board-sim cluster: the scale-out simulation.
if arguments.first == "cluster" {
    arguments.removeFirst()
    var seed: UInt64?
    var count: UInt64?
    var first: UInt64 = 0
    var json = false
    var plant = false
    var printPlan = false
    var shrink = false
    var verbose = false
    var outFile: String?
    while !arguments.isEmpty {
        let name = arguments.removeFirst()
        switch name {
        case "--json": json = true
        case "--plan": printPlan = true
        case "--shrink": shrink = true
        case "--verbose": verbose = true
        case "--out":
            guard let file = arguments.first else { fail("--out needs a file") }
            arguments.removeFirst()
            outFile = file
        case "--plant":
            guard arguments.first == "ack-before-redis" else { fail("cluster --plant knows ack-before-redis") }
            arguments.removeFirst()
            plant = true
        case "--seed", "--seeds", "--from":
            guard let text = arguments.first, let value = UInt64(text) else { fail("\(name) needs a whole number") }
            arguments.removeFirst()
            if name == "--seed" { seed = value } else if name == "--seeds" { count = value } else { first = value }
        default: fail("unknown option \(name) for cluster")
        }
    }
    if seed == nil, printPlan || shrink || outFile != nil || verbose { fail("cluster --plan, --shrink, --out and --verbose go with --seed") }
    func clusterPlan(_ seed: UInt64) -> ClusterPlan {
        var plan = ClusterPlan.draw(seed: seed)
        plan.plantAckBeforeRedis = plant
        return plan
    }
    let replayFlags = plant ? " --plant ack-before-redis" : ""
    func line(_ report: ClusterSimulation.Report) -> String {
        let faults = report.faultsHit.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
        return "seed \(report.seed): \(report.servers) servers, \(report.clients) clients, \(report.operationsMade) operations; \(report.crashes) server crashes, \(report.redisRestarts) Redis restarts, \(report.cuts) cut links, \(report.departures) departures, \(report.checkpoints) checkpoints, \(report.redisCommands) Redis commands\(faults.isEmpty ? "" : ", " + faults.joined(separator: ", "))\(report.access ? ", access control" : ""); \(report.passed ? "converged \(String(format: "%.3f", report.convergedAfter ?? 0)) s after the heal" : "FAILED")"
    }
    if let seed {
        if printPlan {
            print(clusterPlan(seed).text, terminator: "")
            exit(0)
        }
        let printLine: @Sendable (String) -> Void = { print($0) }
        let report = ClusterSimulation(clusterPlan(seed), log: verbose ? printLine : nil).run()
        if json {
            let object: [String: Any] = ["seed": seed, "passed": report.passed, "failures": report.failures, "failureKind": report.failureKind ?? NSNull(),
                                         "operations": report.operationsMade, "deliveries": report.deliveries, "operationsDelivered": report.operationsDelivered,
                                         "events": report.events, "faults": report.faultsHit, "hash": hex(report.decisionHash)]
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
            FileHandle.standardOutput.write(data + Data([10]))
        } else {
            print(line(report))
            for failure in report.failures { print("  \(failure)") }
            print("deliveries \(report.deliveries) (\(report.operationsDelivered) operations), \(report.events) events, simulated \(String(format: "%.1f", report.simulatedSeconds)) s")
            if !report.passed { print("replay: bin/board-sim cluster --seed \(seed)\(replayFlags)\(shrink ? "" : " (add --shrink for a short scenario that fails the same way)")") }
            print("hash: \(hex(report.decisionHash))")
        }
        if shrink, report.passed, !json { print("seed \(seed) passed: nothing to shrink (--shrink reduces a failing seed)") }
        if shrink, !report.passed {
            let showProgress = isatty(2) != 0
            guard let shrunk = ClusterSimulation.shrink(clusterPlan(seed), progress: { runs, events in
                if showProgress { FileHandle.standardError.write(Data("\rshrinking: run \(runs), \(events) events   ".utf8)) }
            }) else {
                print("the failure did not reproduce while shrinking")
                exit(1)
            }
            if showProgress { FileHandle.standardError.write(Data("\n".utf8)) }
            if let outFile {
                do { try Data(shrunk.scenario.utf8).write(to: URL(fileURLWithPath: outFile)) } catch {
                    FileHandle.standardError.write(Data("Error: cannot write \(outFile): \(error)\n".utf8))
                    exit(1)
                }
            }
            if !json {
                print("shrunk to \(shrunk.plan.events.count) of \(shrunk.originalEvents) events in \(shrunk.runs) runs; still fails (\(shrunk.report.failureKind ?? "?")):")
                print(shrunk.scenario, terminator: "")
                if let outFile { print("written to \(outFile); replay: bin/board-sim run \(outFile)") }
            }
        }
        exit(report.passed ? 0 : 1)
    }
    guard let count else { fail("cluster needs --seed N or --seeds K") }
    let start = Date()
    let reports = ClusterSimulation.swarm(seeds: first..<(first + count), plantAckBeforeRedis: plant)
    let wall = Date().timeIntervalSince(start)
    let failed = reports.filter { !$0.passed }
    var faults: [String: Int] = [:]
    for report in reports { for (kind, _) in report.faultsHit { faults[kind, default: 0] += 1 } }
    if json {
        let object: [String: Any] = ["seeds": reports.count, "failed": failed.map(\.seed),
                                     "crashes": reports.reduce(0) { $0 + $1.crashes }, "redisRestarts": reports.reduce(0) { $0 + $1.redisRestarts },
                                     "checkpoints": reports.reduce(0) { $0 + $1.checkpoints }, "operations": reports.reduce(0) { $0 + $1.operationsMade },
                                     "deliveries": reports.reduce(0) { $0 + $1.deliveries }, "operationsDelivered": reports.reduce(0) { $0 + $1.operationsDelivered },
                                     "seedsHittingFault": faults, "wallSeconds": wall]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
        FileHandle.standardOutput.write(data + Data([10]))
    } else {
        for report in failed {
            print(line(report))
            for failure in report.failures { print("  \(failure)") }
        }
        print("cluster seeds \(first)..<\(first + count): \(reports.count - failed.count) passed, \(failed.count) failed; \(reports.reduce(0) { $0 + $1.crashes }) server crashes, \(reports.reduce(0) { $0 + $1.redisRestarts }) Redis restarts, \(reports.reduce(0) { $0 + $1.checkpoints }) checkpoints, \(reports.filter(\.access).count) seeds with access control")
        print("seeds hitting each fault: \(faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value) (\(100 * $0.value / max(reports.count, 1))%)" }.joined(separator: ", "))")
        print("\(reports.reduce(0) { $0 + $1.deliveries }) deliveries carrying \(reports.reduce(0) { $0 + $1.operationsDelivered }) operations, simulated \(String(format: "%.0f", reports.reduce(0.0) { $0 + $1.simulatedSeconds })) s, wall \(String(format: "%.1f", wall)) s")
        for report in failed { print("FAILED seed \(report.seed) — replay: bin/board-sim cluster --seed \(report.seed)\(replayFlags) [--shrink]") }
    }
    exit(failed.isEmpty ? 0 : 1)
}

// board-sim run FILE... [--svg DIR]: scenarios.
if arguments.first == "run" {
    var files: [String] = []
    var svgDirectory: String?
    var rest = Array(arguments.dropFirst())
    while !rest.isEmpty {
        let word = rest.removeFirst()
        if word == "--svg" {
            guard let directory = rest.first, !directory.hasPrefix("-") else { fail("--svg needs a directory") }
            svgDirectory = rest.removeFirst()
        } else if word.hasPrefix("-") {
            fail("unknown option \(word) for run")
        } else {
            files.append(word)
        }
    }
    guard !files.isEmpty else { fail("`run` needs one or more scenario files") }
    if let svgDirectory {
        do {
            try FileManager.default.createDirectory(atPath: svgDirectory, withIntermediateDirectories: true)
        } catch {
            FileHandle.standardError.write(Data("Error: cannot create \(svgDirectory): \(error)\n".utf8))
            exit(1)
        }
    }
    // BOARD_SIM_VERBOSE=1: cluster scenarios print every decision and log line, as --verbose.
    var verboseRun: (@Sendable (String) -> Void)?
    if ProcessInfo.processInfo.environment["BOARD_SIM_VERBOSE"] != nil { verboseRun = { @Sendable line in print(line) } }
    var failed = 0
    for file in files {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
            FileHandle.standardError.write(Data("Error: cannot read \(file)\n".utf8))
            exit(1)
        }
        if ClusterPlan.isCluster(text) {
            do {
                let report = ClusterSimulation(try ClusterPlan(text: text), log: verboseRun).run()
                print("== \(file)")
                print("  seed \(report.seed): \(report.servers) servers, \(report.clients) clients, \(report.operationsMade) operations, \(report.crashes) server crashes, \(report.redisRestarts) Redis restarts")
                for failure in report.failures { print("  FAILED: \(failure)") }
                print("  hash: \(hex(report.decisionHash))")
                print(report.passed ? "PASSED \(file)" : "FAILED \(file): \(report.failures.count) oracle failure(s)")
                if !report.passed { failed += 1 }
            } catch {
                FileHandle.standardError.write(Data("Error: \(file): \(error)\n".utf8))
                exit(64)
            }
            continue
        }
        let scenario = Scenario(name: file, text: text)
        do {
            let outcome = try scenario.run()
            print("== \(file)")
            for line in outcome.transcript { print("  " + line) }
            print("final boards:")
            for board in outcome.boards { print("  " + board.replacingOccurrences(of: "\n", with: "\n  ")) }
            if let svgDirectory {
                let stem = URL(fileURLWithPath: file).deletingPathExtension().lastPathComponent
                var written: [String] = []
                for (host, board) in outcome.snapshots {
                    let path = svgDirectory + "/\(stem)-\(host).svg"
                    // Frame the drawing, not the page (scenario stickers are 4 points wide on a
                    // 1600 x 1200 canvas), drawn with its longer side about 480 pixels (1x-16x).
                    let frame = SVGFrame.content(margin: 16)
                    let view = SVGRenderer.viewBox(of: board, frame: frame)
                    let scale = min(16, max(1, 480 / max(view.width, view.height)))
                    let rendering = try SVGRenderer.render(board, policy: ExportPolicy(scale: scale), frame: frame)
                    try Data(rendering.bytes).write(to: URL(fileURLWithPath: path))
                    written.append(path)
                }
                print("pictures: \(written.joined(separator: " "))")
            }
            print(outcome.passed ? "PASSED \(file)" : "FAILED \(file): \(outcome.failures.count) \(scenario.isWorld ? "oracle failure(s)" : "expectation(s)")")
            if !outcome.passed { failed += 1 }
        } catch let error as Scenario.ScenarioError {
            FileHandle.standardError.write(Data("Error: \(file): \(error)\n".utf8))
            exit(64)
        } catch {
            FileHandle.standardError.write(Data("Error: \(file): \(error)\n".utf8))
            exit(1)
        }
    }
    if files.count > 1 { print("\(files.count - failed) passed, \(failed) failed") }
    exit(failed == 0 ? 0 : 1)
}
var options: [String: UInt64] = [:]
var json = false
var verbose = false
var printPlan = false
var shrink = false
var outFile: String?
var mutation = World.Mutation.none
while !arguments.isEmpty {
    let name = arguments.removeFirst()
    if name == "--json" { json = true; continue }
    if name == "--verbose" { verbose = true; continue }
    if name == "--plan" { printPlan = true; continue }
    if name == "--shrink" { shrink = true; continue }
    if name == "--out" {
        guard let file = arguments.first else { fail("--out needs a file") }
        outFile = arguments.removeFirst()
        _ = file
        continue
    }
    if name == "--plant" {
        guard let text = arguments.first, let bug = World.Mutation(rawValue: text), bug != .none else {
            fail("--plant needs one of \(World.Mutation.allCases.filter { $0 != .none }.map(\.rawValue).joined(separator: ", "))")
        }
        arguments.removeFirst()
        mutation = bug
        continue
    }
    guard ["--seed", "--seeds", "--from", "--peers", "--edits"].contains(name) else { fail("unknown option \(name)") }
    guard let text = arguments.first, let value = UInt64(text) else { fail("\(name) needs a whole number") }
    arguments.removeFirst()
    options[String(name.dropFirst(2))] = value
}
let peers = Int(options["peers"] ?? 3)
guard (1...16).contains(peers) else { fail("--peers must be 1 to 16") }

let printLine: @Sendable (String) -> Void = { print($0) }
let planted = mutation
let editsPerSecond = Double(options["edits"] ?? 20)
guard (1...1000).contains(editsPerSecond) else { fail("--edits must be 1 to 1000 edits per second") }
func plan(_ seed: UInt64) -> Plan {
    var plan = Plan.draw(seed: seed, peers: peers, editsPerSecond: editsPerSecond)
    plan.mutation = planted
    return plan
}
if options["seed"] == nil, printPlan || shrink || outFile != nil { fail("--plan, --shrink and --out go with --seed") }

func hex(_ value: UInt64) -> String {
    let text = String(value, radix: 16)
    return String(repeating: "0", count: 16 - text.count) + text
}

if let seed = options["seed"] {
    if printPlan {
        print(plan(seed).text, terminator: "")
        exit(0)
    }
    let start = Date()
    let report = World.simulate(plan(seed), log: verbose ? printLine : nil)
    if json {
        let object: [String: Any] = [
            "seed": seed, "passed": report.passed, "topology": report.topology, "failures": report.failures, "faults": report.faultsHit,
            "operations": report.operationsMade, "deliveries": report.deliveries, "operationsDelivered": report.operationsDelivered,
            "failureKind": report.failureKind ?? NSNull(), "events": report.events,
            "simulatedSeconds": report.simulatedSeconds, "convergedAfter": report.convergedAfter ?? NSNull(),
            "hash": hex(report.decisionHash),
        ]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
        FileHandle.standardOutput.write(data + Data([10]))
    } else {
        print("seed \(seed): planned \(report.planned.isEmpty ? "nothing" : report.planned)")
        print("topology \(report.topology)")
        print("faults hit: \(report.faultsHit.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
        print("operations \(report.operationsMade), deliveries \(report.deliveries) (\(report.operationsDelivered) operations), simulated \(String(format: "%.1f", report.simulatedSeconds)) s, wall \(String(format: "%.2f", Date().timeIntervalSince(start))) s")
        if let after = report.convergedAfter { print("converged \(String(format: "%.2f", after)) s after the heal") }
        for failure in report.failures { print("FAILED: \(failure)") }
        if !report.passed {
            print("replay: bin/board-sim --seed \(seed)\(peers == 3 ? "" : " --peers \(peers)")\(editsPerSecond == 20 ? "" : " --edits \(Int(editsPerSecond))")\(mutation == .none ? "" : " --plant \(mutation.rawValue)")\(shrink ? "" : " (add --shrink for a short scenario that fails the same way)")")
        }
        print("hash: \(hex(report.decisionHash))")
    }
    if shrink, report.passed, !json {
        print("seed \(seed) passed: nothing to shrink (--shrink reduces a failing seed)")
    }
    if shrink, !report.passed {
        let showProgress = isatty(2) != 0
        guard let shrunk = World.shrink(plan(seed), progress: { runs, events in
            if showProgress { FileHandle.standardError.write(Data("\rshrinking: run \(runs), \(events) events   ".utf8)) }
        }) else {
            print("the failure did not reproduce while shrinking")
            exit(1)
        }
        if showProgress { FileHandle.standardError.write(Data("\n".utf8)) }
        if let outFile {
            do {
                try Data(shrunk.scenario.utf8).write(to: URL(fileURLWithPath: outFile))
            } catch {
                FileHandle.standardError.write(Data("Error: cannot write \(outFile): \(error)\n".utf8))
                exit(1)
            }
        }
        if !json {
            print("shrunk to \(shrunk.plan.events.count) of \(shrunk.originalEvents) events in \(shrunk.runs) runs; still fails (\(shrunk.report.failureKind ?? "?")):")
            print(shrunk.scenario, terminator: "")
            if let outFile { print("written to \(outFile); replay: bin/board-sim run \(outFile)") }
        }
    }
    exit(report.passed ? 0 : 1)
}

guard let count = options["seeds"] else { fail("give --seed N or --seeds K") }
let from = options["from"] ?? 0
let start = Date()
let showProgress = !json && isatty(2) != 0
let reports = World.swarm(seeds: from..<(from + count), peers: peers, editsPerSecond: editsPerSecond, mutation: mutation) { done in
    if showProgress { FileHandle.standardError.write(Data("\r\(done)/\(count) seeds".utf8)) }
}
let wall = Date().timeIntervalSince(start)
let failed = reports.filter { !$0.passed }
var faults: [String: Int] = [:]
for report in reports { for (kind, _) in report.faultsHit { faults[kind, default: 0] += 1 } }
let deliveries = reports.reduce(0) { $0 + $1.deliveries }
let operationsDelivered = reports.reduce(0) { $0 + $1.operationsDelivered }
var topologies: [String: Int] = [:]
for report in reports { topologies[String(report.topology.prefix { $0 != ":" }), default: 0] += 1 }
let cores = Double(ProcessInfo.processInfo.activeProcessorCount)
let simulated = reports.reduce(0.0) { $0 + $1.simulatedSeconds }
if json {
    let object: [String: Any] = [
        "seeds": reports.count, "failed": failed.map(\.seed), "seedsHittingFault": faults,
        "deliveries": deliveries, "operationsDelivered": operationsDelivered, "simulatedSeconds": simulated, "wallSeconds": wall,
        "topologies": topologies, "cores": cores,
    ]
    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
    FileHandle.standardOutput.write(data + Data([10]))
} else {
    if isatty(2) != 0 { FileHandle.standardError.write(Data("\n".utf8)) }
    print("seeds \(from)..<\(from + count): \(reports.count - failed.count) passed, \(failed.count) failed")
    print("seeds hitting each fault: \(faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value) (\(100 * $0.value / max(reports.count, 1))%)" }.joined(separator: ", "))")
    print("topologies: \(topologies.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
    print("simulated \(String(format: "%.0f", simulated)) s, \(deliveries) deliveries carrying \(operationsDelivered) operations, wall \(String(format: "%.1f", wall)) s on \(Int(cores)) cores")
    print("per core: \(String(format: "%.0f", Double(deliveries) / max(wall * cores, 0.001))) deliveries/s, \(String(format: "%.0f", Double(operationsDelivered) / max(wall * cores, 0.001))) operation deliveries/s, \(String(format: "%.3f", wall * cores / Double(max(reports.count, 1)))) s per seed")
    for report in failed {
        print("FAILED seed \(report.seed): \(report.failures.first ?? "?") — replay: bin/board-sim --seed \(report.seed)\(peers == 3 ? "" : " --peers \(peers)")\(editsPerSecond == 20 ? "" : " --edits \(Int(editsPerSecond))")\(mutation == .none ? "" : " --plant \(mutation.rawValue)") [--shrink]")
    }
}
exit(failed.isEmpty ? 0 : 1)
