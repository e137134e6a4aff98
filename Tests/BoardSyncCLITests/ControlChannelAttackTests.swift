import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A raw connection to a peer's control socket, as a broken or hostile client makes one.
final class RawControl {
    let fd: Int32

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw CLI.Failure("connect \(path): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(fd) }

    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// A frame as the peer reads them: `BSC1`, a big-endian length, the payload.
    static func frame(_ payload: [UInt8], length: Int? = nil) -> [UInt8] {
        let count = UInt32(length ?? payload.count)
        return Array("BSC1".utf8) + [UInt8(count >> 24), UInt8(count >> 16 & 255), UInt8(count >> 8 & 255), UInt8(count & 255)] + payload
    }

    /// What arrives until the peer closes the connection (or `seconds` pass): the answer's
    /// outcome and message, and whether the connection was closed.
    func answer(within seconds: Double) -> (outcome: String?, message: String, closed: Bool) {
        var data = Data()
        let deadline = Date().addingTimeInterval(seconds)
        var closed = false
        while Date() < deadline {
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 100) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { closed = true; break }
            data.append(contentsOf: buffer[0..<count])
        }
        guard data.count > 8,
              let object = try? JSONSerialization.jsonObject(with: data.dropFirst(8)) as? [String: Any] else { return (nil, "", closed) }
        return (object["outcome"] as? String, object["message"] as? String ?? "", closed)
    }
}

/// The control channel under attack: clients that send nothing, trickle, send absurd sizes or
/// garbage, or come in crowds hold only themselves; the peer keeps syncing and serving others.
@Suite(.serialized) struct ControlChannelAttackTests {
    @Test func brokenAndHostileClientsHoldOnlyThemselves() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        for name in ["A", "C"] { try cli.run("new", "\(name).boardpkg") }
        let peer = try Daemon(["peer", "A.boardpkg", "--connect", address, "--board", "team"], in: workspace.path)
        #expect(peer.waitFor("live: in sync") != nil, "\(peer.log)")
        let socketPath = workspace.path + "/A.boardpkg/sync/control.sock"

        // One sends nothing, one trickles a byte now and then.
        let silent = try RawControl(socketPath)
        let trickle = try RawControl(socketPath)
        trickle.send(Array("BS".utf8))
        let started = Date()
        // Meanwhile others are served at once.
        let stroke = try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        #expect(stroke.status == 0, "\(stroke.stderr)")
        #expect(Date().timeIntervalSince(started) < 5, "not held up by the silent connections")
        trickle.send(Array("C".utf8))

        // Absurd size, garbage, malformed JSON, a command that does not go through a peer, a
        // request without the image it names: each a clear answer, the peer unharmed.
        let huge = try RawControl(socketPath)
        huge.send(RawControl.frame([], length: 1 << 30))
        let hugeAnswer = huge.answer(within: 5)
        #expect(hugeAnswer.outcome == "refused" && hugeAnswer.message.contains("over the limit of 25165824 bytes") && hugeAnswer.closed, "\(hugeAnswer)")
        let garbage = try RawControl(socketPath)
        garbage.send(Array("GET / HTTP/1.0\r\n\r\n".utf8))
        let garbageAnswer = garbage.answer(within: 5)
        #expect(garbageAnswer.outcome == "refused" && garbageAnswer.message.contains("not a board-sync control frame"), "\(garbageAnswer)")
        let notJSON = try RawControl(socketPath)
        notJSON.send(RawControl.frame(Array("{nope".utf8)))
        let notJSONAnswer = notJSON.answer(within: 5)
        #expect(notJSONAnswer.outcome == "refused" && notJSONAnswer.message.contains("malformed request"), "\(notJSONAnswer)")
        var package = stat()
        #expect(stat(workspace.path + "/A.boardpkg", &package) == 0)
        func request(_ command: String, _ arguments: [String]) throws -> [UInt8] {
            RawControl.frame(Array(try JSONSerialization.data(withJSONObject: [
                "command": command, "arguments": arguments, "directory": "/", "images": [String: String](),
                "package": ["device": UInt64(package.st_dev), "inode": UInt64(package.st_ino)]])))
        }
        let newPackage = try RawControl(socketPath)
        newPackage.send(try request("new", ["/tmp/evil.boardpkg"]))
        let newAnswer = newPackage.answer(within: 5)
        #expect(newAnswer.outcome == "refused" && newAnswer.message.contains("'new' does not run through a peer"), "\(newAnswer)")
        let noImage = try RawControl(socketPath)
        noImage.send(try request("sticker", ["A.boardpkg", "--image", "/etc/passwd", "--at", "1,1"]))
        let noImageAnswer = noImage.answer(within: 5)
        #expect(noImageAnswer.outcome == "failure" && noImageAnswer.message.contains("carries no bytes"), "the peer reads no path a request names: \(noImageAnswer)")

