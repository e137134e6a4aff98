import BoardClient
import BoardClientTesting
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
        let began = EventLoop.now()
        // One embedded server, or (--servers N) several sharing one Redis: its own redis-server
        // on a free port unless --redis names one. They run on an event loop thread of their
        // own; the peers are three `LiveBoard`s, the library's client, as an app would embed it.
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
        }
        let hosts = try DemoServers(count: serverCount, out: out, redis: redisAddress, trace: { trace($0, $1, since: began) })
        defer { hosts.stop() }
        let addresses = hosts.addresses
        if let redisAddress {
            say("BoardSync demo: three peers, one board, \(serverCount) sync servers (\(addresses.map(\.description).joined(separator: ", "))) sharing Redis at \(redisAddress)\(redisProcess != nil ? " (started for the demo)" : "")")
        } else {
            say("BoardSync demo: three peers, one board, an embedded sync server on \(addresses[0])")
        }
        say("writing packages to \(out)")
        let redisStarted = redisProcess != nil
        let outcome = ClientCommands.blocking { [self] () -> Result<Summary, any Error> in
            do { return .success(try await edit(on: hosts, redisStarted: redisStarted, began: began)) } catch { return .failure(error) }
        }
        let summary = try outcome.get()
        hosts.stop()
        try report(summary, addresses: addresses, redisAddress: redisAddress)
    }

    /// What the peers did and saw.
    struct Summary: Sendable {
        var made: [Int]
        var boards: [BoardSnapshot]
        var serverBoards: [BoardSnapshot]
        var totalOperations: UInt64
        var wireBytes: Int
        var convergeMS: Int
        var seen: [[String]]
        var presenceUpdates: Int
        var departures: [String]
        var offline: ClosedRange<Int>
    }

    static let names = ["alice", "bob", "carol"]
    static let colors: [(UInt8, UInt8, UInt8)] = [(220, 40, 60), (40, 120, 220), (40, 170, 80)]

    /// The session: three live boards drawing and dragging at once, carol offline for the middle
    /// half (her link cut, her edits kept), then every replica converged.
    private func edit(on hosts: DemoServers, redisStarted: Bool, began: Double) async throws -> Summary {
        try await hosts.waitForStorage(redisStarted: redisStarted)
        let names = Self.names, colors = Self.colors
        var rng = SeededRandom(seed: 2026)
        // Carol's network: partitioned for the middle half (her connects fail, her open
        // connection is cut; her board keeps its edits and retries, as it would on a train).
        let carolsLink = FaultTransport(wrapping: TCPTransport(), seed: 0)
        var peers: [LiveBoard] = []
        for (index, name) in names.enumerated() {
            var sync = LiveBoard.Sync(server: hosts.addresses[index % hosts.addresses.count].description, board: "demo")
            sync.firstDelay = 0.05
            sync.maximumDelay = 0.5
            let color = Color8(red: colors[index].0, green: colors[index].1, blue: colors[index].2, alpha: 255)
            peers.append(try LiveBoard.open(storage: .package(path: "\(out)/\(name).boardpkg"), sync: sync,
                                            identity: LiveBoard.Identity(replicaID: ReplicaID(rng.next()), name: name, color: color),
                                            transport: index == 2 ? carolsLink : TCPTransport()))
        }
        let runs = peers.map { peer in Task { try await peer.run() } }
        let watch = PresenceWatch()
        let watchers = peers.enumerated().map { index, peer in
            Task { await watch.follow(peer, as: names[index], isCut: { index == 2 && carolsLink.isPartitioned }) }
        }
        for (index, peer) in peers.enumerated() {
            let deadline = EventLoop.now() + 10
            while peer.currentStatus.state != .live {
                if EventLoop.now() > deadline { throw Failure("\(names[index]) could not go live on \(peer.sync!.server) within 10 s: \(peer.currentStatus.lastError ?? "no answer")") }
                try await Task.sleep(nanoseconds: 5_000_000)
            }
            trace(names[index], "live on \(peer.sync!.server)", since: began)
        }
        let images = colors.map { Data(PNGEncoder.solid(width: 32, height: 32, red: $0.0, green: $0.1, blue: $0.2)) }
        var made = [0, 0, 0]
        let offlineFrom = steps / 4, offlineUntil = (3 * steps) / 4
        for step in 0..<steps {
            if step == offlineFrom { carolsLink.partition(); say("  step \(step): carol goes offline (keeps editing)") }
            if step == offlineFrom + 2 {
                say("  step \(step): alice sees on the board: \(peers[0].currentPeers.map(\.name).joined(separator: ", "))")
            }
            if step == offlineUntil { carolsLink.heal(); say("  step \(step): carol comes back online") }
            for index in peers.indices {
                made[index] += try await Self.edit(peers[index], index: index, step: step, image: images[index], rng: &rng)
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        say("  step \(steps): editing done; waiting for convergence")
        trace("demo", "editing done", since: began)
        let lastEdit = EventLoop.now()
        var converged: Double?
        while converged == nil {
            var vectors: [VersionVector] = []
            var complete = true
            for peer in peers {
                let replica = await peer.replica
                vectors.append(replica.versionVector)
                complete = complete && replica.missingAssets.isEmpty && peer.currentStatus.isLive && peer.currentStatus.isAllAcknowledged
            }
            if complete, vectors.allSatisfy({ $0 == vectors[0] }), await hosts.hold(vectors[0]) {
                converged = EventLoop.now()
                break
            }
            if EventLoop.now() - lastEdit > 60 {
                var state = "the peers did not converge within 60 s:"
                for (index, peer) in peers.enumerated() {
                    state += "\n  \(names[index]): \(vectors[index]) status \(peer.currentStatus.state) \(peer.currentStatus.lastError ?? "")"
                }
                state += await hosts.describe()
                throw Failure(state)
            }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        let convergeMS = Int((converged! - lastEdit) * 1000)
        trace("demo", "converged", since: began)
        await watch.stop()  // leaving at the end is not news
        var wireBytes = 0
        for peer in peers { let traffic = await peer.traffic; wireBytes += traffic.sent + traffic.received }
        for peer in peers {
            let closing = await peer.close(within: 5)
            if !closing.allAcknowledged { throw Failure("a peer closed with \(closing.unacknowledgedOperations) operations unacknowledged") }
        }
        for run in runs { _ = try? await run.value }
        trace("demo", "closed", since: began)
        for watcher in watchers { await watcher.value }
        var boards: [BoardSnapshot] = []
        for peer in peers { boards.append(await peer.replica.snapshot()) }
        let serverBoards = await hosts.shutdownAndSnapshot()
        trace("demo", "servers stopped", since: began)
        let (seen, updates, departures) = await watch.results(names)
        return Summary(made: made, boards: boards, serverBoards: serverBoards, totalOperations: await peers[0].replica.versionVector.totalCount,
                       wireBytes: wireBytes, convergeMS: convergeMS, seen: seen, presenceUpdates: updates, departures: departures,
                       offline: offlineFrom...offlineUntil)
    }

    /// One peer's editing step: a sticker now and then, a drag of a sticker (one undo step), or
    /// a stroke drawn in three parts with the ink in progress shown to the others. Returns the
    /// operations it made.
    private static func edit(_ peer: LiveBoard, index: Int, step: Int, image: Data, rng: inout SeededRandom) async throws -> Int {
        let replica = await peer.replica
        let stickers = replica.itemIDs.filter { replica.kind(of: $0) == .sticker && replica.isVisible($0) }
        var pen = CodablePoint(x: Double(Int.random(in: 50...1500, using: &rng)), y: Double(Int.random(in: 50...1100, using: &rng)))
        func walk() -> CodablePoint {
            pen.x += Double(Int.random(in: -24...24, using: &rng)) / 4
            pen.y += Double(Int.random(in: -24...24, using: &rng)) / 4
            return pen
        }
        let color = colors[index]
        let ink = Color8(red: color.0, green: color.1, blue: color.2, alpha: 255)
        await peer.updatePresence(pointer: GridPoint(pen))
        var made = 0
        if step % 8 == index || stickers.isEmpty {
            let at = walk()
            made += try await peer.edit { try $0.addSticker(imagePNG: image, at: at, scale: 1.5) }.operations.count
        } else if step % 3 == 0 {
            let sticker = rng.pick(stickers)
            let path = (0..<4).map { _ in walk() }
            made += try await peer.undoGroup { peer in
                var count = 0
                for point in path { count += try peer.edit { try $0.move(sticker, to: point) }.operations.count }
                return count
            }
        } else {
            let rgba = RGBAColor(red: Double(color.0) / 255, green: Double(color.1) / 255, blue: Double(color.2) / 255)
            var points = (0..<4).map { _ in walk() }
            func preview() -> InkPreview { InkPreview(color: ink, width: 48, points: points.compactMap(GridPoint.init)) }
            await peer.updatePresence(pointer: GridPoint(pen), stroke: preview())
            let first = points
            made += try await peer.edit { try $0.beginStroke(color: rgba, width: 3, points: first) }.operations.count
            for _ in 0..<2 {
                let more = (0..<4).map { _ in walk() }
                points += more
                await peer.updatePresence(pointer: GridPoint(pen), stroke: preview())
                made += try await peer.edit { try $0.appendPoints(more) }.operations.count
            }
            made += try await peer.edit { replica in replica.finishStroke(); return LocalEdit() }.operations.count
        }
        return made
    }

    private func report(_ summary: Summary, addresses: [SocketAddress], redisAddress: SocketAddress?) throws {
        let names = Self.names
        let canonical = try summary.boards.map { try $0.canonicalJSON() }
        let identical = try canonical.allSatisfy { $0 == canonical[0] } && summary.serverBoards.allSatisfy { try $0.canonicalJSON() == canonical[0] }
        let servers = addresses.count
        let serverPackages = servers == 1 ? ["\(out)/server/demo.boardpkg"] : (1...servers).map { "\(out)/server-\($0)/demo.boardpkg" }
        let board = summary.boards[0]
        // A picture of the converged board, so a new user sees the result.
        let picture = out + "/board.png"
        let pictureReport = try BoardWriter(configuration: WriteConfiguration(contentType: .png, fileSystem: PosixFileSystem()))
            .write(content: board, to: picture, previous: nil)
        if json {
            try printJSON([
                "folder": out, "server": addresses[0].description, "servers": addresses.map(\.description),
                "redis": redisAddress?.description ?? NSNull(), "operations": summary.totalOperations,
                "operationsByPeer": Dictionary(uniqueKeysWithValues: zip(names, summary.made)),
                "bytesOnWire": summary.wireBytes / 2, "millisecondsToConvergeAfterLastEdit": summary.convergeMS,
                "identical": identical, "strokes": board.strokes.count, "stickers": board.stickers.count,
                "packages": names.map { "\(out)/\($0).boardpkg" } + serverPackages,
                "picture": picture, "pictureWarnings": pictureReport.warnings,
                "presenceSeen": Dictionary(uniqueKeysWithValues: zip(names, summary.seen)),
                "presenceUpdates": summary.presenceUpdates, "presenceDepartures": summary.departures,
            ])
        } else {
            say("")
            for (index, name) in names.enumerated() {
                say("  \(name.padding(toLength: 6, withPad: " ", startingAt: 0)) made \(summary.made[index]) operations\(index == 2 ? " (offline for steps \(summary.offline.lowerBound)-\(summary.offline.upperBound))" : "")")
            }
            say("  presence: " + names.indices.map { "\(names[$0]) saw \(summary.seen[$0].joined(separator: " and "))" }.joined(separator: "; ")
                + " (\(summary.presenceUpdates) cursor and ink updates)")
            var said = Set<String>()
            let left = summary.departures.filter { said.insert($0).inserted }
            if !left.isEmpty { say("  departures seen: " + left.joined(separator: ", ")) }
            if servers > 1 {
                say("  " + names.indices.map { "\(names[$0]) on server \($0 % servers + 1)" }.joined(separator: ", ")
                    + "; the servers shared every edit and presence through Redis")
            }
            say("  converged: \(identical ? "yes, all three peers and \(servers == 1 ? "the server" : "all \(servers) servers") hold byte-identical boards" : "NO")")
            say("  board: \(board.strokes.count) strokes, \(board.stickers.count) stickers, \(summary.totalOperations) operations")
            say("  bytes on the wire: \(summary.wireBytes / 2) (each byte counted once)")
            say("  time to converge after the last edit: \(summary.convergeMS) ms")
            say("  packages:")
            for name in names { say("    \(out)/\(name).boardpkg") }
            for package in serverPackages { say("    \(package)") }
            say("  picture of the board: \(picture)")
            say("  look inside: bin/board-sync show \(out)/alice.boardpkg")
            say("  export it yourself: bin/board-sync export \(out)/alice.boardpkg board.pdf")
            say("  open it in a browser: bin/board-sync serve --data \(servers == 1 ? "\(out)/server" : "\(out)/server-1") --web 127.0.0.1:7421, then http://127.0.0.1:7421/b/demo")
            say("  the peers are LiveBoards (docs/CLIENT.md): Sources/board-sync/Demo.swift is an app's code")
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
