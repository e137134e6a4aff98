import BoardModel
import BoardRedis
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real `redis-server` (Debian's, installed by `.ci/run`) on a free loopback port in the
/// test's workspace, with `appendonly yes` and `appendfsync always` as docs/SCALE-OUT.md asks.
final class RedisProcess {
    static var binary: String? {
        ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first(where: FileManager.default.isExecutableFile)
    }

    let port: Int
    let directory: String
    private(set) var process: Process

    let extra: [String]

    init(in directory: String, port: Int? = nil, extra: [String] = []) throws {
        self.directory = directory
        self.port = port ?? RedisProcess.freePort()
        self.extra = extra
        process = Process()
        try start()
    }

    private func start() throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: RedisProcess.binary!)
        process.arguments = ["--port", String(port), "--bind", "127.0.0.1", "--dir", directory, "--save", "",
                             "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no"] + extra
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Ready once it accepts connections.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let reply = RedisProcess.command(port, ["PING"]), reply.hasPrefix("+PONG") || reply.hasPrefix("-NOAUTH") { return }
            usleep(20_000)
        }
        throw CLI.Failure("redis-server did not start on port \(port)")
    }

    var address: String { "127.0.0.1:\(port)" }

    /// kill -9, then (optionally) a restart on the same port and directory: its append-only
    /// file brings back every write it acknowledged.
    func crash() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    func restart() throws { try start() }

    /// Sends one command with a plain socket and returns the raw reply (for checks).
    @discardableResult
    static func command(_ port: Int, _ parts: [String]) -> String? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return nil }
        var request = "*\(parts.count)\r\n"
        for part in parts { request += "$\(part.utf8.count)\r\n\(part)\r\n" }
        let bytes = Array(request.utf8)
        guard send(fd, bytes, bytes.count, 0) == bytes.count else { return nil }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }

    static func ping(_ port: Int) -> Bool { command(port, ["PING"])?.hasPrefix("+PONG") == true }

    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    }
}

/// Several `serve --redis` processes sharing one real Redis (docs/SCALE-OUT.md). Skipped,
/// loudly, where no `redis-server` binary exists.
@Suite(.serialized) struct RedisClusterTests {
    static func skipped() -> Bool {
        guard RedisProcess.binary != nil else {
            print("RedisClusterTests: SKIPPED the scale-out tests: no redis-server (apt-get install redis-server; .ci/run does)")
            return true
        }
        return false
    }

    /// A workspace, a Redis in it, and servers "one" and "two" sharing it.
    static func twoServers() throws -> (Workspace, RedisProcess, (Daemon, String), (Daemon, String)) {
        let workspace = try Workspace()
        let redis = try RedisProcess(in: workspace.path)
        return (workspace, redis, try server(workspace, "one", redis: redis, node: "one"), try server(workspace, "two", redis: redis, node: "two"))
    }

    static func server(_ workspace: Workspace, _ data: String, redis: RedisProcess, node: String) throws -> (Daemon, String) {
        let daemon = try Daemon(["serve", "--data", data, "--listen", "127.0.0.1:0", "--redis", redis.address, "--node-id", node],
                                in: workspace.path)
        let address = try #require(daemon.listeningAddress(), "\(daemon.log)")
        #expect(daemon.waitFor("Redis tail link connected") != nil, "\(daemon.log)")
        return (daemon, address)
    }

