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

let usage = "board-load [--clients N] [--boards M] [--rate OPS-PER-SECOND] [--seconds S] [--processes P] [--idle-boards I [--idle-seconds T]] [--servers K [--redis HOST:PORT]] [--tls] [--view-save-threads N] [--json]"
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
      --processes P   Client processes (default 1): the clients, the rate and the work of
                      applying what arrives are split over P processes, so the generator is not
                      the bottleneck (the server is one more process).
      --idle-boards I Before the editing, open I more boards (idle-0, idle-1, ...) on the
                      server, each through one connection that says goodbye once its handshake
                      is done: open boards nobody is connected to and nothing edits (the server
                      is told to keep them open for an hour). Then the server's CPU is measured
                      for --idle-seconds with no traffic at all (default 5), and the editing's
                      CPU is reported per 1,000 operations: with a fixed active load, the
                      difference between runs is what open boards cost per operation.
      --servers K     Scale-out (docs/SCALE-OUT.md): K server processes sharing one Redis,
                      client i on server i mod K, so most deliveries cross servers (default 1:
                      one server without Redis).
      --redis H:P     The Redis the servers share (default: start Debian's redis-server on a
                      free port with appendonly yes, appendfsync always). With --servers 1 it
                      measures one server with Redis.
      --redis-own     Start that redis-server even with --servers 1 (and report its CPU).
      --kill-one-server
                      With --servers 2 or more: server 1 is killed with SIGKILL halfway through
                      the editing and its clients then dial server 2; every client must still
                      converge with everything acknowledged (one process only).
      --tls           Serve and connect over TLS (a throwaway certificate made with the
                      openssl command).
      --view-save-threads N
                      Passed to the server (`serve --view-save-threads`): threads writing boards'
                      views off its loop thread (default 2; 0 writes them on the loop thread).
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
let viewSaveThreads: String? = arguments.firstIndex(of: "--view-save-threads").map { index in
    guard index + 1 < arguments.count, let threads = Int(arguments[index + 1]), (0...64).contains(threads) else {
        FileHandle.standardError.write(Data("Error: --view-save-threads needs a whole number from 0 to 64\nUsage: \(usage)\n".utf8))
        exit(64)
    }
    return String(threads)
}
let processes = max(1, min(Int(value("--processes", 1)), 64))
let tls = arguments.contains("--tls")
let serverCount = max(1, min(Int(value("--servers", 1)), 8))
let redisGiven: SocketAddress? = arguments.firstIndex(of: "--redis").flatMap { index in
    index + 1 < arguments.count ? try? SocketAddress(parsing: arguments[index + 1]) : nil
}
if arguments.contains("--redis"), redisGiven == nil {
    FileHandle.standardError.write(Data("Error: --redis needs HOST:PORT\nUsage: \(usage)\n".utf8))
    exit(64)
}
let useRedis = serverCount > 1 || redisGiven != nil || arguments.contains("--redis-own")
let killOneServer = arguments.contains("--kill-one-server")
let idleBoards = arguments.contains("--idle-boards") ? Int(value("--idle-boards", 1)) : 0
let idleSeconds = value("--idle-seconds", 5)
if killOneServer, serverCount < 2 || processes > 1 {
    FileHandle.standardError.write(Data("Error: --kill-one-server needs --servers 2 or more and one process\nUsage: \(usage)\n".utf8))
    exit(64)
}
/// With --tls: the certificate the server presents (its own CA for the clients).
let certificateDirectory = arguments.firstIndex(of: "--certificates").map { arguments[$0 + 1] }
/// Set in the worker processes the coordinator starts: `--worker INDEX --address HOST:PORT`.
let workerIndex: Int? = arguments.firstIndex(of: "--worker").flatMap { Int(arguments[$0 + 1]) }
/// Every how many operations of a client one is timed: about twenty per client, at most one
/// in fifty (short runs with many clients would otherwise time none).
let sampleEvery = UInt64(max(1, min(50, Int(rate * seconds / Double(max(1, clients)) / 20))))
func progress(_ line: String) { FileHandle.standardError.write(Data("board-load: \(line)\n".utf8)) }