        // The silent and the trickling connection are cut at their deadline (10 s), with a reason.
        let silentAnswer = silent.answer(within: 15)
        #expect(silentAnswer.closed && silentAnswer.message.contains("longer than its deadline"), "\(silentAnswer)")
        let trickleAnswer = trickle.answer(within: 5)
        #expect(trickleAnswer.closed && trickleAnswer.message.contains("longer than its deadline"), "\(trickleAnswer)")
        #expect(Date().timeIntervalSince(started) < 14, "cut at the deadline, not at each byte's")

        // A crowd: beyond 8 connections a command is answered "busy" and fails clearly.
        let crowd = try (0..<8).map { _ in try RawControl(socketPath) }
        usleep(200_000)
        let busy = try cli.run("show", "A.boardpkg")
        #expect(busy.status == 1 && busy.stderr.contains("busy with 8 other commands"), "\(busy.stderr)")
        withExtendedLifetime(crowd) {}
        _ = consume crowd
        #expect(ControlChannelCLITests.eventually(within: 5) { (try? cli.run("show", "A.boardpkg"))?.status == 0 }, "served again once the crowd left")

        // The peer kept syncing: a stroke made now reaches another replica through the server.
        #expect(try cli.run("stroke", "A.boardpkg", "--points", "3,3 4,4").status == 0)
        #expect(ControlChannelCLITests.eventually {
            _ = try? cli.run("sync", "C.boardpkg", "--server", address, "--board", "team")
            return (try? workspace.board("C.boardpkg"))?.strokes.count == 2
        }, "\(peer.log)")
        #expect(peer.terminate() == 0, "\(peer.log)")
        #expect(server.terminate() == 0)
    }
}

