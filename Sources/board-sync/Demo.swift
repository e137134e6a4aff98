import BoardClient
import BoardCRDT
import BoardModel
import BoardNet
import BoardRedis
import BoardRedisNet
import BoardSimulation
import BoardStore
import BoardSync
import Foundation

/// `board-sync demo`: an embedded sync server on a free loopback port and three peers in one
/// process drawing strokes and dragging stickers at the same time; carol goes offline for the
/// middle of the session and keeps editing. They converge, their packages are written, and a
/// summary says what crossed the wire.
struct Demo {
    let out: String
    let steps: Int
    let json: Bool
    /// Scale-out: this many servers sharing one Redis (1: the single embedded server).
    let serverCount: Int
    let redis: SocketAddress?
    /// Every log line of the servers, their Redis links and the peers, on standard error.
    let verbose: Bool

    init(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["out", "steps", "servers", "redis"], flags: ["json", "verbose"])
        _ = try args.positionals([])
        serverCount = try args.value("servers").map { text -> Int in
            guard let value = Int(text), (1...8).contains(value) else {
                throw UsageError("--servers '\(text)' must be a whole number from 1 to 8 (1: one embedded server; 2 or more share one Redis)")
            }
            return value
        } ?? 1
        redis = try args.value("redis").map { text in
            do { return try SocketAddress(parsing: text) } catch { throw UsageError("--redis '\(text)' is not HOST:PORT") }
        }
        if redis != nil, serverCount == 1 { throw UsageError("--redis goes with --servers N (2 or more)") }
        steps = try args.value("steps").map { text -> Int in
            guard let value = Int(text), (1...10_000).contains(value) else { throw UsageError("--steps '\(text)' must be 1...10000") }
            return value
        } ?? 40
        json = args.has("json")
        verbose = args.has("verbose")
        if let out = args.value("out") {
            if FileManager.default.fileExists(atPath: out),
               !((try? FileManager.default.contentsOfDirectory(atPath: out))?.isEmpty ?? false) {
                throw Failure("\(out) exists and is not empty; give a new or empty folder")
            }
            self.out = out
        } else {
            let stamp = Int(Date().timeIntervalSince1970)
            self.out = FileManager.default.temporaryDirectory.appendingPathComponent("board-sync-demo-\(stamp)-\(getpid())").path
        }
    }

    /// A peer's name from its replica id (presence "gone" messages carry only the id).
    static func name(of replica: ReplicaID, _ packages: [BoardPackage], _ names: [String]) -> String {
        packages.firstIndex { $0.replica.id == replica }.map { names[$0] } ?? "\(replica)"
    }

    /// A log line of `source` (a server, its Redis link, a peer) with `--verbose`.
    func trace(_ source: String, _ line: String, since start: Double) {
        guard verbose else { return }
        let seconds = EventLoop.now() - start
        FileHandle.standardError.write(Data("[\(String(format: "%7.3f", seconds))] \(source): \(line)\n".utf8))
    }

    func say(_ line: String) {
        if !json { print(line) }
    }

    /// Runs the demo; when it fails, nothing of it is left in the output folder (the folder
    /// itself goes too unless it was there, empty, before).
    func run() throws {
        let existed = FileManager.default.fileExists(atPath: out)
        do {
            try perform()
        } catch {
            // `perform` has stopped its Redis and closed its sockets; its packages' files go.
            let files = FileManager.default
            if existed {
                for entry in (try? files.contentsOfDirectory(atPath: out)) ?? [] { try? files.removeItem(atPath: out + "/" + entry) }
            } else {
                try? files.removeItem(atPath: out)
            }
            let kept = ((try? files.contentsOfDirectory(atPath: out)) ?? []).isEmpty ? "nothing was written to \(out)" : "\(out) could not be emptied"
            if let failure = error as? Failure { throw Failure("\(failure.message) (\(kept))") }
            throw error
        }
    }

    private func perform() throws {
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let loop = try EventLoop()
        var serverOptions = SyncHost.Options()
        var serverLog: [String] = []
        let began = EventLoop.now()
        serverOptions.log = { serverLog.append($0); trace("server", $0, since: began) }
        // One embedded server, or (--servers N) several sharing one Redis: its own redis-server
        // on a free port unless --redis names one.
        var servers: [SyncHost] = []
        var clusters: [RedisCluster] = []
        var redisProcess: Process?
        defer {
            if let redisProcess, redisProcess.isRunning {
                // SIGTERM, then SIGKILL if it is still there after a second (a signal mask
                // inherited from whoever started us can keep SIGTERM from ever arriving).
                redisProcess.terminate()
                for _ in 0..<100 where redisProcess.isRunning { usleep(10_000) }
                if redisProcess.isRunning { kill(redisProcess.processIdentifier, SIGKILL) }
                redisProcess.waitUntilExit()
            }
        }
        var redisAddress: SocketAddress?
        if serverCount > 1 {
            if let redis {
                redisAddress = redis
            } else {
                (redisProcess, redisAddress) = try Self.startRedis(in: out)
            }
            for index in 1...serverCount {
                var options = serverOptions
                options.log = { [index] in serverLog.append($0); trace("server \(index)", $0, since: began) }
                let host = try SyncHost(serverDataDirectory: "\(out)/server-\(index)", listen: SocketAddress(host: "127.0.0.1", port: 0),
                                        loop: loop, options: options)
                var redisOptions = RedisBoardLog.Options(node: "demo-server-\(index)")
                redisOptions.log = { [index] in serverLog.append($0); trace("server \(index) redis", $0, since: began) }
                let cluster = RedisCluster(address: redisAddress!, options: redisOptions, loop: loop)
                cluster.attach(to: host)
                servers.append(host)
                clusters.append(cluster)
            }
        } else {
            servers.append(try SyncHost(serverDataDirectory: out + "/server", listen: SocketAddress(host: "127.0.0.1", port: 0),
                                        loop: loop, options: serverOptions))
        }
        let addresses = servers.map { $0.listenAddress! }
        let address = addresses[0]
        if let redisAddress {
            say("BoardSync demo: three peers, one board, \(serverCount) sync servers (\(addresses.map(\.description).joined(separator: ", "))) sharing Redis at \(redisAddress)\(redisProcess != nil ? " (started for the demo)" : "")")
        } else {
            say("BoardSync demo: three peers, one board, an embedded sync server on \(address)")
        }
        say("writing packages to \(out)")

        let names = ["alice", "bob", "carol"]
        let colors: [(UInt8, UInt8, UInt8)] = [(220, 40, 60), (40, 120, 220), (40, 170, 80)]
        var rng = SeededRandom(seed: 2026)
        var peers: [SyncHost] = []
        var packages: [BoardPackage] = []
        for name in names {
            let package = try BoardPackage.create(at: "\(out)/\(name).boardpkg", fileSystem: PosixFileSystem(),
                                                  replicaID: ReplicaID(rng.next()))
            var options = SyncHost.Options()
            options.reconnectDelay = (0.05, 0.5)
            options.log = { [name] in trace(name, $0, since: began) }
            let host = try SyncHost(board: "demo", store: package, listen: nil, loop: loop, options: options)
            peers.append(host)
            packages.append(package)
        }
        // Presence: each peer shows its name, colour, pointer and the stroke it is drawing; what
        // each one saw of the others is reported at the end.
        var seen: [Set<String>] = Array(repeating: [], count: names.count)
        var presenceUpdates = 0
        var departures: [String] = []
        for (index, host) in peers.enumerated() {
            host.onPresence = { _, presence in
                if presence.isGone {
                    departures.append("\(names[index]) saw \(Self.name(of: presence.replica, packages, names)) leave")
                } else {
                    seen[index].insert(presence.name)
                    presenceUpdates += 1
                }
            }
        }
        func show(_ index: Int, pointer: CodablePoint, stroke: [CodablePoint]? = nil) {
            let color = Color8(red: colors[index].0, green: colors[index].1, blue: colors[index].2, alpha: 255)
            peers[index].setPresence(Presence(
                replica: packages[index].replica.id, name: names[index], color: color, pointer: GridPoint(pointer),
                stroke: stroke.map { InkPreview(color: color, width: 48, points: $0.compactMap(GridPoint.init)) }, ttl: 2))
        }
        let images = colors.map { color in
            Data(PNGEncoder.solid(width: 32, height: 32, red: color.0, green: color.1, blue: color.2))
        }

        var made = [0, 0, 0]
        var step = 0
        let offlineFrom = steps / 4
        let offlineUntil = (3 * steps) / 4
        var lastEdit = 0.0
        var failure: Error?
        var converged: Double?
        var troubleSince: Double?
        var dialed = false
        let start = EventLoop.now()

        func edit(_ index: Int) throws {
            let replica = packages[index].replica
            let stickers = replica.itemIDs.filter { replica.kind(of: $0) == .sticker && replica.isVisible($0) }
            var pen = CodablePoint(x: Double(Int.random(in: 50...1500, using: &rng)), y: Double(Int.random(in: 50...1100, using: &rng)))
            func walk() -> CodablePoint {
                pen.x += Double(Int.random(in: -24...24, using: &rng)) / 4
                pen.y += Double(Int.random(in: -24...24, using: &rng)) / 4
                return pen
            }
            let host = peers[index]
            show(index, pointer: pen)
            if step % 8 == index || stickers.isEmpty {
                made[index] += try host.edit { try $0.addSticker(imagePNG: images[index], at: walk(), scale: 1.5) }.operations.count
            } else if step % 3 == 0 {
                let sticker = rng.pick(stickers)
                made[index] += try host.edit { replica in
                    replica.beginUndoGroup()
                    defer { replica.endUndoGroup() }
                    var ops: [Op] = []
                    for _ in 0..<4 { ops += try replica.move(sticker, to: walk()).operations }
                    return LocalEdit(operations: ops)
                }.operations.count
            } else {
                let color = RGBAColor(red: Double(colors[index].0) / 255, green: Double(colors[index].1) / 255, blue: Double(colors[index].2) / 255)
                var ink = (0..<4).map { _ in walk() }
                show(index, pointer: pen, stroke: ink)
                made[index] += try host.edit { try $0.beginStroke(color: color, width: 3, points: ink) }.operations.count
                for _ in 0..<2 {
                    let more = (0..<4).map { _ in walk() }
                    ink += more
                    show(index, pointer: pen, stroke: ink)
                    made[index] += try host.edit { try $0.appendPoints(more) }.operations.count
                }
                made[index] += try host.edit { replica in replica.finishStroke(); return LocalEdit() }.operations.count
            }
        }

        func isConverged() -> Bool {
            let vector = packages[0].replica.versionVector
            for server in servers {
                guard let hub = server.boards["demo"]?.hub, hub.store.replica.versionVector == vector,
                      hub.store.replica.missingAssets.isEmpty, server.isQuiet("demo") else { return false }
            }
            return packages.allSatisfy { $0.replica.versionVector == vector && $0.replica.missingAssets.isEmpty }
                && peers.allSatisfy { $0.isQuiet("demo") }
                && clusters.allSatisfy { $0.boardLog.unconfirmedAppends == 0 }
        }

        func tick() {
            do {
                if step == 0, !clusters.allSatisfy({ $0.isConnected && $0.boardLog.storageTrouble == nil }) {
                    // Servers reach Redis first (a few milliseconds on loopback; the demo's own
                    // redis-server may take a moment to listen). One that names its trouble
                    // for 3 s (a --redis nobody serves) ends the demo with that reason.
                    if let trouble = clusters.lazy.compactMap(\.boardLog.storageTrouble).first {
                        troubleSince = troubleSince ?? EventLoop.now()
                        if EventLoop.now() - troubleSince! > (redisProcess == nil ? 3 : 10) {
                            failure = Failure("the demo's servers cannot use Redis: \(trouble)"
                                              + (redisProcess == nil ? " (is redis-server running there? Leave out --redis and the demo starts its own)" : ""))
                            loop.stop()
                            return
                        }
                    } else {
                        troubleSince = nil
                    }
                    if EventLoop.now() - start > 10 {
                        failure = Failure("the demo's servers could not reach Redis at \(redisAddress!) within 10 s")
                        loop.stop()
                        return
                    }
                    loop.schedule(after: 0.02) { tick() }
                    return
                }
                if step == 0, !dialed {
                    // The servers can serve: the peers dial (before, they would be told to retry later).
                    for (index, host) in peers.enumerated() { host.connect(to: addresses[index % addresses.count]) }
                    dialed = true
                }
                if step < steps {
                    if step == offlineFrom { peers[2].setOffline(true); say("  step \(step): carol goes offline (keeps editing)") }
                    if step == offlineFrom + 2 {
                        say("  step \(step): alice sees on the board: \(peers[0].presences().map(\.name).joined(separator: ", "))")
                    }
                    if step == offlineUntil { peers[2].setOffline(false); say("  step \(step): carol comes back online") }
                    for index in peers.indices { try edit(index) }
                    step += 1
                    lastEdit = EventLoop.now()
                    if step == steps { say("  step \(step): editing done; waiting for convergence") }
                } else if isConverged() {
                    converged = EventLoop.now()
                    loop.stop()
                    return
                }
                if EventLoop.now() - start > 60 {
                    var state = "the peers did not converge within 60 s:"
                    for (index, package) in packages.enumerated() {
                        state += "\n  \(names[index]): \(package.replica.versionVector) missing \(package.replica.missingAssets.count) quiet \(peers[index].isQuiet("demo")) links \(peers[index].connectionCount)"
                    }
                    for (index, server) in servers.enumerated() {
                        if let hub = server.boards["demo"]?.hub {
                            state += "\n  server \(index + 1): \(hub.store.replica.versionVector) missing \(hub.store.replica.missingAssets.count) sessions \(hub.sessionCount)"
                        }
                    }
                    let notes = serverLog.filter { $0.contains("refused") || $0.contains("skipped") || $0.contains("Redis") }
                    if !notes.isEmpty { state += "\n  server log: " + notes.suffix(8).joined(separator: "\n    ") }
                    failure = Failure(state)
                    loop.stop()
                    return
                }
                loop.schedule(after: 0.02) { tick() }
            } catch {
                failure = error
                loop.stop()
            }
        }
        loop.schedule(after: 0.1) { tick() }
        loop.run()
        if let failure { throw failure }

        var wireBytes = 0
        for host in peers { wireBytes += host.sessionBytes.sent + host.sessionBytes.received }
        for host in peers { host.onPresence = nil }  // leaving at the end is not news
        for host in peers { host.shutdown() }
        for server in servers { server.shutdown() }
        loop.schedule(after: 0.05) { loop.stop() }
        loop.run()
        for cluster in clusters { cluster.stop() }

        let snapshots = try packages.map { try $0.replica.snapshot().canonicalJSON() }
        let serverSnapshots = try servers.map { try $0.boards["demo"]!.package!.replica.snapshot().canonicalJSON() }
        let identical = snapshots.allSatisfy { $0 == snapshots[0] } && serverSnapshots.allSatisfy { $0 == snapshots[0] }
        let serverPackages = servers.count == 1 ? ["\(out)/server/demo.boardpkg"] : (1...servers.count).map { "\(out)/server-\($0)/demo.boardpkg" }
        let board = packages[0].replica.snapshot()
        for package in packages { try package.save(); package.close() }
        // A picture of the converged board, so a new user sees the result.
        let picture = out + "/board.png"
        let pictureReport = try BoardWriter(configuration: WriteConfiguration(contentType: .png, fileSystem: PosixFileSystem()))
            .write(content: board, to: picture, previous: nil)
        let convergeMS = Int(((converged ?? lastEdit) - lastEdit) * 1000)
        let totalOps = packages[0].replica.versionVector.totalCount
        if json {
            try printJSON([
                "folder": out, "server": address.description, "servers": addresses.map(\.description),
                "redis": redisAddress?.description ?? NSNull(), "operations": totalOps,
                "operationsByPeer": Dictionary(uniqueKeysWithValues: zip(names, made)),
                "bytesOnWire": wireBytes / 2, "millisecondsToConvergeAfterLastEdit": convergeMS,
                "identical": identical, "strokes": board.strokes.count, "stickers": board.stickers.count,
                "packages": names.map { "\(out)/\($0).boardpkg" } + serverPackages,
                "picture": picture, "pictureWarnings": pictureReport.warnings,
                "presenceSeen": Dictionary(uniqueKeysWithValues: zip(names, seen.map { $0.sorted() })),
                "presenceUpdates": presenceUpdates, "presenceDepartures": departures,
            ])
        } else {
            say("")
            for (index, name) in names.enumerated() {
                say("  \(name.padding(toLength: 6, withPad: " ", startingAt: 0)) made \(made[index]) operations\(index == 2 ? " (offline for steps \(offlineFrom)-\(offlineUntil))" : "")")
            }
            say("  presence: " + names.indices.map { "\(names[$0]) saw \(seen[$0].sorted().joined(separator: " and "))" }.joined(separator: "; ")
                + " (\(presenceUpdates) cursor and ink updates)")
            var said = Set<String>()
            let left = departures.filter { said.insert($0).inserted }
            if !left.isEmpty { say("  departures seen: " + left.joined(separator: ", ")) }
            if servers.count > 1 {
                say("  " + names.indices.map { "\(names[$0]) on server \($0 % servers.count + 1)" }.joined(separator: ", ")
                    + "; the servers shared every edit and presence through Redis")
            }
            say("  converged: \(identical ? "yes, all three peers and \(servers.count == 1 ? "the server" : "all \(servers.count) servers") hold byte-identical boards" : "NO")")
            say("  board: \(board.strokes.count) strokes, \(board.stickers.count) stickers, \(totalOps) operations")
            say("  bytes on the wire: \(wireBytes / 2) (each byte counted once)")
            say("  time to converge after the last edit: \(convergeMS) ms")
            say("  packages:")
            for name in names { say("    \(out)/\(name).boardpkg") }
            for package in serverPackages { say("    \(package)") }
            say("  picture of the board: \(picture)")
            say("  look inside: bin/board-sync show \(out)/alice.boardpkg")
            say("  export it yourself: bin/board-sync export \(out)/alice.boardpkg board.pdf")
            say("  open it in a browser: bin/board-sync serve --data \(servers.count == 1 ? "\(out)/server" : "\(out)/server-1") --web 127.0.0.1:7421, then http://127.0.0.1:7421/b/demo")
        }
        if !identical { throw Failure("the replicas differ after converging") }
    }

    /// Starts Debian's `redis-server` for the demo on a free loopback port, its files in the
    /// demo's folder (appendonly, appendfsync always: what docs/SCALE-OUT.md asks for).
    static func startRedis(in out: String) throws -> (Process, SocketAddress) {
        guard let binary = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first(where: FileManager.default.isExecutableFile) else {
            throw Failure("--servers needs Redis: give --redis HOST:PORT, or install redis-server (apt-get install redis-server) for the demo to start its own")
        }
        let listener = try TCPListener(address: SocketAddress(host: "127.0.0.1", port: 0), on: try EventLoop())
        let port = listener.address.port
        listener.close()
        let directory = out + "/redis"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--port", String(port), "--bind", "127.0.0.1", "--dir", directory, "--save", "",
                             "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no"]
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        return (process, SocketAddress(host: "127.0.0.1", port: port))
    }
}