func residentKB(_ pid: Int32) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
    return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
}

/// When sampled operations were made (shared by every client's store in this process).
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
        for op in batch.operations where op.id.seq % sampleEvery == 0 {
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

/// Some of the clients (client i edits board i % boards as replica i + 1), on one event loop of
/// this thread, driven phase by phase: connect, edit, converge.
final class Load {
    let loop: EventLoop
    let sent = SentTimes()
    let indices: [Int]
    let share: Double
    var hosts: [Int: SyncHost] = [:]
    var stores: [Int: TimedStore] = [:]
    var stickers: [Int: ItemID] = [:]
    var made = 0
    var next = 0
    var editStart = 0.0
    /// Called every 10 ms while editing (the coordinator samples the server's memory).
    var onTick: () -> Void = {}

    init(addresses: [SocketAddress], indices: [Int], share: Double, certificates: String?) throws {
        loop = try EventLoop()
        self.indices = indices
        self.share = share
        var options = SyncHost.Options()
        options.reconnectDelay = (0.05, 1)
        if let certificates { options.clientTLS = try TLSContext.client(ca: certificates + "/cert.pem") }
        for index in indices {
            let store = TimedStore(ReplicaID(UInt64(index + 1)), sent: sent)
            let host = try SyncHost(board: "load-\(index % boards)", store: store, listen: nil, loop: loop, options: options)
            host.connect(to: addresses[index % addresses.count])
            hosts[index] = host
            stores[index] = store
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

    func connect() -> Bool {
        runLoop(until: { self.hosts.values.allSatisfy { host in host.boards.values.first!.hub.hasOpenSession } }, timeout: 60)
    }

    /// Edits at this process's share of the rate for `seconds`; returns how long it took.
    func edit() -> Double {
        editStart = EventLoop.now()
        loop.schedule(after: 0) { self.tick() }
        loop.run()
        return EventLoop.now() - editStart
    }

    /// Ticks of about 10 ms; each makes the operations the rate owes by now (however late the
    /// tick), spread over the clients in turn.
    private func tick() {
        let elapsed = EventLoop.now() - editStart
        guard elapsed < seconds else { loop.stop(); return }
        let owed = Int(share * elapsed) - next
        for _ in 0..<max(0, owed) {
            let index = indices[next % indices.count]
            next += 1
            let host = hosts[index]!
            let edit: LocalEdit?
            if let sticker = stickers[index] {
                edit = try? host.edit { try $0.move(sticker, to: CodablePoint(x: Double(self.next % 1000), y: Double(index))) }
            } else {
                edit = try? host.edit { try $0.addSticker(asset: AssetHash.of([UInt8(index & 0xFF)]), at: CodablePoint(x: 0, y: 0)) }
                stickers[index] = edit?.item
            }
            if let op = edit?.operations.first {
                made += 1
                if op.id.seq % sampleEvery == 0 { let now = EventLoop.now(); sent.times.withLock { $0[op.id] = now } }
            }
        }
        onTick()
        loop.schedule(after: 0.01) { self.tick() }
    }

    /// What each of these clients made (its last sequence number), by client index.
    var madeSeqs: [Int: UInt64] { stores.mapValues { $0.replica.lastSeq } }

    /// The server acknowledged everything each client here made, and every client here holds
    /// everything every client of its board made (`expected`: all clients' last sequence
    /// numbers, from every process).
    func converged(_ expected: [Int: UInt64]) -> Bool {
        for (index, store) in stores {
            // The server acknowledged (logged durably) everything this client made.
            let own = ReplicaID(UInt64(index + 1))
            let hub = hosts[index]!.boards.values.first!.hub
            guard hub.sessionIDs.contains(where: { (hub.acknowledged(by: $0)?[own] ?? 0) >= store.replica.lastSeq }) else {
                return false
            }
            let board = index % boards
            for member in stride(from: board, to: clients, by: boards)
            where store.replica.versionVector[ReplicaID(UInt64(member + 1))] < expected[member] ?? 0 {
                return false
            }
        }
        return true
    }

    /// Operations that arrived at these clients from others.
    var delivered: Int { stores.values.reduce(0) { $0 + Int($1.replica.versionVector.totalCount) } - made }
    var latencies: [Double] { stores.values.flatMap(\.latencies) }

    func shutdown() { for host in hosts.values { host.shutdown(save: false) } }
}

/// Client i runs in process (i / boards) % processes, so each board's clients are spread over
/// the processes and its operations cross between them through the server.
func clientIndices(worker: Int) -> [Int] {
    (0..<clients).filter { ($0 / boards) % processes == worker }
}

// MARK: Worker: one share of the clients, phases driven by lines on stdin/stdout.

func say(_ object: [String: Any]) {
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

if let worker = workerIndex {
    guard let index = arguments.firstIndex(of: "--address"), index + 1 < arguments.count,
          let addresses = try? arguments[index + 1].split(separator: ",").map({ try SocketAddress(parsing: String($0)) }), !addresses.isEmpty else {
        progress("a worker needs --address HOST:PORT[,HOST:PORT...]")
        exit(64)
    }
    let indices = clientIndices(worker: worker)
    let load = try Load(addresses: addresses, indices: indices, share: rate * Double(indices.count) / Double(clients),
                        certificates: certificateDirectory)
    say(["connected": load.connect()])
    guard readLine() == "go" else { exit(1) }
    let took = load.edit()
    say(["made": Dictionary(uniqueKeysWithValues: load.madeSeqs.map { ("\($0.key)", $0.value) }), "count": load.made, "seconds": took])
    guard let line = readLine(), let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
          let all = object["expected"] as? [String: Any] else { exit(1) }
    var expected: [Int: UInt64] = [:]
    for (key, value) in all { if let index = Int(key), let seq = (value as? NSNumber)?.uint64Value { expected[index] = seq } }
    let settleStart = EventLoop.now()
    let converged = load.runLoop(until: { load.converged(expected) }, timeout: 60)
    say(["converged": converged, "settle": EventLoop.now() - settleStart, "delivered": load.delivered,
         "latencies": load.latencies.map { ($0 * 1e6).rounded() / 1e3 }])
    load.shutdown()
    exit(0)
}

// MARK: Coordinator: the server, the clients (here or in worker processes), the figures.

let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("board-sync").path
let data = FileManager.default.temporaryDirectory.appendingPathComponent("board-load-\(getpid())").path
/// A throwaway self-signed certificate for 127.0.0.1 (its own CA), for --tls.
func makeCertificate(in directory: String) -> Bool {
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let openssl = Process()
    openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    openssl.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                         "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem", "-days", "1",
                         "-subj", "/CN=board-load", "-addext", "subjectAltName=IP:127.0.0.1"]
    openssl.standardError = FileHandle.nullDevice
    guard (try? openssl.run()) != nil else { return false }
    openssl.waitUntilExit()
    return openssl.terminationStatus == 0
}
let certificates: String? = tls ? data + "-tls" : nil
if let certificates, !makeCertificate(in: certificates) {
    progress("--tls needs the openssl command to make a certificate")
    exit(1)
}
/// CPU seconds a process has used (user + system), from /proc.
func cpuSeconds(_ pid: Int32) -> Double {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = text.lastIndex(of: ")") else { return 0 }
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func freePort() -> UInt16 {
    guard let loop = try? EventLoop(), let listener = try? TCPListener(address: SocketAddress(host: "127.0.0.1", port: 0), on: loop) else { return 0 }
    defer { listener.close() }
    return listener.address.port
}

// Redis for --servers/--redis: the one given, or our own redis-server.
var redisProcess: Process?
var redisAddress = redisGiven
if useRedis, redisAddress == nil {
    guard let redisBinary = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first(where: FileManager.default.isExecutableFile) else {
        progress("--servers needs Redis: give --redis HOST:PORT or install redis-server")
        exit(1)
    }
    let port = freePort()
    try? FileManager.default.createDirectory(atPath: data + "-redis", withIntermediateDirectories: true)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: redisBinary)
    process.arguments = ["--port", "\(port)", "--bind", "127.0.0.1", "--dir", data + "-redis", "--save", "",
                         "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    redisProcess = process
    redisAddress = SocketAddress(host: "127.0.0.1", port: port)
}

var servers: [Process] = []
var serverLogs: [Pipe] = []
var serverAddresses: [SocketAddress] = []
for index in 0..<serverCount {
    let server = Process()
    server.executableURL = URL(fileURLWithPath: binary)
    server.arguments = ["serve", "--data", serverCount == 1 ? data : data + "/server-\(index + 1)", "--listen", "127.0.0.1:0",
                        "--max-connections", "\(clients + 300)",
                        "--max-connections-per-address", "\(clients + 300)", "--max-ops-per-second", "1000000"]
        + (certificates.map { ["--tls-cert", $0 + "/cert.pem", "--tls-key", $0 + "/key.pem"] } ?? [])
        + (redisAddress.map { ["--redis", $0.description, "--node-id", "load-\(index + 1)"] } ?? [])
        + (idleBoards > 0 ? ["--max-open-boards", "\(boards + idleBoards + 100)", "--idle-board-seconds", "3600"] : [])
        + (viewSaveThreads.map { ["--view-save-threads", $0] } ?? [])
    let serverLog = Pipe()
    server.standardError = serverLog
    server.standardOutput = FileHandle.nullDevice
    do { try server.run() } catch {
        FileHandle.standardError.write(Data("Error: cannot start \(binary) (build it: swift build -c release --product board-sync): \(error)\n".utf8))
        exit(1)
    }
    var logText = ""
    var listening: SocketAddress?
    let started = Date()
    while listening == nil || (redisAddress != nil && !logText.contains("Redis tail link connected")), Date().timeIntervalSince(started) < 20 {
        logText += String(decoding: serverLog.fileHandleForReading.availableData, as: UTF8.self)
        if let line = logText.split(separator: "\n").first(where: { $0.contains("listening on ") }),
           let text = line.components(separatedBy: "listening on ").last?.split(separator: " ").first {
            listening = try? SocketAddress(parsing: String(text))
        }
    }
    guard let address = listening, redisAddress == nil || logText.contains("Redis tail link connected") else {
        progress("server \(index + 1) did not start: \(logText)")
        for server in servers + [server] { server.terminate() }
        redisProcess?.terminate()
        exit(1)
    }
    servers.append(server)
    serverLogs.append(serverLog)
    serverAddresses.append(address)
}
let addresses = serverAddresses
// Keep draining the servers' logs so they never block on a full pipe.
for serverLog in serverLogs {
    let drain = Thread { while !serverLog.fileHandleForReading.availableData.isEmpty {} }
    drain.start()
}
let serverPIDs = servers.map(\.processIdentifier)
func serversKB() -> Int { serverPIDs.reduce(0) { $0 + residentKB($1) } }
let idleKB = serversKB()
let peak = Mutex(0)
@Sendable func samplePeak() { let now = serverPIDs.reduce(0) { $0 + residentKB($1) }; peak.withLock { $0 = max($0, now) } }
let cpuBefore = (servers: serverPIDs.reduce(0) { $0 + cpuSeconds($1) }, redis: redisProcess.map { cpuSeconds($0.processIdentifier) } ?? 0)

func serversCPU() -> Double { serverPIDs.reduce(0) { $0 + cpuSeconds($1) } }

/// Opens `idleBoards` boards on the servers (board i on server i mod K), each through a
/// connection of its own that says goodbye once its handshake is done, 100 at a time. The
/// server keeps them open (`--idle-board-seconds`) with nobody connected.
func openIdleBoards() -> Bool {
    guard idleBoards > 0, let loop = try? EventLoop() else { return true }
    var options = SyncHost.Options()
    options.reconnect = false
    if let certificates { options.clientTLS = try? TLSContext.client(ca: certificates + "/cert.pem") }
    let sent = SentTimes()
    var started = 0, opened = 0
    var live: [SyncHost] = []
    var leaving: [SyncHost] = []
    let deadline = EventLoop.now() + 600
    func step() {
        var still: [SyncHost] = []
        for host in live {
            if host.boards.values.first?.hub.hasOpenSession == true {
                host.shutdown(save: false)
                leaving.append(host)
                opened += 1
            } else {
                still.append(host)
            }
        }
        live = still
        leaving.removeAll { $0.connectionCount == 0 }
        while live.count < 100, started < idleBoards {
            let store = TimedStore(ReplicaID(UInt64(1_000_000 + started)), sent: sent)
            if let host = try? SyncHost(board: "idle-\(started)", store: store, listen: nil, loop: loop, options: options) {
                host.connect(to: addresses[started % addresses.count])
                live.append(host)
            }
            started += 1
        }
        if (opened == idleBoards && leaving.isEmpty) || EventLoop.now() > deadline { loop.stop(); return }
        loop.schedule(after: 0.005) { step() }
    }
    loop.schedule(after: 0) { step() }
    loop.run()
    return opened == idleBoards
}

/// With --idle-boards: the server's share of one core while those boards are open and nothing
/// at all happens (measured before any client connects).
var idleCPUPercent: Double?
if idleBoards > 0 {
    let openStart = EventLoop.now()
    guard openIdleBoards() else {
        progress("not every idle board opened within 600 s")
        for server in servers { server.terminate() }
        exit(1)
    }
    progress("opened \(idleBoards) idle boards in \(String(format: "%.1f", EventLoop.now() - openStart)) s")
    usleep(3_000_000)  // the last goodbyes, closes and saves
    let before = serversCPU()
    usleep(UInt32(idleSeconds * 1_000_000))
    idleCPUPercent = 100 * (serversCPU() - before) / idleSeconds
}

struct Outcome {
    /// The servers' CPU seconds from the start of the editing until every client converged.
    var editCPU = 0.0
    var made = 0
    var seconds = 0.0
    var connected = true
    var converged = true
    var settle = 0.0
    var delivered = 0
    var latencies: [Double] = []  // ms
}

/// The clients in this process (`--processes 1`).
func runHere() throws -> Outcome {
    let load = try Load(addresses: addresses, indices: Array(0..<clients), share: rate, certificates: certificates)
    var outcome = Outcome()
    outcome.connected = load.connect()
    var ticks = 0
    load.onTick = { ticks += 1; if ticks % 20 == 0 { samplePeak() } }
    if killOneServer {
        let victim = serverPIDs[0]
        let failover = addresses[1]
        let loop = load.loop
        nonisolated(unsafe) let moved = load.hosts.filter { $0.key % addresses.count == 0 }.map(\.value)
        let killer = Thread {
            usleep(UInt32(seconds / 2 * 1_000_000))
            kill(victim, SIGKILL)
            progress("killed server 1 (pid \(victim)) with SIGKILL; its \(moved.count) clients dial server 2")
            loop.execute { for host in moved { host.connect(to: failover) } }
        }
        killer.start()
    }
    let cpuAtEdit = serversCPU()
    outcome.seconds = load.edit()
    outcome.made = load.made
    let expected = load.madeSeqs
    let settleStart = EventLoop.now()
    outcome.converged = load.runLoop(until: { load.converged(expected) }, timeout: 60)
    outcome.settle = EventLoop.now() - settleStart
    outcome.editCPU = serversCPU() - cpuAtEdit
    outcome.delivered = load.delivered
    outcome.latencies = load.latencies.map { $0 * 1000 }
    load.shutdown()
    return outcome
}

/// The clients split over worker processes (this binary with --worker).
func runWorkers() throws -> Outcome {
    var workers: [(process: Process, input: FileHandle, output: FileHandle)] = []
    for worker in 0..<processes {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = ["--worker", "\(worker)", "--address", addresses.map(\.description).joined(separator: ","), "--processes", "\(processes)",
                             "--clients", "\(clients)", "--boards", "\(boards)", "--rate", "\(rate)", "--seconds", "\(seconds)"]
            + (certificates.map { ["--certificates", $0] } ?? [])
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        workers.append((process, input.fileHandleForWriting, output.fileHandleForReading))
    }
    func line(_ handle: FileHandle) -> [String: Any] {
        var bytes: [UInt8] = []
        while true {
            let byte = handle.readData(ofLength: 1)
            guard let first = byte.first else { break }
            if first == 10 { break }
            bytes.append(first)
        }
        return (try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]) ?? [:]
    }
    var outcome = Outcome()
    outcome.connected = workers.allSatisfy { (line($0.output)["connected"] as? Bool) == true }
    let sampling = Atomic<Bool>(true)
    let sampler = Thread { while sampling.load(ordering: .relaxed) { samplePeak(); usleep(200_000) } }
    sampler.start()
    let cpuAtEdit = serversCPU()
    for worker in workers { worker.input.write(Data("go\n".utf8)) }
    var expected: [String: UInt64] = [:]
    for worker in workers {
        let made = line(worker.output)
        outcome.made += made["count"] as? Int ?? 0
        outcome.seconds = max(outcome.seconds, made["seconds"] as? Double ?? 0)
        for (key, value) in made["made"] as? [String: Any] ?? [:] { expected[key] = (value as? NSNumber)?.uint64Value ?? 0 }
    }
    sampling.store(false, ordering: .relaxed)
    let message = try JSONSerialization.data(withJSONObject: ["expected": expected], options: []) + Data("\n".utf8)
    for worker in workers { worker.input.write(message) }
    for worker in workers {
        let end = line(worker.output)
        outcome.converged = outcome.converged && (end["converged"] as? Bool ?? false)
        outcome.settle = max(outcome.settle, end["settle"] as? Double ?? 0)
        outcome.delivered += end["delivered"] as? Int ?? 0
        outcome.latencies += (end["latencies"] as? [Any] ?? []).compactMap { ($0 as? NSNumber)?.doubleValue }
    }
    outcome.editCPU = serversCPU() - cpuAtEdit
    for worker in workers { worker.process.waitUntilExit() }
    return outcome
}

progress("\(clients) clients in \(processes) process(es) on \(boards) boards, \(Int(rate)) operations per second for \(Int(seconds)) s, \(serverCount) server(s) (pids \(serverPIDs.map(String.init).joined(separator: ", ")))\(redisAddress.map { " sharing Redis at \($0)" } ?? "")")
let status: Int32
do {
    let outcome = processes == 1 ? try runHere() : try runWorkers()
    if !outcome.connected { progress("not every client connected within 60 s") }
    samplePeak()
    let endKB = serversKB()
    let serverCPU = serverPIDs.reduce(0) { $0 + cpuSeconds($1) } - cpuBefore.servers
    let redisCPU = redisProcess.map { cpuSeconds($0.processIdentifier) - cpuBefore.redis }
    let peakKB = peak.withLock { $0 }
    let samples = outcome.latencies.sorted()
    // Made and delivered to every client of its board: the edits plus the time the last
    // deliveries took after them.
    let endToEnd = Double(outcome.made) / (outcome.seconds + outcome.settle)
    func percentile(_ p: Double) -> Double { samples.isEmpty ? 0 : samples[min(samples.count - 1, Int(Double(samples.count) * p))] }
    let figures: [String: Any] = [
        "clients": clients, "boards": boards, "processes": processes, "tls": tls, "targetRate": rate, "seconds": outcome.seconds,
        "operationsMade": outcome.made, "sustainedOpsPerSecond": Double(outcome.made) / outcome.seconds,
        "endToEndOpsPerSecond": endToEnd,
        "operationsDeliveredToClients": outcome.delivered,
        "latencyMedianMs": percentile(0.5), "latencyP99Ms": percentile(0.99), "latencySamples": samples.count,
        "serverIdleKB": idleKB, "serverPeakKB": peakKB, "serverEndKB": endKB,
        "serverKBPerConnection": Double(max(0, endKB - idleKB)) / Double(clients),
        "converged": outcome.converged, "settleSeconds": outcome.settle,
        "servers": serverCount, "redis": redisAddress?.description ?? NSNull(), "killedOneServer": killOneServer,
        "serverCPUSeconds": serverCPU, "redisCPUSeconds": redisCPU ?? NSNull(),
        "serverCPUSecondsEditing": outcome.editCPU,
        "serverCPUSecondsPerThousandOps": outcome.made > 0 ? 1000 * outcome.editCPU / Double(outcome.made) : NSNull(),
        "idleBoards": idleBoards, "idleServerCPUPercent": idleCPUPercent ?? NSNull(),
    ]
    if json {
        let bytes = try JSONSerialization.data(withJSONObject: figures, options: [.sortedKeys, .prettyPrinted])
        print(String(decoding: bytes, as: UTF8.self))
    } else {
        print("board-load: \(clients) clients in \(processes) process(es), \(boards) boards\(tls ? ", TLS" : ""), target \(Int(rate)) ops/s for \(String(format: "%.1f", outcome.seconds)) s")
        print("  made \(outcome.made) operations: \(Int(Double(outcome.made) / outcome.seconds)) ops/s sustained; \(outcome.delivered) deliveries to clients; \(Int(endToEnd)) ops/s made and delivered everywhere (until the last arrival)")
        print("  edit to arrival: median \(String(format: "%.2f", percentile(0.5))) ms, p99 \(String(format: "%.2f", percentile(0.99))) ms (\(samples.count) samples)")
        if let redisAddress {
            print("  \(serverCount) server(s) sharing Redis at \(redisAddress): servers used \(String(format: "%.2f", serverCPU)) s of CPU" + (redisCPU.map { ", Redis \(String(format: "%.2f", $0)) s (\(Int(100 * $0 / max(0.001, $0 + serverCPU)))% of the two)" } ?? ""))
        }
        print("  server CPU while editing (until every client converged): \(String(format: "%.2f", outcome.editCPU)) s, \(String(format: "%.3f", outcome.made > 0 ? 1000 * outcome.editCPU / Double(outcome.made) : 0)) s per 1,000 operations")
        if let idleCPUPercent {
            print("  \(idleBoards) idle boards open, nothing happening: the server used \(String(format: "%.2f", idleCPUPercent))% of a core")
        }
        print("  server memory: idle \(idleKB) KB, peak \(peakKB) KB, end \(endKB) KB (\(String(format: "%.1f", Double(max(0, endKB - idleKB)) / Double(clients))) KB per connection)")
        print("  \(outcome.converged ? "every client converged" : "NOT CONVERGED") (\(String(format: "%.2f", outcome.settle)) s after the edits stopped)")
    }
    status = outcome.converged && outcome.connected ? 0 : 1
} catch {
    progress("failed: \(error)")
    status = 1
}
for server in servers { server.terminate(); server.waitUntilExit() }
if let redisProcess {
    redisProcess.terminate()
    for _ in 0..<100 where redisProcess.isRunning { usleep(10_000) }
    if redisProcess.isRunning { kill(redisProcess.processIdentifier, SIGKILL) }
    redisProcess.waitUntilExit()
    try? FileManager.default.removeItem(atPath: data + "-redis")
}
try? FileManager.default.removeItem(atPath: data)
if let certificates { try? FileManager.default.removeItem(atPath: certificates) }
exit(status)
