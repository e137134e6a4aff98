import BoardModel
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A long-running board-sync process (serve or peer) whose log we read for its address.
final class Daemon {
    let process = Process()
    private let errors = Pipe()
    private(set) var log = ""

    /// `environment` is added to this process's.
    init(_ arguments: [String], in directory: String, environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: CLI.binary)
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    /// Reads the log until a line contains `marker` (or 10 s pass); returns that line.
    func waitFor(_ marker: String) -> String? {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let line = log.split(separator: "\n").first(where: { $0.contains(marker) }) { return String(line) }
            readSome()
        }
        return nil
    }

    /// Reads the log until `marker` occurs `count` times (or `seconds` pass).
    func waitFor(_ marker: String, count: Int, within seconds: Double = 15) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        func seen() -> Bool { log.components(separatedBy: marker).count - 1 >= count }
        while Date() < deadline, !seen() { readSome() }
        return seen()
    }

    /// Appends what the process wrote, waiting at most 0.1 s for something.
    private func readSome() {
        // `availableData` blocks until the process writes: a silent one would hang the test
        // past its deadline, so it is read only once poll says there is something.
        var ready = pollfd(fd: errors.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, 100) > 0 else { return }
        let data = errors.fileHandleForReading.availableData
        if data.isEmpty { usleep(20_000) } else { log += String(decoding: data, as: UTF8.self) }
    }

    /// The HOST:PORT after "listening on ".
    func listeningAddress() -> String? {
        guard let line = waitFor("listening on ") else { return nil }
        return line.components(separatedBy: "listening on ").last?.split(separator: " ").first.map(String.init)
    }

    /// SIGTERM, then the exit status.
    func terminate() -> Int32 {
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        log += String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    }
}