/// A package prepared by someone else: its `sync/control.sock` a symbolic link to the socket of
/// this user's running peer on another board. A command on that package must not run on the
/// peer's board (found by review: `show`, `export` and `stroke` did).
@Suite(.serialized) struct ControlChannelPlantedSocketTests {
    @Test func aSocketLinkedFromAnotherPackageRunsNothingThere() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        for name in ["secret", "evil"] { try cli.run("new", "\(name).boardpkg") }
        try cli.run("stroke", "secret.boardpkg", "--points", "1,1 2,2")
        let peer = try Daemon(["peer", "secret.boardpkg", "--connect", ControlChannelLifeTests.nowhere, "--board", "secret"], in: workspace.path)
        let secretSocket = workspace.path + "/secret.boardpkg/sync/control.sock"
        #expect(ControlChannelCLITests.eventually(within: 10) { FileManager.default.fileExists(atPath: secretSocket) }, "\(peer.log)")
        // evil is held (a lock holder) and its socket leads to secret's peer.
        let fd = open(workspace.path + "/evil.boardpkg/sync/lock", O_RDWR)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX) == 0)
        #expect(symlink(secretSocket, workspace.path + "/evil.boardpkg/sync/control.sock") == 0)

        let show = try cli.run("show", "evil.boardpkg")
        #expect(show.status == 1 && show.stderr.contains("is not a socket of this user's"), "\(show.stdout) \(show.stderr)")
        #expect(!show.stdout.contains("strokes"), "nothing of secret's board shown: \(show.stdout)")
        let stroke = try cli.run("stroke", "evil.boardpkg", "--points", "5,5 6,6")
        #expect(stroke.status == 1, "\(stroke.stderr)")
        let export = try cli.run("export", "evil.boardpkg", "leak.svg")
        #expect(export.status == 1 && !FileManager.default.fileExists(atPath: workspace.path + "/leak.svg"), "\(export.stderr)")

        // The peer itself refuses a request naming another package (a client that skipped the
        // check above, or a link in a folder on the way): its own board is untouched.
        let raw = try RawControl(secretSocket)
        var info = stat()
        #expect(stat(workspace.path + "/evil.boardpkg", &info) == 0)
        let request: [String: Any] = ["command": "stroke", "arguments": ["evil.boardpkg", "--points", "7,7 8,8"], "directory": workspace.path,
                                      "images": [String: String](), "package": ["device": UInt64(info.st_dev), "inode": UInt64(info.st_ino)]]
        raw.send(RawControl.frame(Array(try JSONSerialization.data(withJSONObject: request))))
        let answer = raw.answer(within: 5)
        #expect(answer.outcome == "refused" && answer.message.contains("serves another package"), "\(answer)")
        #expect(peer.terminate() == 0, "\(peer.log)")
        _ = flock(fd, LOCK_UN)
        #expect(try workspace.board("secret.boardpkg").strokes.count == 1, "secret's board has only its own stroke")
        #expect(peer.log.contains("refused a request for another package"), "\(peer.log)")
    }

    /// A peer that stops after another took the package removes only its own socket.
    @Test func aStoppingPeerLeavesTheNextPeersSocket() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        let socket = workspace.path + "/A.boardpkg/sync/control.sock"
        let first = try Daemon(["peer", "A.boardpkg", "--connect", ControlChannelLifeTests.nowhere, "--board", "a"], in: workspace.path)
        #expect(ControlChannelCLITests.eventually(within: 10) { FileManager.default.fileExists(atPath: socket) }, "\(first.log)")
        // An idle control connection keeps the first peer's channel busy while it stops.
        let idle = try RawControl(socket)
        kill(first.process.processIdentifier, SIGTERM)
        // The next peer takes the package as soon as the first released it.
        var second: Daemon?
        #expect(ControlChannelCLITests.eventually(within: 15) {
            let candidate = try? Daemon(["peer", "A.boardpkg", "--connect", ControlChannelLifeTests.nowhere, "--board", "a"], in: workspace.path)
            guard let candidate, candidate.waitFor("control: other commands on this package run here", count: 1, within: 3) else {
                _ = candidate?.terminate()
                return false
            }
            second = candidate
            return true
        })
        withExtendedLifetime(idle) {}
        _ = first.terminate()
        #expect(FileManager.default.fileExists(atPath: socket), "the second peer's socket is still there")
        let show = try cli.run("show", "A.boardpkg")
        #expect(show.status == 0, "served by the second peer: \(show.stderr)")
        #expect(second?.terminate() == 0)
    }
}

/// The control channel's life: a socket a killed peer left, a package path longer than
/// `sun_path`, a command during the peer's shutdown, a mesh peer (which has no channel).
@Suite(.serialized) struct ControlChannelLifeTests {
    /// Nothing listens on port 1: the peer stays offline, so its edits stay unacknowledged.
    static let nowhere = "127.0.0.1:1"

