// board-load: a real `board-sync serve` process under N clients across M boards on loopback,
// editing at a set rate; reports sustained operations per second, edit-to-arrival latency,
// the server's memory, and whether every client converged with nothing lost. Run through
// bin/load (release build). Bounded in count and time.
import BoardCRDT
import BoardModel
import BoardNet
import BoardSync
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

let usage = "board-load [--clients N] [--boards M] [--rate OPS-PER-SECOND] [--seconds S] [--json]"
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("--help") || arguments.contains("-h") {
    print("""
    OVERVIEW: Load a real sync server: N clients on loopback across M boards edit at a set total
    rate for S seconds; then every client must converge with nothing lost.

    USAGE: \(usage)

    OPTIONS:
      --clients N     Clients (default 200).
      --boards M      Boards they spread over (default 20).
      --rate R        Operations per second, all clients together (default 20000).
      --seconds S     Editing time (default 10; at most 300).
      --json          Print the figures as JSON.
      -h, --help      Show help information.

    EXIT CODES: 0 every client converged, 1 a client did not (or the server failed), 64 bad usage.
    """)
    exit(0)
}
func value(_ name: String, _ fallback: Double) -> Double {
    guard let index = arguments.firstIndex(of: name) else { return fallback }
    guard index + 1 < arguments.count, let number = Double(arguments[index + 1]), number > 0 else {
        FileHandle.standardError.write(Data("Error: \(name) needs a positive number\nUsage: \(usage)\n".utf8))
        exit(64)
    }
    return number
}
let clients = Int(value("--clients", 200))
let boards = max(1, min(Int(value("--boards", 20)), clients))
let rate = value("--rate", 20_000)
let seconds = min(value("--seconds", 10), 300)
let json = arguments.contains("--json")
func progress(_ line: String) { FileHandle.standardError.write(Data("board-load: \(line)\n".utf8)) }

// The server: the real binary, next to this one.
let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("board-sync").path
let data = FileManager.default.temporaryDirectory.appendingPathComponent("board-load-\(getpid())").path
let server = Process()
server.executableURL = URL(fileURLWithPath: binary)
server.arguments = ["serve", "--data", data, "--listen", "127.0.0.1:0", "--max-connections", "\(clients + 100)",
                    "--max-connections-per-address", "\(clients + 100)", "--max-ops-per-second", "1000000"]
let serverLog = Pipe()
server.standardError = serverLog
server.standardOutput = FileHandle.nullDevice
do { try server.run() } catch {
    FileHandle.standardError.write(Data("Error: cannot start \(binary) (build it: swift build -c release --product board-sync): \(error)\n".utf8))
    exit(1)
}
var logText = ""
var address: SocketAddress?
let started = Date()
while address == nil, Date().timeIntervalSince(started) < 20 {
    logText += String(decoding: serverLog.fileHandleForReading.availableData, as: UTF8.self)
    if let line = logText.split(separator: "\n").first(where: { $0.contains("listening on ") }),
       let text = line.components(separatedBy: "listening on ").last?.split(separator: " ").first {
        address = try? SocketAddress(parsing: String(text))
    }
}
guard let address else { progress("the server did not start: \(logText)"); server.terminate(); exit(1) }
// Keep draining the server's log so it never blocks on a full pipe.
let drain = Thread { while !serverLog.fileHandleForReading.availableData.isEmpty {} }
drain.start()

func residentKB(_ pid: Int32) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
    return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
}
let idleKB = residentKB(server.processIdentifier)

/// When sampled operations were made (shared by every client's store).
final class SentTimes: Sendable {
    let times = Mutex<[OpID: Double]>([:])
}

/// A client's store: records when sampled operations arrive.
final class TimedStore: HostedStore {
    private(set) var replica: Replica
    let sent: SentTimes
    var latencies: [Double] = []
    init(_ id: ReplicaID, sent: SentTimes) {
        replica = Replica(id: id)
        self.sent = sent
    }
    func merge(_ batch: OperationBatch) throws -> Int {
        let now = EventLoop.now()
        let count = try replica.apply(batch)
        for op in batch.operations where op.id.seq % 50 == 0 {
            if let at = sent.times.withLock({ $0[op.id] }) { latencies.append(now - at) }
        }
        return count
    }
    func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash {
        replica.assets.insert(data)
        return AssetHash.of(data)
    }
    func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit { try body(&replica) }
    func saveView() throws {}
    func closeStore() {}
}

/// The clients, on one event loop of this thread.
final class Load {
    let loop: EventLoop
    let sent = SentTimes()
    var hosts: [SyncHost] = []
    var stores: [TimedStore] = []
    var stickers: [ItemID?] = []
    var made = 0
    var peakKB = 0
    var owed = 0.0
    var next = 0
    var editStart = 0.0
    let serverPID: Int32

    init(address: SocketAddress, serverPID: Int32) throws {
        loop = try EventLoop()
        self.serverPID = serverPID
        var options = SyncHost.Options()
        options.reconnectDelay = (0.05, 1)
        for index in 0..<clients {
            let store = TimedStore(ReplicaID(UInt64(index + 1)), sent: sent)
            let host = try SyncHost(board: "load-\(index % boards)", store: store, listen: nil, loop: loop, options: options)
            host.connect(to: address)
            hosts.append(host)
            stores.append(store)
            stickers.append(nil)
        }
    }