@Suite(.serialized) struct NetCLITests {
    @Test func serveAndSyncTwoOfflineReplicas() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        try cli.run("new", "A.boardpkg")
        try cli.run("new", "B.boardpkg")
        try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "10,10")
        try cli.run("stroke", "B.boardpkg", "--points", "1,1 4,4 9,2")
        for package in ["A.boardpkg", "B.boardpkg", "A.boardpkg"] {
            let result = try cli.run("sync", package, "--server", address, "--board", "team")
            #expect(result.status == 0, "\(package): \(result.stderr)")
            #expect(result.stdout.contains("synced \(package)"))
        }
        let a = try cli.run("show", "A.boardpkg", "--json").stdout
        let b = try cli.run("show", "B.boardpkg", "--json").stdout
        #expect(a == b, "byte-identical boards")
        let stickerID = try #require(try workspace.board("B.boardpkg").stickers.first?.id)
        #expect(FileManager.default.fileExists(atPath: workspace.path + "/B.boardpkg/stickers/\(stickerID.uuidString).png"), "the image came along")
        // JSON for scripts.
        let json = try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team", "--json")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(report["operationsReceived"] as? Int == 0)
        // Bad board names are refused before connecting.
        let evil = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "../x")
        #expect(evil.status == 64)
        // SIGTERM: stop accepting, save, exit 0; the log says what happened.
        #expect(server.terminate() == 0)
        #expect(server.log.contains("board 'team': created"))
        #expect(server.log.contains("stopped"))
        #expect(FileManager.default.fileExists(atPath: workspace.path + "/data/team.boardpkg/manifest.json"))
        // With no server, sync fails clearly with exit 1.
        let unreachable = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--timeout", "5")
        #expect(unreachable.status == 1)
        #expect(unreachable.stderr.contains("cannot reach the server"))
    }

    @Test func peersRelaySoTheEndsOfAChainConverge() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        for name in ["A", "B", "C"] { try cli.run("new", "\(name).boardpkg") }
        try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "5,5")
        try cli.run("stroke", "C.boardpkg", "--points", "0,0 3,3")
        let a = try Daemon(["peer", "A.boardpkg", "--listen", "127.0.0.1:0", "--board", "chain"], in: workspace.path)
        let aAddress = try #require(a.listeningAddress(), "\(a.log)")
        let b = try Daemon(["peer", "B.boardpkg", "--listen", "127.0.0.1:0", "--connect", aAddress, "--board", "chain"], in: workspace.path)
        let bAddress = try #require(b.listeningAddress(), "\(b.log)")
        #expect(b.waitFor("connected to") != nil, "\(b.log)")
        // C meets only B; B relays to A.
        let sync = try cli.run("sync", "C.boardpkg", "--server", bAddress, "--board", "chain")
        #expect(sync.status == 0, "\(sync.stderr)")
        usleep(1_000_000)  // B relays to A as soon as it merges; leave time on a loaded machine
        #expect(a.terminate() == 0)
        #expect(b.terminate() == 0)
        let boards = try ["A", "B", "C"].map { try cli.run("show", "\($0).boardpkg", "--json").stdout }
        #expect(boards[0] == boards[2], "A and C hold the same board without ever meeting")
        #expect(boards[1] == boards[2])
        #expect(try workspace.board("A.boardpkg").strokes.count == 1)
    }

    @Test func aPeerKilledWithSIGKILLAndRestartedConvergesWithNothingLost() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        // A 1.4 MB image, so the transfer takes many chunks.
        let pixels = (0..<(600 * 600 * 4)).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 11) }
        try Data(PNGEncoder.encode(width: 600, height: 600, rgba: pixels)).write(to: URL(fileURLWithPath: workspace.path + "/big.png"))
        for name in ["A", "B"] { try cli.run("new", "\(name).boardpkg") }
        try cli.run("sticker", "A.boardpkg", "--image", "big.png", "--at", "300,300")
        try cli.run("stroke", "B.boardpkg", "--points", "1,1 2,2")
        let a = try Daemon(["peer", "A.boardpkg", "--listen", "127.0.0.1:0", "--board", "k"], in: workspace.path)
        let address = try #require(a.listeningAddress(), "\(a.log)")
        let first = try Daemon(["peer", "B.boardpkg", "--connect", address, "--board", "k"], in: workspace.path)
        _ = first.waitFor("connected to")
        kill(first.process.processIdentifier, SIGKILL)
        first.process.waitUntilExit()
        // Restarted, B finishes the transfer; a clean stop saves its view.
        let second = try Daemon(["peer", "B.boardpkg", "--connect", address, "--board", "k"], in: workspace.path)
        _ = second.waitFor("connected to")
        usleep(3_000_000)  // the transfer finishes well within this even in a debug build
        #expect(second.terminate() == 0)
        #expect(a.terminate() == 0)
        let boards = try ["A", "B"].map { try cli.run("show", "\($0).boardpkg", "--json").stdout }
        #expect(boards[0] == boards[1], "A: \(boards[0].prefix(200)) B: \(boards[1].prefix(200))")
        let sticker = try #require(try workspace.board("B.boardpkg").stickers.first)
        let file = workspace.path + "/B.boardpkg/stickers/\(sticker.id.uuidString).png"
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == Data(contentsOf: URL(fileURLWithPath: workspace.path + "/big.png")))
    }

    @Test func theDemoConvergesAndWritesPackages() throws {
        let workspace = try Workspace()
        let result = try workspace.cli.run("demo", "--out", "demo-out", "--steps", "12", "--json")
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(summary["identical"] as? Bool == true)
        #expect((summary["operations"] as? Int ?? 0) > 30)
        #expect((summary["bytesOnWire"] as? Int ?? 0) > 0)
        let packages = try #require(summary["packages"] as? [String])
        #expect(packages.count == 4)
        let shown = try packages.map { try workspace.cli.run("show", $0, "--json").stdout }
        #expect(Set(shown).count == 1, "every package, the server's included, holds the same board")
        // A picture of the converged board, the size of its canvas.
        let picture = try #require(summary["picture"] as? String)
        let png = try [UInt8](Data(contentsOf: URL(fileURLWithPath: workspace.path).appendingPathComponent(picture)))
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]))
        let board = try workspace.board(packages[0])
        #expect(Int(png[16...19].reduce(0) { $0 << 8 | UInt32($1) }) == Int(board.canvasSize.width))
        // Presence: each peer saw the other two; carol's going offline was seen as her leaving.
        let seen = try #require(summary["presenceSeen"] as? [String: [String]])
        #expect(seen == ["alice": ["bob", "carol"], "bob": ["alice", "carol"], "carol": ["alice", "bob"]])
        let departures = try #require(summary["presenceDepartures"] as? [String])
        #expect(departures.contains("alice saw carol leave") && departures.contains("bob saw carol leave"), "\(departures)")
        #expect(try workspace.cli.run("demo", "--out", "demo-out").status == 1, "refuses a non-empty folder")
    }

    /// Two `peer` processes: each logs the other's arrival under its --name, and its departure
    /// when the other stops.
    @Test func peersLogWhoJoinsAndLeavesTheBoard() throws {
        let workspace = try Workspace()
        for name in ["A", "B"] { try workspace.cli.run("new", "\(name).boardpkg") }
        let a = try Daemon(["peer", "A.boardpkg", "--listen", "127.0.0.1:0", "--board", "room", "--name", "Ana", "--color", "#cc2244"], in: workspace.path)
        let address = try #require(a.listeningAddress(), "\(a.log)")
        let b = try Daemon(["peer", "B.boardpkg", "--connect", address, "--board", "room", "--name", "Bo"], in: workspace.path)
        #expect(a.waitFor("presence: Bo") != nil, "\(a.log)")
        #expect(b.waitFor("presence: Ana") != nil, "\(b.log)")
        #expect(b.terminate() == 0)
        #expect(a.waitFor("presence: Bo") != nil && a.waitFor("left; on the board: nobody else") != nil, "\(a.log)")
        #expect(a.terminate() == 0)
        #expect(try workspace.cli.run("peer", "A.boardpkg", "--connect", address, "--color", "red").status == 64)
    }
}