    @Test func aKilledPeersSocketIsReplacedAndLongPathsWork() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let folder = String(repeating: "d", count: 70) + "/" + String(repeating: "e", count: 50)
        try FileManager.default.createDirectory(atPath: workspace.path + "/" + folder, withIntermediateDirectories: true)
        let package = folder + "/Long.boardpkg"
        #expect((package + "/sync/control.sock").utf8.count > 108, "longer than sun_path even relative")
        try cli.run("new", package)
        let first = try Daemon(["peer", package, "--connect", Self.nowhere, "--board", "long"], in: workspace.path)
        #expect(first.waitFor("control: other commands") != nil, "\(first.log)")
        #expect(try cli.run("stroke", package, "--points", "1,1 2,2").status == 0)
        #expect(first.waitFor("control: stroke: done") != nil, "\(first.log)")
        kill(first.process.processIdentifier, SIGKILL)
        first.process.waitUntilExit()
        #expect(FileManager.default.fileExists(atPath: workspace.path + "/" + package + "/sync/control.sock"), "a killed peer leaves its socket")
        // Nobody holds the package: the command runs here, the stale socket untouched.
        let here = try cli.run("stroke", package, "--points", "3,3 4,4")
        #expect(here.status == 0, "\(here.stderr)")
        let second = try Daemon(["peer", package, "--connect", Self.nowhere, "--board", "long"], in: workspace.path)
        #expect(second.waitFor("control: replaced") != nil, "\(second.log)")
        let through = try cli.run("stroke", package, "--points", "5,5 6,6")
        #expect(through.status == 0, "\(through.stderr)")
        #expect(second.waitFor("control: stroke: done") != nil, "\(second.log)")
        #expect(try workspace.board(package).strokes.count == 3)
        #expect(second.terminate() == 0, "\(second.log)")
    }

    /// A command sent while the peer stops is not run by the peer: the command waits for the
    /// package and runs itself, and succeeds.
    @Test func aCommandDuringShutdownRunsOnceThePeerHasStopped() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        let peer = try Daemon(["peer", "A.boardpkg", "--connect", Self.nowhere, "--board", "team"], in: workspace.path)
        #expect(peer.waitFor("control: other commands") != nil, "\(peer.log)")
        #expect(try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2").status == 0)
        // Offline with an unacknowledged edit, the peer waits 5 s for the server as it stops.
        kill(peer.process.processIdentifier, SIGTERM)
        #expect(peer.waitFor("signal SIGTERM") != nil, "\(peer.log)")
        let during = try cli.run("stroke", "A.boardpkg", "--points", "3,3 4,4")
        #expect(during.status == 0, "\(during.stderr)")
        #expect(peer.terminate() == 0, "\(peer.log)")
        #expect(peer.log.components(separatedBy: "control: stroke: done").count == 2, "the stopping peer ran only the first: \(peer.log)")
        #expect(try workspace.board("A.boardpkg").strokes.count == 2)
    }

    /// Through the peer, `undo` takes back the package's latest edit even when a command made it
    /// before the peer started; the peer's undo history is the package's after it stops.
    @Test func undoThroughAPeerSharesThePackagesHistory() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        #expect(try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2").status == 0)
        let peer = try Daemon(["peer", "A.boardpkg", "--connect", Self.nowhere, "--board", "team"], in: workspace.path)
        #expect(peer.waitFor("control: other commands") != nil, "\(peer.log)")
        #expect(try cli.run("undo", "A.boardpkg").status == 0)
        #expect(peer.waitFor("control: undo: done") != nil, "\(peer.log)")
        #expect(try workspace.board("A.boardpkg").strokes.isEmpty)
        #expect(peer.terminate() == 0, "\(peer.log)")
        let redo = try cli.run("redo", "A.boardpkg", "--json")
        #expect(redo.status == 0 && redo.stdout.contains("\"operations\" : 1"), "redone here, after the peer: \(redo.stdout) \(redo.stderr)")
        #expect(try workspace.board("A.boardpkg").strokes.count == 1)
    }

    /// A package held briefly (another command) is waited for, up to 1 s; held longer by a
    /// process without a control socket, the command fails saying so.
    @Test func aBriefHolderIsWaitedForALongOneNamed() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        let fd = open(workspace.path + "/A.boardpkg/sync/lock", O_RDWR)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX) == 0)
        // A thread of its own (the dispatch pool can be starved by other suites' waits).
        let released = DispatchSemaphore(value: 0)
        Thread {
            usleep(400_000)
            _ = flock(fd, LOCK_UN)
            released.signal()
        }.start()
        let brief = try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        #expect(brief.status == 0, "\(brief.stderr)")
        released.wait()
        #expect(flock(fd, LOCK_EX) == 0)
        let started = Date()
        let held = try cli.run("stroke", "A.boardpkg", "--points", "3,3 4,4")
        #expect(held.status == 1 && held.stderr.contains("open in another process") && held.stderr.contains("no peer answers"), "\(held.stderr)")
        #expect(Date().timeIntervalSince(started) >= 0.9, "it tried for 1 s")
        _ = flock(fd, LOCK_UN)
        #expect(try workspace.board("A.boardpkg").strokes.count == 1)
    }

    /// A mesh peer serves the channel too: an edit through one mesh peer reaches the other,
    /// `undo` takes it back, reads and exports work; `serve` has no channel and says so.
    @Test func aMeshPeerServesCommandsToo() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        for name in ["M", "N", "S"] { try cli.run("new", "\(name).boardpkg") }
        let hub = try Daemon(["peer", "M.boardpkg", "--listen", "127.0.0.1:0", "--board", "mesh"], in: workspace.path)
        let address = try #require(hub.listeningAddress(), "\(hub.log)")
        #expect(hub.waitFor("control: other commands") != nil, "\(hub.log)")
        // Two --connect: a mesh peer as well (the second address has nothing on it).
        let spoke = try Daemon(["peer", "N.boardpkg", "--connect", address, "--connect", Self.nowhere, "--board", "mesh"], in: workspace.path)
        #expect(spoke.waitFor("control: other commands") != nil, "\(spoke.log)")
        let stroke = try cli.run("stroke", "M.boardpkg", "--points", "1,1 2,2")
        #expect(stroke.status == 0, "\(stroke.stderr)")
        #expect(hub.waitFor("control: stroke: done") != nil, "\(hub.log)")
        #expect(ControlChannelCLITests.eventually { (try? workspace.board("N.boardpkg"))?.strokes.count == 1 }, "\(spoke.log)")
        #expect(try cli.run("undo", "M.boardpkg").status == 0)
        #expect(ControlChannelCLITests.eventually { (try? workspace.board("N.boardpkg"))?.strokes.isEmpty == true }, "\(spoke.log)")
        let export = try cli.run("export", "N.boardpkg", "n.svg")
        #expect(export.status == 0 && FileManager.default.fileExists(atPath: workspace.path + "/n.svg"), "\(export.stderr)")
        #expect(spoke.terminate() == 0, "\(spoke.log)")
        #expect(hub.terminate() == 0, "\(hub.log)")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/M.boardpkg/sync/control.sock"), "removed on exit")

        // A server holding a package takes no commands: the command says so.
        let server = try Daemon(["serve", "--data", ".", "--listen", "127.0.0.1:0"], in: workspace.path)
        let serverAddress = try #require(server.listeningAddress(), "\(server.log)")
        #expect(try cli.run("sync", "S.boardpkg", "--server", serverAddress, "--board", "held").status == 0)
        let refused = try cli.run("stroke", "held.boardpkg", "--points", "1,1 2,2")
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("open in another process") && refused.stderr.contains("`serve`, `sync` and the other commands do not"), "\(refused.stderr)")
        #expect(server.terminate() == 0)
    }
}

