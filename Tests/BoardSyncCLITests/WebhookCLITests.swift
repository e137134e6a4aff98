import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A webhook receiver: Python's http.server on a free loopback port that checks each POST's
/// signature with the secret and appends what it got (one JSON line) to a file. `mode`: "ok",
/// "failN" (answers 500 to the first N), "slowS" (sleeps S seconds on the first).
final class WebhookReceiver {
    static let script = """
        import hmac, hashlib, json, sys, time, http.server
        port, secret, mode, out = int(sys.argv[1]), open(sys.argv[2], 'rb').read().strip(), sys.argv[3], sys.argv[4]
        state = {"n": 0}
        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                state["n"] += 1
                good = hmac.compare_digest("sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest(), self.headers.get("X-BoardSync-Signature", ""))
                status = 200
                if mode.startswith("fail") and state["n"] <= int(mode[4:]): status = 500
                if mode.startswith("slow") and state["n"] <= 1: time.sleep(float(mode[4:]))
                with open(out, "a") as f:
                    f.write(json.dumps({"status": status, "signature": good, "key": self.headers.get("Idempotency-Key"), "event": self.headers.get("X-BoardSync-Event"), "body": json.loads(body)}) + "\\n")
                self.send_response(status); self.send_header("Content-Length", "0"); self.end_headers()
            def log_message(self, *a): pass
        server = http.server.HTTPServer(("127.0.0.1", port), H)
        if len(sys.argv) > 6:
            import ssl
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(sys.argv[5], sys.argv[6])
            server.socket = context.wrap_socket(server.socket, server_side=True)
        server.serve_forever()
        """

    let port: Int
    let process = Process()
    let out: String

    let tls: Bool

    init(in directory: String, secret: String, mode: String, port: Int = RedisProcess.freePort(), certificate: (String, String)? = nil) throws {
        tls = certificate != nil
        self.port = port
        out = directory + "/received-\(port).jsonl"
        let script = directory + "/receiver.py"
        try Data(WebhookReceiver.script.utf8).write(to: URL(fileURLWithPath: script))
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, String(port), secret, mode, out] + (certificate.map { [$0.0, $0.1] } ?? [])
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, !MotoProcess.accepts(port) { usleep(20_000) }
    }

    var url: String { "\(tls ? "https" : "http")://127.0.0.1:\(port)/hooks/boardsync" }

    /// Every request received so far.
    func received() -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: out, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// Waits until `check` holds for what arrived (or 20 s pass).
    func waitUntil(_ check: ([[String: Any]]) -> Bool) -> [[String: Any]] {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if check(received()) { break }
            usleep(50_000)
        }
        return received()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    }
}

/// `serve --webhook` against a receiver that checks signatures (docs/DEPLOYMENT.md, "Webhooks").
@Suite(.serialized) struct WebhookCLITests {
    static func secret(_ workspace: Workspace) throws -> String {
        let path = workspace.path + "/webhook.secret"
        try Data("a-webhook-secret-of-some-length\n".utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o600)
        return path
    }

    static func delivered(_ events: [[String: Any]], _ name: String) -> [[String: Any]] {
        events.filter { $0["event"] as? String == name && $0["status"] as? Int == 200 }
    }

    /// Sessions that joined and left, added up over the clients.changed delivered.
    static func clients(_ events: [[String: Any]]) -> (joined: Int, left: Int) {
        let bodies = delivered(events, "clients.changed").compactMap { $0["body"] as? [String: Any] }
        return (bodies.reduce(0) { $0 + ($1["joined"] as? Int ?? 0) }, bodies.reduce(0) { $0 + ($1["left"] as? Int ?? 0) })
    }