/// `serve --web`: the web view starts beside the sync port and serves the board list and pages.
@Suite struct WebCLITests {
    /// A GET over a plain socket: the status line and the body.
    static func get(_ address: String, _ target: String) -> (status: String, body: String) {
        guard let fd = dialLoopback(address) else { return ("no connection", "") }
        defer { close(fd) }
        let request = Array("GET \(target) HTTP/1.1\r\nHost: \(address)\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let received = readToEnd(fd)
        let text = String(decoding: received, as: UTF8.self)
        let head = text.components(separatedBy: "\r\n\r\n").first ?? ""
        return (head.components(separatedBy: "\r\n").first ?? "", text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n"))
    }

    @Test func serveWebShowsTheBoards() throws {
        let workspace = try Workspace()
        try workspace.cli.run("new", "Plan.boardpkg")
        try workspace.cli.run("sticker", "Plan.boardpkg", "--image", "red.png", "--at", "5,5")
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--web", "127.0.0.1:0"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "\(server.log)")
        let sync = try workspace.cli.run("sync", "Plan.boardpkg", "--server", address, "--board", "plan")
        #expect(sync.status == 0, "\(sync.stderr)")
        let line = try #require(server.waitFor("web view at http://"), "\(server.log)")
        let web = try #require(line.components(separatedBy: "http://").last?.split(separator: "/").first.map(String.init))
        // Without a secret the view mints a token for its run and prints the URL carrying it.
        let token = try #require(line.components(separatedBy: "?token=").last?.split(separator: " ").first.map(String.init))
        #expect(token.count >= 20, "\(line)")
        #expect(Self.get(web, "/").status == "HTTP/1.1 401 Unauthorized", "no token, no boards")
        #expect(Self.get(web, "/b/plan").status == "HTTP/1.1 401 Unauthorized")
        let index = Self.get(web, "/?token=\(token)")
        #expect(index.status == "HTTP/1.1 200 OK" && index.body.contains("/b/plan?token=\(token)"), "\(index)")
        let page = Self.get(web, "/b/plan?token=\(token)")
        #expect(page.status == "HTTP/1.1 200 OK" && page.body.contains("<svg"))
        #expect(Self.get(web, "/b/other?token=\(token)").status == "HTTP/1.1 404 Not Found")
        #expect(server.terminate() == 0)
        #expect(try workspace.cli.run("serve", "--data", "data", "--web", "nonsense").status == 64)
    }
}