    func runLoop(until condition: @escaping () -> Bool, timeout: Double) -> Bool {
        var met = false
        let deadline = EventLoop.now() + timeout
        func check() {
            if condition() { met = true; loop.stop(); return }
            if EventLoop.now() > deadline { loop.stop(); return }
            loop.schedule(after: 0.01) { check() }
        }
        loop.schedule(after: 0.01) { check() }
        loop.run()
        return met
    }

    /// Ticks of 10 ms; each spreads rate/100 operations over the clients in turn.
    func tick() {
        guard EventLoop.now() - editStart < seconds else { loop.stop(); return }
        owed += rate / 100
        while owed >= 1 {
            owed -= 1
            let index = next % clients
            next += 1
            let host = hosts[index]
            let edit: LocalEdit?
            if let sticker = stickers[index] {
                edit = try? host.edit { try $0.move(sticker, to: CodablePoint(x: Double(self.next % 1000), y: Double(index))) }
            } else {
                edit = try? host.edit { try $0.addSticker(asset: AssetHash.of([UInt8(index & 0xFF)]), at: CodablePoint(x: 0, y: 0)) }
                stickers[index] = edit?.item
            }
            if let op = edit?.operations.first {
                made += 1
                if op.id.seq % 50 == 0 { let now = EventLoop.now(); sent.times.withLock { $0[op.id] = now } }
            }
        }
        if next % 2000 < Int(rate / 100) + 1 { peakKB = max(peakKB, residentKB(serverPID)) }
        loop.schedule(after: 0.01) { self.tick() }
    }

    /// Every client of a board holds what every client of it made.
    func converged() -> Bool {
        for board in 0..<boards {
            let members = stride(from: board, to: clients, by: boards).map { stores[$0].replica.versionVector }
            guard let first = members.first, members.allSatisfy({ $0 == first }) else { return false }
            for member in stride(from: board, to: clients, by: boards) where first[ReplicaID(UInt64(member + 1))] < stores[member].replica.lastSeq {
                return false
            }
        }
        return true
    }

    func run(idleKB: Int) throws -> Int32 {
        progress("\(clients) clients on \(boards) boards, \(Int(rate)) operations per second for \(Int(seconds)) s, server pid \(serverPID)")
        let connected = runLoop(until: { self.hosts.allSatisfy { host in host.boards.values.first!.hub.sessions.values.contains { $0.isOpen } } }, timeout: 60)
        if !connected { progress("not every client connected within 60 s") }
        editStart = EventLoop.now()
        loop.schedule(after: 0) { self.tick() }
        loop.run()
        let editSeconds = EventLoop.now() - editStart
        peakKB = max(peakKB, residentKB(serverPID))
        let settleStart = EventLoop.now()
        let allConverged = runLoop(until: { self.converged() }, timeout: 60)
        let settle = EventLoop.now() - settleStart
        let samples = stores.flatMap(\.latencies).sorted()
        func percentile(_ p: Double) -> Double { samples.isEmpty ? 0 : samples[min(samples.count - 1, Int(Double(samples.count) * p))] * 1000 }
        let delivered = stores.reduce(0) { $0 + Int($1.replica.versionVector.totalCount) } - made
        let endKB = residentKB(serverPID)
        for host in hosts { host.shutdown(save: false) }
        let figures: [String: Any] = [
            "clients": clients, "boards": boards, "targetRate": rate, "seconds": editSeconds,
            "operationsMade": made, "sustainedOpsPerSecond": Double(made) / editSeconds,
            "operationsDeliveredToClients": delivered,
            "latencyMedianMs": percentile(0.5), "latencyP99Ms": percentile(0.99), "latencySamples": samples.count,
            "serverIdleKB": idleKB, "serverPeakKB": peakKB, "serverEndKB": endKB,
            "serverKBPerConnection": Double(max(0, endKB - idleKB)) / Double(clients),
            "converged": allConverged, "settleSeconds": settle,
        ]
        if json {
            let bytes = try JSONSerialization.data(withJSONObject: figures, options: [.sortedKeys, .prettyPrinted])
            print(String(decoding: bytes, as: UTF8.self))
        } else {
            print("board-load: \(clients) clients, \(boards) boards, target \(Int(rate)) ops/s for \(String(format: "%.1f", editSeconds)) s")
            print("  made \(made) operations: \(Int(Double(made) / editSeconds)) ops/s sustained; \(delivered) deliveries to clients")
            print("  edit to arrival: median \(String(format: "%.2f", percentile(0.5))) ms, p99 \(String(format: "%.2f", percentile(0.99))) ms (\(samples.count) samples)")
            print("  server memory: idle \(idleKB) KB, peak \(peakKB) KB, end \(endKB) KB (\(String(format: "%.1f", Double(max(0, endKB - idleKB)) / Double(clients))) KB per connection)")
            print("  \(allConverged ? "every client converged" : "NOT CONVERGED") (\(String(format: "%.2f", settle)) s after the edits stopped)")
        }
        return allConverged ? 0 : 1
    }
}

let status: Int32
do {
    status = try Load(address: address, serverPID: server.processIdentifier).run(idleKB: idleKB)
} catch {
    progress("failed: \(error)")
    status = 1
}
server.terminate()
server.waitUntilExit()
try? FileManager.default.removeItem(atPath: data)
exit(status)