/// Who may connect: another user cannot reach the socket (mode 0600), and when its mode is
/// loosened the peer still refuses them (`SO_PEERCRED`). Needs root, to be another user.
@Suite(.serialized) struct ControlChannelUserTests {
    static let canSwitchUser = geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")

    /// Runs a connect-send-read as user `nobody`; returns what it printed.
    static func asNobody(_ socketPath: String) throws -> String {
        let script = """
        import socket, struct, json, sys
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(sys.argv[1])
        except OSError as e:
            print("connect failed:", e.strerror); sys.exit(0)
        body = json.dumps({"command": "show", "arguments": ["A.boardpkg"], "directory": "/", "images": {}}).encode()
        try:
            s.sendall(b"BSC1" + struct.pack(">I", len(body)) + body)
        except OSError:
            pass  # refused before reading: the answer is already here
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk: break
            data += chunk
        print(json.loads(data[8:]))
        """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script, socketPath]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    @Test(.enabled(if: canSwitchUser, "needs root, setpriv and /usr/bin/python3 to connect as another user"))
    func anotherUserIsRefused() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        // Directories anyone may enter: only the socket's mode and the peer's check stand in the way.
        for directory in [workspace.path, workspace.path + "/A.boardpkg", workspace.path + "/A.boardpkg/sync"] {
            #expect(chmod(directory, 0o755) == 0)
        }
        let peer = try Daemon(["peer", "A.boardpkg", "--connect", ControlChannelLifeTests.nowhere, "--board", "team"], in: workspace.path)
        #expect(peer.waitFor("control: other commands") != nil, "\(peer.log)")
        let socketPath = workspace.path + "/A.boardpkg/sync/control.sock"
        let denied = try Self.asNobody(socketPath)
        #expect(denied.contains("connect failed: Permission denied"), "mode 0600 keeps others out: \(denied)")
        #expect(chmod(socketPath, 0o666) == 0)
        let refused = try Self.asNobody(socketPath)
        #expect(refused.contains("'outcome': 'refused'") && refused.contains("only from its own user"), "\(refused)")
        #expect(peer.waitFor("refused a connection from another user (uid 65534)") != nil, "\(peer.log)")
        #expect(peer.terminate() == 0, "\(peer.log)")
    }
}
