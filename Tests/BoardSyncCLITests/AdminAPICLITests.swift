import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One HTTP/1.0 request of any method over a plain socket: status and body.
func adminRequest(_ address: String, _ method: String, _ target: String, token: String? = nil, headers: String = "") -> (status: Int, body: String) {
    guard let fd = dialLoopback(address) else { return (0, "no connection") }
    defer { close(fd) }
    let auth = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
    let request = Array("\(method) \(target) HTTP/1.0\r\nHost: \(address)\r\n\(auth)\(headers)\r\n".utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    let received = readToEnd(fd)
    let text = String(decoding: received, as: UTF8.self)
    let head = text.components(separatedBy: "\r\n\r\n").first ?? ""
    let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
    return (status, text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n"))
}

/// The admin API (`board-sync admin ...`) against a real `serve` on loopback, as an operator
/// and as an attacker.
@Suite(.serialized) struct AdminAPICLITests {
    struct Server {
        let workspace: Workspace
        let daemon: Daemon
        let sync: String
        let admin: String
        let adminToken: String

        init(_ extra: [String] = []) throws {
            workspace = try Workspace()
            try writeSecret(workspace.path + "/secret")
            daemon = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--secret-file", "secret",
                                 "--admin", "127.0.0.1:0"] + extra, in: workspace.path)
            sync = try #require(daemon.syncAddress(), "\(daemon.log)")
            admin = try #require(daemon.adminAddress(), "\(daemon.log)")
            adminToken = try workspace.cli.run("token", "--secret-file", "secret", "--role", "admin").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            try (adminToken + "\n").write(toFile: workspace.path + "/admin.token", atomically: true, encoding: .utf8)
        }

        func token(_ board: String, _ role: String = "write", subject: String? = nil) throws -> String {
            try workspace.cli.run(["token", "--secret-file", "secret", "--board", board, "--role", role] + (subject.map { ["--subject", $0] } ?? []))
                .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func admin(_ arguments: String...) throws -> CLI.Result {
            try workspace.cli.run(["admin"] + arguments + ["--server", admin, "--token-file", "admin.token"])
        }

        func json(_ result: CLI.Result) throws -> [String: Any] {
            try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout) \(result.stderr)")
        }

        /// Syncs a new package with one stroke to `board`.
        func upload(_ board: String, package: String? = nil) throws {
            let path = package ?? "\(board).boardpkg"
            if !FileManager.default.fileExists(atPath: workspace.path + "/" + path) {
                try workspace.cli.run("new", path)
                try workspace.cli.run("stroke", path, "--points", "1,1 4,4 9,2")
            }
            // One subject per package: a replica id belongs to the subject that first used it.
            let result = try workspace.cli.run("sync", path, "--server", sync, "--board", board, "--token", try token(board, subject: "owner-" + board))
            #expect(result.status == 0, "\(result.stderr)")
        }
    }

    @Test func listAndInfoPageThroughBoardsWithCheapFields() throws {
        let server = try Server()
        for board in ["b-two", "a-one", "c-three"] { try server.upload(board) }
        let all = try server.json(try server.admin("list", "--json"))
        let boards = try #require(all["boards"] as? [[String: Any]])
        #expect(boards.compactMap { $0["name"] as? String } == ["a-one", "b-two", "c-three"])
        #expect(all["next"] is NSNull)
        for board in boards {
            #expect((board["bytesOnDisk"] as? Int ?? 0) > 0)
            #expect(board["operations"] as? Int ?? 0 >= 1, "\(board)")
            #expect(board["replicas"] as? Int == 1, "\(board)")
            #expect(board["clients"] as? Int == 0)
            #expect(board["lastEdit"] is String)
        }
        // Pages: a cursor is the previous page's `next`.
        let first = try server.json(try server.admin("list", "--limit", "2", "--json"))
        #expect((first["boards"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["a-one", "b-two"])
        #expect(first["next"] as? String == "b-two")
        let second = try server.json(try server.admin("list", "--limit", "2", "--after", "b-two", "--json"))
        #expect((second["boards"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["c-three"])
        #expect(second["next"] is NSNull)
        let followed = try server.json(try server.admin("list", "--limit", "1", "--all", "--json"))
        #expect((followed["boards"] as? [Any])?.count == 3)
        let text = try server.admin("list")
        #expect(text.status == 0 && text.stdout.contains("a-one") && text.stdout.contains("operations"), "\(text.stdout)")
        let info = try server.json(try server.admin("info", "b-two", "--json"))
        #expect(info["name"] as? String == "b-two")
        // Garbage cursors and limits are refused with what was wrong, never a 500 or a crash.
        for target in ["/boards?after=..", "/boards?after=%2e%2e%2fetc", "/boards?after=" + String(repeating: "x", count: 400),
                       "/boards?limit=0", "/boards?limit=1001", "/boards?limit=-1", "/boards?limit=abc", "/boards?cursor=x"] {
            let answer = adminRequest(server.admin, "GET", target, token: server.adminToken)
            #expect(answer.status == 400, "\(target): \(answer)")
            #expect(answer.body.contains("\"error\""), "\(target): \(answer.body)")
        }
        #expect(try server.admin("info", "nothing-here").status == 1)
        #expect(server.daemon.terminate() == 0)
    }

    @Test func strangersBoardTokensAndPathTricksGetNothing() throws {
        let server = try Server()
        try server.upload("team")
        let write = try server.token("team")
        let peer = try server.token("team", "peer")
        for (method, target) in [("GET", "/boards"), ("GET", "/boards/team"), ("DELETE", "/boards/team?force=1"),
                                 ("POST", "/boards/team/compact"), ("POST", "/revoke?subject=x"), ("POST", "/backup")] {
            #expect(adminRequest(server.admin, method, target).status == 401, "\(method) \(target) without a token")
            #expect(adminRequest(server.admin, method, target, token: write).status == 403, "\(method) \(target) with a board token")
            #expect(adminRequest(server.admin, method, target, token: peer).status == 403, "\(method) \(target) with a peer token")
            #expect(adminRequest(server.admin, method, target, token: "x" + server.adminToken).status == 401)
            // A browser's cross-site request, even with the token.
            #expect(adminRequest(server.admin, method, target, token: server.adminToken, headers: "Origin: https://evil.example\r\n").status == 403)
        }
        // Names are checked exactly as the sync port checks them; nothing is decoded into `..`.
        for target in ["/boards/..", "/boards/.", "/boards/%2e%2e", "/boards/..%2fdata", "/boards/a%2Fb", "/boards/.deleted",
                       "/boards/" + String(repeating: "x", count: 300), "/boards/te%00am", "/boards/team/../team"] {
            for method in ["GET", "DELETE"] {
                let answer = adminRequest(server.admin, method, target + (method == "DELETE" ? "?force=1" : ""), token: server.adminToken)
                #expect([400, 404, 405].contains(answer.status), "\(method) \(target): \(answer)")
            }
        }
        #expect(adminRequest(server.admin, "GET", "/boards/team/../../etc", token: server.adminToken).status == 404)
        // State changes need their method; a body is refused.
        #expect(adminRequest(server.admin, "GET", "/boards/team/compact", token: server.adminToken).status == 405)
        #expect(adminRequest(server.admin, "POST", "/boards/team", token: server.adminToken).status == 405)
        #expect(adminRequest(server.admin, "PUT", "/boards/team", token: server.adminToken).status == 405)
        #expect(adminRequest(server.admin, "POST", "/boards/team/compact", token: server.adminToken, headers: "Content-Length: 3\r\n").status == 413)
        #expect(adminRequest(server.admin, "DELETE", "/boards/team?force=yes", token: server.adminToken).status == 400)
        // The board survived all of it.
        #expect(try server.json(try server.admin("info", "team", "--json"))["name"] as? String == "team")
        // The CLI: usage errors exit 64, refusals 1.
        let cli = server.workspace.cli
        #expect(try cli.run("admin").status == 64)
        #expect(try cli.run("admin", "frob", "--server", server.admin, "--token-file", "admin.token").status == 64)
        #expect(try cli.run("admin", "list", "--token-file", "admin.token").status == 64)
        #expect(try cli.run("admin", "list", "--server", server.admin).status == 64)
        #expect(try cli.run("admin", "info", "../x", "--server", server.admin, "--token-file", "admin.token").status == 64)
        #expect(try cli.run("admin", "list", "--force", "--server", server.admin, "--token-file", "admin.token").status == 64)
        #expect(try cli.run("admin", "--help").status == 0)
        try (write + "\n").write(toFile: server.workspace.path + "/write.token", atomically: true, encoding: .utf8)
        let refused = try cli.run("admin", "list", "--server", server.admin, "--token-file", "write.token")
        #expect(refused.status == 1 && refused.stderr.contains("403"), "\(refused.stderr)")
        #expect(server.daemon.terminate() == 0)
    }

    @Test func deleteRefusesHeldBoardsThenForcesAndTheTombstoneRefusesResurrection() throws {
        // At its limit of boards: a deleted board frees its place (the upload after `undelete`).
        let server = try Server(["--max-boards", "2"])
        try server.upload("team")
        try server.upload("keep")
        // A live peer holds the board.
        try server.workspace.cli.run("new", "holder.boardpkg")
        let holder = try Daemon(["peer", "holder.boardpkg", "--connect", server.sync, "--board", "team", "--token", try server.token("team", "peer")],
                                in: server.workspace.path)
        var clients = 0
        for _ in 0..<100 where clients == 0 {
            clients = (try server.json(try server.admin("info", "team", "--json"))["clients"] as? Int) ?? 0
            if clients == 0 { usleep(100_000) }
        }
        #expect(clients == 1)
        let held = try server.admin("delete", "team")
        #expect(held.status == 1 && held.stderr.contains("409") && held.stderr.contains("--force"), "\(held.stderr)")
        #expect(FileManager.default.fileExists(atPath: server.workspace.path + "/data/team.boardpkg"))
        let forced = try server.json(try server.admin("delete", "team", "--force", "--json"))
        #expect(forced["sessionsEnded"] as? Int == 1, "\(forced)")
        #expect(!FileManager.default.fileExists(atPath: server.workspace.path + "/data/team.boardpkg"))
        #expect(FileManager.default.fileExists(atPath: server.workspace.path + "/data/.deleted/team"))
        // The holder heard why, and its redials (it keeps its copy) are refused, never served.
        #expect(holder.waitFor("board deleted (code 24)") != nil, "\(holder.log)")
        // A lagging client with its copy cannot bring the board back.
        let lagging = try server.workspace.cli.run("sync", "team.boardpkg", "--server", server.sync, "--board", "team", "--token", try server.token("team"))
        #expect(lagging.status == 1)
        #expect(lagging.stderr.contains("board deleted") && lagging.stderr.contains("'team'"), "\(lagging.stderr)")
        #expect(!FileManager.default.fileExists(atPath: server.workspace.path + "/data/team.boardpkg"), "not re-created")
        let list = try server.json(try server.admin("list", "--json"))
        #expect((list["boards"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["keep"])
        let gone = try server.admin("info", "team")
        #expect(gone.status == 1 && gone.stderr.contains("410"), "\(gone.stderr)")
        #expect(try server.admin("delete", "team").status == 1, "deleted twice")
        kill(holder.process.processIdentifier, SIGTERM)
        holder.process.waitUntilExit()
        // The operator re-creates the name: the next client creates it from its copy.
        #expect(try server.admin("undelete", "team").status == 0)
        try server.upload("team")
        #expect(try server.json(try server.admin("info", "team", "--json"))["name"] as? String == "team")
        #expect(server.daemon.terminate() == 0)
    }

    @Test func compactRevokeAndBackup() throws {
        let server = try Server(["--backup-to", "backups"])
        try server.upload("team")
        for index in 0..<5 {
            try server.workspace.cli.run("stroke", "team.boardpkg", "--points", "\(index),2 5,5")
            try server.upload("team")
        }
        let compacted = try server.json(try server.admin("compact", "team", "--json"))
        let logBefore = try #require(compacted["opLogBytesBefore"] as? Int), logAfter = try #require(compacted["opLogBytesAfter"] as? Int)
        #expect(logAfter > 0 && logAfter <= logBefore, "\(compacted)")
        #expect(try server.admin("compact", "nothing").status == 1)
        // Nothing lost by compacting: a fresh client receives every stroke.
        try server.workspace.cli.run("new", "fresh.boardpkg")
        #expect(try server.workspace.cli.run("sync", "fresh.boardpkg", "--server", server.sync, "--board", "team", "--token", try server.token("team")).status == 0)
        #expect(try server.workspace.board("fresh.boardpkg").strokes.count == 6)
        // Revoking through the admin API reaches the server as `token revoke` does.
        let alice = try server.token("team", subject: "alice")
        try server.workspace.cli.run("new", "alice.boardpkg")
        let before = try server.workspace.cli.run("sync", "alice.boardpkg", "--server", server.sync, "--board", "team", "--token", alice)
        #expect(before.status == 0, "\(before.stderr)")
        let revoked = try server.admin("revoke", "--subject", "alice")
        #expect(revoked.status == 0, "\(revoked.stderr)")
        var refused = false
        for _ in 0..<50 where !refused {
            refused = try server.workspace.cli.run("sync", "alice.boardpkg", "--server", server.sync, "--board", "team", "--token", alice).status == 1
            if !refused { usleep(100_000) }
        }
        #expect(refused, "a revoked subject is refused")
        #expect(try server.admin("revoke").status == 64)
        #expect(try server.admin("backup").status == 0)
        #expect(server.daemon.waitFor("backup started on demand") != nil, "\(server.daemon.log)")
        #expect(server.daemon.terminate() == 0)
        // Without --backup-to the call says so.
        let plain = try Server()
        let none = try plain.admin("backup")
        #expect(none.status == 1 && none.stderr.contains("--backup-to"), "\(none.stderr)")
        #expect(plain.daemon.terminate() == 0)
    }

    /// Opens an export and stops reading after its first bytes (a tiny receive buffer): the fd.
    static func stalledExport(_ address: String, _ target: String, token: String) -> (fd: Int32, status: Int) {
        let parts = address.split(separator: ":")
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var small: Int32 = 4096
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(parts[1])!.bigEndian
        _ = inet_pton(AF_INET, String(parts[0]), &addr.sin_addr)
        _ = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = Array("GET \(target) HTTP/1.1\r\nHost: \(address)\r\nAuthorization: Bearer \(token)\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = recv(fd, &buffer, buffer.count, 0)
        let text = String(decoding: buffer[0..<max(0, count)], as: UTF8.self)
        return (fd, Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0)
    }

    @Test func exportsATarThatOpensAndRenderingsAndStallsAreBounded() throws {
        let server = try Server()
        try server.upload("team")
        try server.workspace.cli.run("stroke", "team.boardpkg", "--points", "3,3 8,8")
        // A 1600x1600 image of noise (7.7 MB, incompressible): a package far bigger than the
        // socket buffers, for a client that stops reading.
        let script = """
        import random, struct, zlib
        w = h = 1600
        random.seed(7)
        raw = b"".join(b"\\x00" + random.randbytes(w * 3) for _ in range(h))
        def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
        open("noise.png", "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b""))
        """
        try script.write(toFile: server.workspace.path + "/noise.py", atomically: true, encoding: .utf8)
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "noise.py"]
        python.currentDirectoryURL = URL(fileURLWithPath: server.workspace.path)
        try python.run()
        python.waitUntilExit()
        #expect(python.terminationStatus == 0)
        let placed = try server.workspace.cli.run("sticker", "team.boardpkg", "--image", "noise.png", "--at", "100,100")
        #expect(placed.status == 0, "\(placed.stderr)")
        try server.upload("team")
        // The tar: extracted by the system's tar, it is a package board-sync opens, with every stroke.
        let exported = try server.admin("export", "team", "team.tar")
        #expect(exported.status == 0, "\(exported.stderr)")
        try FileManager.default.createDirectory(atPath: server.workspace.path + "/out", withIntermediateDirectories: true)
        let tar = Process()
        tar.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        tar.arguments = ["tar", "-xf", "../team.tar"]
        tar.currentDirectoryURL = URL(fileURLWithPath: server.workspace.path + "/out")
        try tar.run()
        tar.waitUntilExit()
        #expect(tar.terminationStatus == 0)
        for left in ["sync/lock", "sync/view.json", "manifest.json"] {
            #expect(!FileManager.default.fileExists(atPath: server.workspace.path + "/out/team.boardpkg/" + left), "\(left) is not exported")
        }
        let copy = try server.workspace.board("out/team.boardpkg")
        #expect(copy.strokes.count == 2 && copy.stickers.count == 1, "\(copy.strokes.count) strokes, \(copy.stickers.count) stickers")
        // Renderings.
        for (file, magic) in [("team.png", [0x89, 0x50, 0x4E, 0x47]), ("team.svg", Array("<".utf8)), ("team.pdf", Array("%PDF".utf8))] as [(String, [UInt8])] {
            let result = try server.admin("export", "team", file)
            #expect(result.status == 0, "\(file): \(result.stderr)")
            let bytes = try Data(contentsOf: URL(fileURLWithPath: server.workspace.path + "/" + file))
            #expect(Array(bytes.prefix(magic.count)) == magic, "\(file) starts with \(Array(bytes.prefix(8)))")
        }
        #expect(try server.admin("export", "team", "team.zip").status == 64)
        #expect(try server.admin("export", "team", "team.tar", "--scale", "2").status == 64)
        for target in ["/boards/team/export?format=exe", "/boards/team/export?format=png&scale=100", "/boards/team/export?format=tar&scale=2",
                       "/boards/team/export?what=1", "/boards/..%2fteam/export"] {
            #expect(adminRequest(server.admin, "GET", target, token: server.adminToken).status == 400, "\(target)")
        }
        #expect(adminRequest(server.admin, "GET", "/boards/nothing/export", token: server.adminToken).status == 404)
        #expect(adminRequest(server.admin, "POST", "/boards/team/export", token: server.adminToken).status == 405)
        // Clients that stop reading: four hold every export place, a fifth is told 503, the
        // server answers everything else meanwhile, and each stalled one is closed after the
        // drain timeout (10 s), its place free again.
        let stalled = (0..<4).map { _ in Self.stalledExport(server.admin, "/boards/team/export", token: server.adminToken) }
        #expect(stalled.allSatisfy { $0.status == 200 }, "\(stalled.map(\.status))")
        #expect(adminRequest(server.admin, "GET", "/boards/team/export", token: server.adminToken).status == 503)
        #expect(try server.admin("info", "team").status == 0)
        #expect(adminRequest(server.admin, "GET", "/healthz").status == 200)
        #expect(server.daemon.waitFor("the response was not read within", count: 4, within: 40), "\(server.daemon.log)")
        for export in stalled { close(export.fd) }
        #expect(try server.admin("export", "team", "again.tar").status == 0)
        #expect(server.daemon.terminate() == 0)
    }

    /// A delete through the admin API sends the signed `board.deleted` webhook.
    @Test func deleteSendsTheBoardDeletedWebhook() throws {
        let workspace = try Workspace()
        let secret = try WebhookCLITests.secret(workspace)
        let receiver = try WebhookReceiver(in: workspace.path, secret: secret, mode: "ok")
        let server = try Server(["--webhook", receiver.url, "--webhook-secret-file", secret])
        try server.upload("team")
        #expect(try server.admin("delete", "team").status == 0)
        let events = receiver.waitUntil { !WebhookCLITests.delivered($0, "board.deleted").isEmpty }
        let deleted = WebhookCLITests.delivered(events, "board.deleted")
        #expect(deleted.count == 1 && deleted.first?["signature"] as? Bool == true, "\(events)")
        #expect((deleted.first?["body"] as? [String: Any])?["board"] as? String == "team", "\(deleted)")
        #expect(server.daemon.terminate() == 0)
    }

    /// With --tls-cert the admin port speaks HTTPS: `admin --tls-ca` verifies it; a plain call
    /// or one that does not trust the certificate fails with exit 1.
    @Test func theCLISpeaksHTTPSToAnAdminPortWithTLS() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else {
            print("AdminAPICLITests: SKIPPED the HTTPS admin test: no /usr/bin/openssl (.ci/run installs it)")
            return
        }
        let workspace = try Workspace()
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                             "-keyout", "admin.key", "-out", "admin.pem", "-days", "2", "-subj", "/CN=admin test", "-addext", "subjectAltName=IP:127.0.0.1"]
        openssl.currentDirectoryURL = URL(fileURLWithPath: workspace.path)
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        try #require(openssl.terminationStatus == 0)
        chmod(workspace.path + "/admin.key", 0o600)
        try FileManager.default.createDirectory(atPath: workspace.path + "/data", withIntermediateDirectories: true)
        try workspace.cli.run("new", "data/team.boardpkg")
        try workspace.cli.run("stroke", "data/team.boardpkg", "--points", "1,1 5,5")
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--tls-cert", "admin.pem", "--tls-key", "admin.key",
                                 "--admin", "127.0.0.1:0", "--admin-token-file", "admin.token"], in: workspace.path)
        let line = try #require(server.waitFor("admin port at https://"), "\(server.log)")
        let admin = String((line.components(separatedBy: "admin port at https://").last ?? "").prefix { $0.isNumber || $0 == "." || $0 == ":" })
        let cli = workspace.cli
        let verified = try cli.run("admin", "list", "--server", admin, "--token-file", "admin.token", "--tls-ca", "admin.pem", "--json")
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(verified.stdout.contains("\"boards\""))
        // An export streamed over TLS to its file.
        let exported = try cli.run("admin", "export", "team", "team.tar", "--server", admin, "--token-file", "admin.token", "--tls-ca", "admin.pem")
        #expect(exported.status == 0 && exported.stdout.contains("wrote team.tar"), "\(exported.stderr)")
        let size = try FileManager.default.attributesOfItem(atPath: workspace.path + "/team.tar")[.size] as? Int ?? 0
        #expect(size > 1024 && size % 512 == 0, "\(size)")
        let plain = try cli.run("admin", "list", "--server", admin, "--token-file", "admin.token", "--timeout", "5")
        #expect(plain.status == 1, "\(plain.stderr)")
        let untrusted = try cli.run("admin", "list", "--server", admin, "--token-file", "admin.token", "--tls")
        #expect(untrusted.status == 1, "\(untrusted.stderr)")
        #expect(server.terminate() == 0)
    }
}