    /// Live peers on two servers see each other's edits through Redis; one-shot syncs against
    /// either server get everything; the stream holds each edit once.
    @Test func twoServersShareBoardsThroughRedis() throws {
        if Self.skipped() { return }
        let (workspace, redis, (one, addressOne), (two, addressTwo)) = try Self.twoServers()
        let cli = workspace.cli
        for name in ["A", "B", "C"] { try cli.run("new", "\(name).boardpkg") }
        try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "10,10")
        try cli.run("stroke", "B.boardpkg", "--points", "1,1 4,4 9,2")
        let stickerID = try #require(try workspace.board("A.boardpkg").stickers.first?.id)
        func image(_ package: String) -> Data? {
            FileManager.default.contents(atPath: workspace.path + "/\(package)/stickers/\(stickerID.uuidString).png")
        }
        let red = try #require(image("A.boardpkg"))
        // A live peer on each server; each sees the other's presence (through Redis pub/sub).
        let peerA = try Daemon(["peer", "A.boardpkg", "--connect", addressOne, "--board", "team", "--name", "Ana"], in: workspace.path)
        let peerB = try Daemon(["peer", "B.boardpkg", "--connect", addressTwo, "--board", "team", "--name", "Bo"], in: workspace.path)
        #expect(peerA.waitFor("connected to") != nil && peerB.waitFor("connected to") != nil)
        #expect(peerA.waitFor("presence: Bo") != nil, "\(peerA.log)")
        #expect(peerB.waitFor("presence: Ana") != nil, "\(peerB.log)")
        // C syncs once through server two, then draws and syncs through server one.
        // (Server two fetches the image from Redis once it learns of the sticker: a sync may end
        // before it arrives and say so; the next one brings it.)
        var converged = false
        for _ in 0..<100 {
            let sync = try cli.run("sync", "C.boardpkg", "--server", addressTwo, "--board", "team")
            #expect(sync.status == 0, "\(sync.stderr)")
            let board = try workspace.board("C.boardpkg")
            if image("C.boardpkg") == red && board.strokes.count == 1 { converged = true; break }
            usleep(100_000)
        }
        let shown = try cli.run("show", "C.boardpkg").stdout
        #expect(converged, "C sees A's sticker with its image (server one) and B's stroke (server two): \(shown)")
        try cli.run("stroke", "C.boardpkg", "--points", "20,20 30,30")
        #expect(try cli.run("sync", "C.boardpkg", "--server", addressOne, "--board", "team").status == 0)
        // Both live peers get C's stroke. Bo leaves: Ana, on the other server, hears so.
        usleep(1_000_000)
        #expect(peerB.terminate() == 0)
        #expect(peerA.waitFor("left; on the board: nobody else") != nil, "\(peerA.log)")
        #expect(peerA.terminate() == 0)
        let boards = try ["A", "B", "C"].map { try cli.run("show", "\($0).boardpkg", "--json").stdout }
        #expect(boards[0] == boards[2] && boards[1] == boards[2], "all three replicas hold the same board")
        #expect(try workspace.board("A.boardpkg").strokes.count == 2)
        // Each edit is in the stream once (A's sticker, B's stroke, C's stroke).
        let length = RedisProcess.command(redis.port, ["XLEN", "bs:{team}:log"])
        #expect(length == ":3\r\n", "stream length: \(length ?? "no reply")")
        #expect(RedisProcess.command(redis.port, ["KEYS", "bs:asset:*"])?.contains("bs:asset:") == true)
        #expect(one.terminate() == 0 && two.terminate() == 0)
        #expect(one.log.contains("caught up from Redis"), "\(one.log)")
    }

    /// Authorship is one fact per board for every server: alice's replica id, bound through
    /// server one at her first edit, is refused to mallory on server two (which had never seen
    /// alice), and alice keeps editing through server two. The binding is in Redis, not in
    /// either server's `sync/authors`.
    @Test func aReplicaBoundThroughOneServerIsRefusedToAnotherSubjectOnTheOther() throws {
        if Self.skipped() { return }
        let workspace = try Workspace()
        let cli = workspace.cli
        let redis = try RedisProcess(in: workspace.path)
        func start(_ data: String) throws -> (Daemon, String) {
            let daemon = try Daemon(["serve", "--data", data, "--listen", "127.0.0.1:0", "--redis", redis.address, "--node-id", data,
                                     "--secret-file", "secret"], in: workspace.path)
            let address = try #require(daemon.listeningAddress(), "\(daemon.log)")
            #expect(daemon.waitFor("Redis tail link connected") != nil, "\(daemon.log)")
            return (daemon, address)
        }
        let (one, addressOne) = try start("one")
        let (two, addressTwo) = try start("two")
        func token(_ subject: String, _ role: String = "write") throws -> String {
            try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", role, "--subject", subject).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let alice = try token("alice"), mallory = try token("mallory"), reader = try token("rob", "read")
        // Alice edits through server one: her replica id is bound to her there.
        try cli.run("new", "A.boardpkg")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 4,4")
        let first = try cli.run("sync", "A.boardpkg", "--server", addressOne, "--board", "team", "--token", alice)
        #expect(first.status == 0, "\(first.stderr)")
        // Mallory's package edits under alice's replica id (ids are public), through server two.
        let identityPath = workspace.path + "/A.boardpkg/sync/replica.json"
        let identity = try #require(try JSONSerialization.jsonObject(with: try Data(contentsOf: URL(fileURLWithPath: identityPath))) as? [String: Any])
        let aliceID = try #require(identity["replicaID"] as? String)
        try cli.run("new", "M.boardpkg")
        let forgedPath = workspace.path + "/M.boardpkg/sync/replica.json"
        var forged = try #require(try JSONSerialization.jsonObject(with: try Data(contentsOf: URL(fileURLWithPath: forgedPath))) as? [String: Any])
        forged["replicaID"] = aliceID
        try JSONSerialization.data(withJSONObject: forged).write(to: URL(fileURLWithPath: forgedPath))
        for index in 0..<3 { try cli.run("stroke", "M.boardpkg", "--points", "\(50 + index),50 60,60") }
        let stolen = try cli.run("sync", "M.boardpkg", "--server", addressTwo, "--board", "team", "--token", mallory, "--timeout", "10")
        #expect(stolen.status == 1, "\(stolen.stdout) \(stolen.stderr)")
        #expect(stolen.stderr.contains("not the author") && stolen.stderr.contains("belongs to another subject"), "\(stolen.stderr)")
        #expect(!stolen.stderr.contains(workspace.path), "no server path in a client's error: \(stolen.stderr)")
        // Alice is still welcome on server two, and her edit reaches server one's clients.
        try cli.run("stroke", "A.boardpkg", "--points", "2,2 8,8")
        let second = try cli.run("sync", "A.boardpkg", "--server", addressTwo, "--board", "team", "--token", alice, "--timeout", "10")
        #expect(second.status == 0, "\(second.stderr)")
        try cli.run("new", "R.boardpkg")
        var strokes = 0
        for _ in 0..<50 {
            #expect(try cli.run("sync", "R.boardpkg", "--server", addressOne, "--board", "team", "--token", reader).status == 0)
            strokes = try workspace.board("R.boardpkg").strokes.count
            if strokes == 2 { break }
            usleep(100_000)
        }
        #expect(strokes == 2, "alice's two strokes, none of mallory's")
        // One binding, in Redis; neither server keeps one of its own.
        let hex = String(try #require(UInt64(aliceID, radix: 16)), radix: 16)
        #expect(RedisProcess.command(redis.port, ["HGET", "bs:{team}:authors", hex]) == "$5\r\nalice\r\n")
        #expect(RedisProcess.command(redis.port, ["HLEN", "bs:{team}:authors"]) == ":1\r\n")
        for data in ["one", "two"] {
            #expect(!FileManager.default.fileExists(atPath: workspace.path + "/\(data)/team.boardpkg/sync/authors"))
        }
        #expect(one.terminate() == 0 && two.terminate() == 0)
        #expect(two.log.contains("tried to author as replica"), "\(two.log)")
    }

    /// Redis is killed with -9 and restarted: while it is down the servers acknowledge nothing
    /// (a one-shot sync cannot finish), then they carry on, and nothing acknowledged is lost.
    @Test func redisCrashAndRestartLosesNothingAcknowledged() throws {
        if Self.skipped() { return }
        let (workspace, redis, (one, addressOne), (two, addressTwo)) = try Self.twoServers()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        try cli.run("new", "B.boardpkg")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        #expect(try cli.run("sync", "A.boardpkg", "--server", addressOne, "--board", "team").status == 0)
        redis.crash()
        // Redis down: the edit cannot be acknowledged, so a one-shot sync gives up.
        try cli.run("stroke", "A.boardpkg", "--points", "5,5 6,6")
        let down = try cli.run("sync", "A.boardpkg", "--server", addressOne, "--board", "team", "--timeout", "3")
        #expect(down.status == 1, "no acknowledgement while Redis is down: \(down.stdout) \(down.stderr)")
        try redis.restart()
        // Back (the server says so once it has reconnected; until then it turns new syncs away
        // with `storage unavailable`): it sends its waiting append again and acknowledges.
        #expect(one.waitFor("storage available again") != nil, "\(one.log)")
        let again = try cli.run("sync", "A.boardpkg", "--server", addressOne, "--board", "team", "--timeout", "20")
        #expect(again.status == 0, "\(again.stderr)")
        // Server two (whose tail read died with Redis) reconnects and serves both strokes.
        var strokes = 0
        for _ in 0..<100 {
            #expect(try cli.run("sync", "B.boardpkg", "--server", addressTwo, "--board", "team", "--timeout", "20").status == 0)
            strokes = try workspace.board("B.boardpkg").strokes.count
            if strokes == 2 { break }
            usleep(100_000)
        }
        #expect(strokes == 2, "both acknowledged strokes survived Redis's crash: \(two.log)")
        #expect(one.terminate() == 0 && two.terminate() == 0)
        #expect(one.log.contains("link lost"), "\(one.log)")
    }

    /// A server killed with -9 under a client: the client moves to the other server and
    /// nothing it was told is saved is lost; a new server with an empty cache catches up.
    @Test func aClientMovesToAnotherServerAfterItsServerIsKilled() throws {
        if Self.skipped() { return }
        let (workspace, redis, (one, addressOne), (two, addressTwo)) = try Self.twoServers()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        for index in 0..<5 {
            try cli.run("stroke", "A.boardpkg", "--points", "\(index),0 \(index),9")
            #expect(try cli.run("sync", "A.boardpkg", "--server", addressOne, "--board", "team").status == 0)
        }
        kill(one.process.processIdentifier, SIGKILL)
        one.process.waitUntilExit()
        // A client that never spoke to server one gets every stroke it acknowledged: they can
        // only have come through Redis.
        try cli.run("new", "Fresh.boardpkg")
        #expect(try cli.run("sync", "Fresh.boardpkg", "--server", addressTwo, "--board", "team").status == 0)
        #expect(try workspace.board("Fresh.boardpkg").strokes.count == 5, "everything server one acknowledged survived it")
        try cli.run("stroke", "A.boardpkg", "--points", "50,0 50,9")
        #expect(try cli.run("sync", "A.boardpkg", "--server", addressTwo, "--board", "team").status == 0)
        // A third server with an empty cache catches up from the stream.
        let (three, addressThree) = try Self.server(workspace, "three", redis: redis, node: "three")
        try cli.run("new", "B.boardpkg")
        #expect(try cli.run("sync", "B.boardpkg", "--server", addressThree, "--board", "team").status == 0)
        #expect(try workspace.board("B.boardpkg").strokes.count == 6, "\(three.log)")
        #expect(try cli.run("show", "A.boardpkg", "--json").stdout == (try cli.run("show", "B.boardpkg", "--json").stdout))
        #expect(two.terminate() == 0 && three.terminate() == 0)
    }

    /// The compaction lease and the fenced commit, run by a real Redis: a compactor whose lease
    /// ran out (paused, say) cannot write its checkpoint over a newer one, a checkpoint never
    /// goes backwards, and the stream is trimmed only behind a written checkpoint.
    @Test func aStaleCompactorIsFencedOff() throws {
        if Self.skipped() { return }
        let workspace = try Workspace()
        let redis = try RedisProcess(in: workspace.path)
        let port = redis.port
        for ms in 1...12 { RedisProcess.command(port, ["XADD", "bs:{b}:log", "\(ms)-0", "o", "x"]) }
        func acquire(_ node: String, leaseMs: Int) -> String? {
            RedisProcess.command(port, ["EVAL", RedisBoardLog.acquireScript, "2", "bs:{b}:lease", "bs:{b}:epoch", node, String(leaseMs)])
        }
        func commit(_ node: String, epoch: String, id: String, state: String, minID: String) -> String? {
            RedisProcess.command(port, ["EVAL", RedisBoardLog.commitScript, "4", "bs:{b}:epoch", "bs:{b}:ckpt", "bs:{b}:log", "bs:{b}:lease",
                                        epoch, id, state, minID, node])
        }
        #expect(acquire("A", leaseMs: 200) == ":1\r\n", "A takes the lease: epoch 1")
        #expect(acquire("B", leaseMs: 200) == "$-1\r\n", "held: B gets nothing, and the epoch does not move")
        usleep(400_000)  // A stalls past its lease
        #expect(acquire("B", leaseMs: 5000) == ":2\r\n", "B takes the expired lease: epoch 2")
        #expect(commit("B", epoch: "2", id: "10-0", state: "B's state", minID: "5-0") == ":1\r\n")
        #expect(RedisProcess.command(port, ["XLEN", "bs:{b}:log"]) == ":8\r\n", "entries before 5-0 trimmed")
        #expect(RedisProcess.command(port, ["EXISTS", "bs:{b}:lease"]) == ":0\r\n", "B released its lease")
        // A wakes up and commits with its stale epoch: refused, nothing changed.
        let stale = commit("A", epoch: "1", id: "12-0", state: "A's state", minID: "11-0")
        #expect(stale?.hasPrefix("-FENCED") == true, "\(stale ?? "no reply")")
        #expect(RedisProcess.command(port, ["HGET", "bs:{b}:ckpt", "state"])?.contains("B's state") == true)
        #expect(RedisProcess.command(port, ["XLEN", "bs:{b}:log"]) == ":8\r\n")
        // Never backwards: the current epoch with an older stream id writes nothing.
        #expect(acquire("B", leaseMs: 5000) == ":3\r\n")
        #expect(commit("B", epoch: "3", id: "9-0", state: "older", minID: "8-0") == ":0\r\n")
        #expect(RedisProcess.command(port, ["HGET", "bs:{b}:ckpt", "id"]) == "$4\r\n10-0\r\n")
    }

    /// Servers checkpoint and trim as edits stream in (one of them paused with SIGSTOP past its
    /// lease meanwhile, then continued: it reloads from the checkpoint); a new server catches
    /// the board up from checkpoint plus stream, with every edit.
    @Test func checkpointsTrimTheStreamAndANewServerCatchesUpFromThem() throws {
        if Self.skipped() { return }
        let workspace = try Workspace()
        let cli = workspace.cli
        let redis = try RedisProcess(in: workspace.path)
        func start(_ data: String) throws -> (Daemon, String) {
            let daemon = try Daemon(["serve", "--data", data, "--listen", "127.0.0.1:0", "--redis", redis.address, "--node-id", data,
                                     "--checkpoint-every", "4", "--checkpoint-lease", "0.5", "--checkpoint-retention", "0.1"],
                                    in: workspace.path)
            let address = try #require(daemon.listeningAddress(), "\(daemon.log)")
            #expect(daemon.waitFor("Redis tail link connected") != nil, "\(daemon.log)")
            return (daemon, address)
        }
        let (one, addressOne) = try start("one")
        let (two, addressTwo) = try start("two")
        /// The checkpoint's stream id once it differs from `old` (polling Redis for up to 10 s).
        func checkpoint(after old: String?) -> String? {
            for _ in 0..<100 {
                let id = RedisProcess.command(redis.port, ["HGET", "bs:{team}:ckpt", "id"])
                if let id, id != "$-1\r\n", id != old { return id }
                usleep(100_000)
            }
            return nil
        }
        try cli.run("new", "A.boardpkg")
        #expect(try cli.run("sync", "A.boardpkg", "--server", addressOne, "--board", "team").status == 0)
        for index in 0..<8 {
            try cli.run("stroke", "A.boardpkg", "--points", "\(index),0 \(index),9")
            #expect(try cli.run("sync", "A.boardpkg", "--server", index % 2 == 0 ? addressOne : addressTwo, "--board", "team").status == 0)
            usleep(150_000)
        }
        let first = checkpoint(after: nil)
        #expect(first != nil, "a checkpoint was written")
        // Server one stalls past its lease while server two takes edits and checkpoints.
        kill(one.process.processIdentifier, SIGSTOP)
        for index in 8..<14 {
            try cli.run("stroke", "A.boardpkg", "--points", "\(index),0 \(index),9")
            #expect(try cli.run("sync", "A.boardpkg", "--server", addressTwo, "--board", "team").status == 0)
            usleep(150_000)
        }
        #expect(checkpoint(after: first) != nil, "server two wrote a newer checkpoint while server one was stopped")
        kill(one.process.processIdentifier, SIGCONT)
        usleep(300_000)
        let length = RedisProcess.command(redis.port, ["XLEN", "bs:{team}:log"]) ?? ""
        let entries = Int(length.dropFirst().prefix { $0.isNumber }) ?? 99
        #expect(entries < 14, "the stream was trimmed: \(length)")
        // Both old servers serve all 14 strokes; so does a new one with an empty cache.
        let (three, addressThree) = try start("three")
        for (index, address) in [addressOne, addressTwo, addressThree].enumerated() {
            try cli.run("new", "R\(index).boardpkg")
            var strokes = 0
            for _ in 0..<50 {
                #expect(try cli.run("sync", "R\(index).boardpkg", "--server", address, "--board", "team").status == 0)
                strokes = try workspace.board("R\(index).boardpkg").strokes.count
                if strokes == 14 { break }
                usleep(100_000)
            }
            #expect(strokes == 14, "server \(index + 1) serves every stroke")
        }
        #expect(one.terminate() == 0 && two.terminate() == 0 && three.terminate() == 0)
        #expect(three.log.contains("loaded the checkpoint"), "\(three.log)")
        #expect(one.log.contains("reloading from the checkpoint: the stream was trimmed past"),
                "server one noticed it had fallen behind a trim: \(one.log)")
    }

    /// `demo --servers 3`: its own redis-server, one peer per server, converged boards on every
    /// peer and server, presence seen across servers, and Redis stopped at the end.
    @Test func theDemoRunsOnThreeServersSharingRedis() throws {
        if Self.skipped() { return }
        let workspace = try Workspace()
        let result = try workspace.cli.run("demo", "--servers", "3", "--steps", "16", "--out", "out", "--json")
        #expect(result.status == 0, "\(result.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(report["identical"] as? Bool == true)
        #expect((report["servers"] as? [String])?.count == 3)
        #expect((report["packages"] as? [String])?.filter { $0.contains("/server-") }.count == 3)
        let seen = try #require(report["presenceSeen"] as? [String: [String]])
        #expect(seen["alice"] == ["bob", "carol"], "alice (server 1) saw the peers of servers 2 and 3: \(seen)")
        let redis = try #require(report["redis"] as? String)
        let port = try #require(Int(redis.split(separator: ":").last ?? ""))
        #expect(!RedisProcess.ping(port), "the demo's own Redis was stopped")
        #expect(try workspace.cli.run("demo", "--redis", "127.0.0.1:1").status == 64, "--redis needs --servers")
    }

    /// `board-load --servers 2 --kill-one-server`: clients editing on one board over two
    /// servers; server one is killed with -9 halfway, its clients move to server two, and every
    /// client converges with everything acknowledged.
    @Test func killingAServerUnderLoadLosesNothingAcknowledged() throws {
        if Self.skipped() { return }
        let workspace = try Workspace()
        var load = workspace.cli
        load.program = URL(fileURLWithPath: CLI.binary).deletingLastPathComponent().appendingPathComponent("board-load").path
        let result = try load.run("--clients", "6", "--boards", "1", "--rate", "300", "--seconds", "4", "--servers", "2",
                                  "--kill-one-server", "--json")
        #expect(result.status == 0, "\(result.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
        #expect(report["converged"] as? Bool == true && report["killedOneServer"] as? Bool == true)
        #expect((report["operationsMade"] as? Int ?? 0) > 500)
        #expect(result.stderr.contains("killed server 1"))
    }

    /// A 3 MB image crosses servers in 1 MiB chunks and arrives whole.
    @Test func aLargeImageCrossesServersInChunks() throws {
        if Self.skipped() { return }
        let (workspace, redis, (one, addressOne), (two, addressTwo)) = try Self.twoServers()
        let cli = workspace.cli
        let big = Data(PNGEncoder.solid(width: 1000, height: 1000, red: 10, green: 200, blue: 30))
        #expect(big.count > 2 << 20)
        try big.write(to: URL(fileURLWithPath: workspace.path + "/big.png"))
        try cli.run("new", "A.boardpkg")
        try cli.run("new", "B.boardpkg")
        try cli.run("sticker", "A.boardpkg", "--image", "big.png", "--at", "5,5")
        #expect(try cli.run("sync", "A.boardpkg", "--server", addressOne, "--board", "team").status == 0)
        let id = try #require(try workspace.board("A.boardpkg").stickers.first?.id)
        let path = "/stickers/\(id.uuidString).png"
        var arrived = false
        for _ in 0..<50 {
            #expect(try cli.run("sync", "B.boardpkg", "--server", addressTwo, "--board", "team").status == 0)
            if let bytes = FileManager.default.contents(atPath: workspace.path + "/B.boardpkg" + path),
               bytes == FileManager.default.contents(atPath: workspace.path + "/A.boardpkg" + path) {
                arrived = true
                break
            }
            usleep(100_000)
        }
        #expect(arrived, "the image arrived whole through server two")
        let keys = RedisProcess.command(redis.port, ["KEYS", "bs:asset:*"]) ?? ""
        #expect(keys.components(separatedBy: "bs:asset:").count - 1 >= 4, "a marker and at least three chunks: \(keys)")
        #expect(one.terminate() == 0 && two.terminate() == 0)
    }

    /// A Redis that requires a password: a server given it syncs; one without it says why in
    /// its log and acknowledges nothing.
    @Test func aRedisWithAPasswordNeedsIt() throws {
        if Self.skipped() { return }
        let workspace = try Workspace()
        let cli = workspace.cli
        let redis = try RedisProcess(in: workspace.path, extra: ["--requirepass", "s3cret"])
        try "s3cret\n".write(toFile: workspace.path + "/redis-password", atomically: true, encoding: .utf8)
        let good = try Daemon(["serve", "--data", "good", "--listen", "127.0.0.1:0", "--redis", redis.address,
                               "--redis-password-file", "redis-password"], in: workspace.path)
        let goodAddress = try #require(good.listeningAddress())
        let bad = try Daemon(["serve", "--data", "bad", "--listen", "127.0.0.1:0", "--redis", redis.address], in: workspace.path)
        let badAddress = try #require(bad.listeningAddress())
        try cli.run("new", "A.boardpkg")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        let synced = try cli.run("sync", "A.boardpkg", "--server", goodAddress, "--board", "team", "--timeout", "10")
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(RedisProcess.command(redis.port, ["AUTH", "s3cret"]) == "+OK\r\n")
        let refused = try cli.run("sync", "A.boardpkg", "--server", badAddress, "--board", "team", "--timeout", "3")
        #expect(refused.status == 1)
        #expect(good.terminate() == 0 && bad.terminate() == 0)
        #expect(bad.log.contains("NOAUTH"), "\(bad.log)")
        #expect(!good.log.contains("NOAUTH"), "\(good.log)")
    }

    /// `token revoke` beside one server's secret ends the revoked connections on every server
    /// sharing the Redis: here a peer on server two, revoked through server one's file.
    @Test func aRevocationBesideOneServersSecretReachesEveryServer() throws {
        if Self.skipped() { return }
        let workspace = try Workspace()
        let cli = workspace.cli
        let redis = try RedisProcess(in: workspace.path)
        func server(_ name: String, secret: String) throws -> (Daemon, String) {
            let daemon = try Daemon(["serve", "--data", name, "--listen", "127.0.0.1:0", "--redis", redis.address, "--node-id", name,
                                     "--secret-file", secret], in: workspace.path)
            let address = try #require(daemon.listeningAddress(), "\(daemon.log)")
            #expect(daemon.waitFor("Redis tail link connected") != nil, "\(daemon.log)")
            return (daemon, address)
        }
        let (one, _) = try server("one", secret: "secret-one")
        // The servers of a cluster share the secret; each holds its own copy (and revocation file).
        try FileManager.default.copyItem(atPath: workspace.path + "/secret-one", toPath: workspace.path + "/secret-two")
        chmod(workspace.path + "/secret-two", 0o600)
        let (two, addressTwo) = try server("two", secret: "secret-two")
        let token = try cli.run("token", "--secret-file", "secret-one", "--board", "team", "--role", "write", "--subject", "ann")
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try cli.run("new", "A.boardpkg")
        let peer = try Daemon(["peer", "A.boardpkg", "--connect", addressTwo, "--board", "team", "--token", token], in: workspace.path)
        #expect(peer.waitFor("connected to") != nil, "\(peer.log)")
        let revoked = try cli.run("token", "revoke", "--secret-file", "secret-one", "--subject", "ann")
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(peer.waitFor("access revoked") != nil, "server two closed the connection: \(peer.log)")
        #expect(peer.terminate() == 1, "a revoked peer stops with exit 1: \(peer.log)")
        let refused = try cli.run("sync", "A.boardpkg", "--server", addressTwo, "--board", "team", "--token", token, "--timeout", "10")
        #expect(refused.status == 1 && refused.stderr.contains("access denied"), "\(refused.stderr)")
        #expect(RedisProcess.command(redis.port, ["SMEMBERS", "bs:revocations"])?.contains("subject ann ") == true)
        #expect(one.terminate() == 0 && two.terminate() == 0)
        #expect(two.log.contains("shared through Redis"), "\(two.log)")
    }

    @Test func badRedisOptionsAreUsageErrors() throws {
        let workspace = try Workspace()
        let noRedis = try workspace.cli.run("serve", "--data", "d", "--node-id", "x")
        #expect(noRedis.status == 64 && noRedis.stderr.contains("--node-id needs --redis"))
        let badEvery = try workspace.cli.run("serve", "--data", "d", "--redis", "127.0.0.1:1", "--checkpoint-every", "-3")
        #expect(badEvery.status == 64 && badEvery.stderr.contains("--checkpoint-every"))
        let lease = try workspace.cli.run("serve", "--data", "d", "--redis", "127.0.0.1:1", "--checkpoint-lease", "0")
        #expect(lease.status == 64 && lease.stderr.contains("--checkpoint-lease must be between"))
        let servers = try workspace.cli.run("demo", "--servers", "9")
        #expect(servers.status == 64 && servers.stderr.contains("--servers"))
        let userOnly = try workspace.cli.run("serve", "--data", "d", "--redis", "127.0.0.1:1", "--redis-user", "bs")
        #expect(userOnly.status == 64 && userOnly.stderr.contains("--redis-password-file"))
        let noFile = try workspace.cli.run("serve", "--data", "d", "--redis", "127.0.0.1:1", "--redis-password-file", "missing")
        #expect(noFile.status == 1 && noFile.stderr.contains("cannot read a password"))
        let badAddress = try workspace.cli.run("serve", "--data", "d", "--redis", "nowhere")
        #expect(badAddress.status == 64, "\(badAddress.stderr)")
        #expect(try workspace.cli.run("serve", "--help").stdout.contains("--redis HOST:PORT"))
    }
}