    /// Every event, signed; one answered 500 twice is retried under the same key and
    /// delivered; keys differ between events; a burst of edits is one `board.changed`; the
    /// syncs' sessions are counted in `clients.changed`.
    @Test func eventsArriveSignedAndAreRetried() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let secret = try Self.secret(workspace)
        let receiver = try WebhookReceiver(in: workspace.path, secret: secret, mode: "fail2")
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--webhook", receiver.url, "--webhook-secret-file", secret], in: workspace.path)
        let address = try #require(server.listeningAddress(), "\(server.log)")
        try cli.run("new", "A.boardpkg")
        for index in 0..<3 {
            try cli.run("stroke", "A.boardpkg", "--points", "\(index),1 4,4")
            #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0)
        }
        let events = receiver.waitUntil { !Self.delivered($0, "board.changed").isEmpty && Self.clients($0).left == 3 }
        #expect(events.allSatisfy { $0["signature"] as? Bool == true }, "\(events)")
        let created = events.filter { $0["event"] as? String == "board.created" }
        #expect(created.map { $0["status"] as? Int } == [500, 500, 200], "retried after 500s: \(events)")
        #expect(Set(created.compactMap { $0["key"] as? String }).count == 1, "one idempotency key for every try")
        #expect(Self.clients(events) == (3, 3), "\(events)")
        let summaries = Self.delivered(events, "clients.changed").compactMap { $0["body"] as? [String: Any] }
        #expect(summaries.last?["connected"] as? Int == 0 && summaries.allSatisfy { $0["board"] as? String == "team" }, "\(summaries)")
        #expect(Set(summaries.flatMap { $0["joined_replicas"] as? [String] ?? [] }).count == 1, "one package, one replica: \(summaries)")
        let changed = Self.delivered(events, "board.changed")
        #expect(changed.count == 1, "three syncs within the quiet period: one event \(changed)")
        #expect((changed.first?["body"] as? [String: Any])?["operations"] as? Int == 3)
        #expect((changed.first?["body"] as? [String: Any])?["board"] as? String == "team")
        let keys = events.filter { $0["status"] as? Int == 200 }.compactMap { $0["key"] as? String }
        #expect(Set(keys).count == keys.count, "each event its own key")
        #expect(server.waitFor("answered 500; retrying") != nil, "\(server.log)")
        #expect(server.terminate() == 0)
        #expect(!server.log.contains("a-webhook-secret"))
    }

    /// A receiver that is down: the queue keeps N, dropping the least important (client
    /// summaries before board changes, never a board's creation in their favour) with a log
    /// line; serving goes on, and when the receiver comes up what waited is delivered. The
    /// URL's path and query are in no log line.
    @Test func aReceiverThatIsDownLosesOnlyTheLeastImportantBeyondTheLimit() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let secret = try Self.secret(workspace)
        let port = RedisProcess.freePort()
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--webhook", "http://127.0.0.1:\(port)/hook/S3CR3T?key=QU3RY",
                                 "--webhook-secret-file", secret, "--webhook-queue", "2", "--webhook-timeout", "1"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "\(server.log)")
        try cli.run("new", "A.boardpkg")
        for index in 0..<3 {
            try cli.run("stroke", "A.boardpkg", "--points", "\(index),1 4,4")
            #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0, "serving goes on")
        }
        #expect(server.waitFor("dropped clients.changed of board 'team'") != nil, "\(server.log)")
        #expect(server.log.contains("Connection refused") || server.log.contains("cannot connect"), "\(server.log)")
        let receiver = try WebhookReceiver(in: workspace.path, secret: secret, mode: "ok", port: port)
        let events = receiver.waitUntil { $0.contains { $0["event"] as? String == "board.changed" } }
        #expect(events.contains { $0["event"] as? String == "board.changed" }, "\(events) \(server.log)")
        #expect(Self.delivered(events, "board.created").count == 1, "board.created outranks the rest: \(events)")
        #expect(Self.delivered(events, "clients.changed").isEmpty, "the client summaries were dropped: \(events)")
        #expect(events.allSatisfy { $0["signature"] as? Bool == true })
        #expect(server.terminate() == 0)
        #expect(!server.log.contains("S3CR3T") && !server.log.contains("QU3RY"), "\(server.log)")
        #expect(server.log.contains("to http://127.0.0.1:\(port)/…"), "\(server.log)")
    }

    /// A receiver slower than the timeout: the attempt is abandoned and retried; serving
    /// never waits for it.
    @Test func aSlowReceiverIsRetriedAndServingGoesOn() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let secret = try Self.secret(workspace)
        let receiver = try WebhookReceiver(in: workspace.path, secret: secret, mode: "slow3")
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--webhook", receiver.url, "--webhook-secret-file", secret,
                                 "--webhook-timeout", "1"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "\(server.log)")
        try cli.run("new", "A.boardpkg")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 4,4")
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0)
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0)
        #expect(server.waitFor("timed out") != nil, "\(server.log)")
        let events = receiver.waitUntil { Self.delivered($0, "board.created").count >= 2 }
        #expect(Set(Self.delivered(events, "board.created").compactMap { $0["key"] as? String }).count == 1, "the same event again: \(events)")
        #expect(server.terminate() == 0)
    }

    /// An https:// receiver (Python's ssl with a throwaway certificate): verified against
    /// --webhook-tls-ca it gets every event; against the system trust store the handshake
    /// fails, which is logged and retried.
    @Test func anHTTPSReceiverIsVerified() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else {
            print("WebhookCLITests: SKIPPED the https receiver test: no /usr/bin/openssl (.ci/run installs it)")
            return
        }
        let workspace = try Workspace()
        let cli = workspace.cli
        let secret = try Self.secret(workspace)
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                             "-keyout", "hook.key", "-out", "hook.pem", "-days", "2", "-subj", "/CN=hook test", "-addext", "subjectAltName=IP:127.0.0.1"]
        openssl.currentDirectoryURL = URL(fileURLWithPath: workspace.path)
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        try #require(openssl.terminationStatus == 0)
        let receiver = try WebhookReceiver(in: workspace.path, secret: secret, mode: "ok",
                                           certificate: (workspace.path + "/hook.pem", workspace.path + "/hook.key"))
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--webhook", receiver.url, "--webhook-secret-file", secret,
                                 "--webhook-tls-ca", "hook.pem"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "\(server.log)")
        try cli.run("new", "A.boardpkg")
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0)
        let events = receiver.waitUntil { Self.clients($0).left == 1 }
        #expect(Self.delivered(events, "board.created").count == 1 && Self.clients(events) == (1, 1), "\(events) \(server.log)")
        #expect(events.allSatisfy { $0["signature"] as? Bool == true })
        #expect(server.terminate() == 0)
        let untrusted = try Daemon(["serve", "--data", "data2", "--listen", "127.0.0.1:0", "--webhook", receiver.url, "--webhook-secret-file", secret], in: workspace.path)
        let untrustedAddress = try #require(untrusted.listeningAddress())
        #expect(try cli.run("sync", "A.boardpkg", "--server", untrustedAddress, "--board", "other").status == 0)
        #expect(untrusted.waitFor("certificate verify failed") != nil, "\(untrusted.log)")
        #expect(untrusted.terminate() == 0)
    }

    @Test func badWebhookOptionsAreRefused() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let secret = try Self.secret(workspace)
        let short = workspace.path + "/short.secret"
        try Data("tiny\n".utf8).write(to: URL(fileURLWithPath: short))
        chmod(short, 0o600)
        let loose = workspace.path + "/loose.secret"
        try Data("a-webhook-secret-of-some-length\n".utf8).write(to: URL(fileURLWithPath: loose))
        chmod(loose, 0o644)
        let cases: [([String], Int32, String)] = [
            (["--webhook", "http://127.0.0.1:9/h"], 64, "needs a signing secret"),
            (["--webhook-secret-file", secret], 64, "needs --webhook URL"),
            (["--webhook", "ftp://x/h", "--webhook-secret-file", secret], 64, "not an http"),
            (["--webhook", "http://127.0.0.1:9/h", "--webhook-secret-file", short], 1, "too short"),
            (["--webhook", "http://127.0.0.1:9/h", "--webhook-secret-file", loose], 1, "chmod 600"),
            (["--webhook", "http://127.0.0.1:9/h", "--webhook-secret-file", secret, "--webhook-queue", "0"], 64, "--webhook-queue"),
        ]
        for (extra, status, message) in cases {
            let result = try cli.run(["serve", "--data", "data", "--listen", "127.0.0.1:0"] + extra)
            #expect(result.status == status && result.stderr.contains(message), "\(extra): \(result.status) \(result.stderr)")
            #expect(!result.stderr.contains("a-webhook-secret"))
        }
    }
}
