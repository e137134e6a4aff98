import BoardModel
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One HTTP/1.0 GET over a plain socket (the server closes after answering): status and body.
func plainGet(_ address: String, _ target: String, headers: String = "", host: String? = nil) -> (status: Int, body: String) {
    guard let fd = dialLoopback(address) else { return (0, "no connection") }
    defer { close(fd) }
    let request = Array("GET \(target) HTTP/1.0\r\nHost: \(host ?? address)\r\n\(headers)\r\n".utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    let received = readToEnd(fd)
    let text = String(decoding: received, as: UTF8.self)
    let head = text.components(separatedBy: "\r\n\r\n").first ?? ""
    let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
    return (status, text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n"))
}

/// A signing secret (64 hex digits, mode 0600), as `serve --secret-file` creates one.
func writeSecret(_ path: String) throws {
    let hex = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    try (hex + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    chmod(path, 0o600)
}

extension Daemon {
    /// The admin port's HOST:PORT from the line `admin port at http://HOST:PORT/`.
    func adminAddress() -> String? {
        guard let line = waitFor("admin port at http://") else { return nil }
        let rest = line.components(separatedBy: "admin port at http://").last ?? ""
        return String(rest.prefix { $0.isNumber || $0 == "." || $0 == ":" })
    }

    /// The sync port's HOST:PORT (text or JSON logs).
    func syncAddress() -> String? {
        guard let line = waitFor("listening on ") else { return nil }
        let rest = line.components(separatedBy: "listening on ").last ?? ""
        return String(rest.prefix { $0.isNumber || $0 == "." || $0 == ":" })
    }
}

/// `serve --admin`, `--log-format json` and `token --role admin` as an operator runs them.
@Suite(.serialized) struct AdminCLITests {
    @Test func badAdminFlagsAreUsageErrors() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        for (arguments, says) in [
            (["--admin", "127.0.0.1:0"], "--admin-token-file"),
            (["--admin", "nowhere"], "--admin"),
            (["--drain-seconds", "3"], "needs --admin"),
            (["--admin-token-file", "t"], "needs --admin"),
            (["--admin", "127.0.0.1:0", "--admin-token-file", "t", "--drain-seconds", "-1"], "--drain-seconds"),
            (["--admin", "127.0.0.1:0", "--admin-token-file", "t", "--admin-connections", "0"], "--admin-connections"),
            (["--admin", "127.0.0.1:0", "--secret-file", "s", "--admin-token-file", "t"], "--admin-token-file"),
            (["--log-format", "xml"], "--log-format"),
        ] {
            let result = try cli.run(["serve", "--data", "data"] + arguments)
            #expect(result.status == 64, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(says), "\(arguments): \(result.stderr)")
        }
        #expect(try cli.run("token", "--secret-file", "s", "--role", "admin", "--board", "team").status == 64)
        #expect(try cli.run("token", "--secret-file", "s", "--role", "root").status == 64)
        try writeSecret(workspace.path + "/secret")
        let minted = try cli.run("token", "--secret-file", "secret", "--role", "admin", "--json")
        #expect(minted.status == 0, "\(minted.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(minted.stdout.utf8)) as? [String: Any])
        #expect(json["board"] as? String == "*")
        #expect(json["role"] as? String == "admin")
    }

    @Test func sigtermFailsReadinessAtOnceThenDrainsAndLosesNothing() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
                                 "--admin-token-file", "admin.token", "--drain-seconds", "3"], in: workspace.path)
        let address = try #require(server.syncAddress(), "\(server.log)")
        let admin = try #require(server.adminAddress(), "\(server.log)")
        #expect(plainGet(admin, "/readyz").status == 200)
        let token = try String(contentsOfFile: workspace.path + "/admin.token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(plainGet(admin, "/metrics").status == 401)
        #expect(plainGet(admin, "/metrics", headers: "Authorization: Bearer \(token)\r\n").status == 200)
        #expect(!server.log.contains(token), "the admin token is never logged")
        try cli.run("new", "A.boardpkg")
        try cli.run("new", "B.boardpkg")
        for index in 0..<3 { try cli.run("stroke", "A.boardpkg", "--points", "\(index),1 4,4 9,2") }
        try cli.run("stroke", "B.boardpkg", "--points", "5,5 6,6")
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0)
        let started = Date()
        kill(server.process.processIdentifier, SIGTERM)
        var answer = plainGet(admin, "/readyz")
        while answer.status == 200, Date().timeIntervalSince(started) < 3 { answer = plainGet(admin, "/readyz") }
        let latency = Date().timeIntervalSince(started)
        print("AdminCLITests: /readyz answered \(answer.status) \(Int(latency * 1000)) ms after SIGTERM")
        #expect(answer.status == 503, "\(answer)")
        #expect(answer.body.contains("draining"))
        #expect(plainGet(admin, "/healthz").status == 200)
        // Still serving while draining: an edit made now is acknowledged, so it must survive.
        let during = try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team")
        #expect(during.status == 0, "\(during.stderr)")
        // No second signal: the drain ends by itself, then the server stops as always.
        #expect(server.waitFor("stopped") != nil, "\(server.log)")
        server.process.waitUntilExit()
        #expect(server.process.terminationStatus == 0, "\(server.log)")
        let draining = try #require(server.log.range(of: "admin: draining"))
        #expect(server.log.range(of: "stopped").map { $0.lowerBound > draining.lowerBound } == true)
        let saved = try workspace.board("data/team.boardpkg")
        #expect(saved.strokes.count == 4, "every acknowledged operation is on disk")
    }

    @Test func jsonLogsHaveTheFieldsOnEveryLineAndNoTokens() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--secret-file", "secret",
                                 "--log-format", "json", "--web", "127.0.0.1:0", "--admin", "127.0.0.1:0"], in: workspace.path)
        let address = try #require(server.syncAddress(), "\(server.log)")
        let admin = try #require(server.adminAddress(), "\(server.log)")
        try cli.run("new", "A.boardpkg")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 4,4")
        let write = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "write").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let other = try cli.run("token", "--secret-file", "secret", "--board", "elsewhere", "--role", "write").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let adminToken = try cli.run("token", "--secret-file", "secret", "--role", "admin").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try writeSecret(workspace.path + "/foreign")
        let foreign = try cli.run("token", "--secret-file", "foreign", "--board", "team", "--role", "write").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", write).status == 0)
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", other).status == 1)
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", foreign).status == 1)
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", adminToken).status == 1)
        #expect(plainGet(admin, "/metrics", headers: "Authorization: Bearer \(write)\r\n").status == 403)
        #expect(plainGet(admin, "/metrics", headers: "Authorization: Bearer \(adminToken)\r\n").status == 200)
        // A stranger's text in a log line (a Host header made to close the JSON object early).
        let forged = #"a"},{"level":"forged","x":"\#u{202E}"#
        #expect(plainGet(admin, "/healthz", host: forged).status == 421)
        #expect(server.waitFor("for host") != nil)
        // A header made to look like the fields of another line (found by review): quoted, its
        // quotes escaped, and no field is read inside quotes.
        let posing = "x') save failed for board 'team' subject 'alice' replica 5eed (code 24)"
        #expect(plainGet(admin, "/healthz", headers: "Origin: \(posing)\r\n").status == 403)
        #expect(server.waitFor("cross-site request") != nil)
        #expect(server.terminate() == 0)
        let secret = try String(contentsOfFile: workspace.path + "/secret", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        for token in [write, other, foreign, adminToken, secret] {
            #expect(!token.isEmpty && !server.log.contains(token), "a token or the secret is in the log")
            // Not even its signature or payload part.
            for part in token.split(separator: ".").dropFirst() where part.count > 8 { #expect(!server.log.contains(part)) }
        }
        var events: [[String: Any]] = []
        for line in server.log.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                Issue.record("not a JSON object: \(line)")
                continue
            }
            for key in ["time", "level", "event", "board", "replica", "subject", "peer", "code", "message"] {
                #expect(object.keys.contains(key), "\(key) missing in \(line)")
            }
            events.append(object)
        }
        #expect(events.count > 10)
        #expect(!events.contains { $0["level"] as? String == "forged" }, "no field forged by a peer")
        let crossSite = events.filter { ($0["message"] as? String)?.contains("cross-site request") == true }
        #expect(crossSite.count == 1)
        for event in crossSite {
            #expect(event["event"] as? String == "admin" && event["level"] as? String == "warning", "\(event)")
            #expect(event["board"] is NSNull && event["subject"] is NSNull && event["replica"] is NSNull && event["code"] is NSNull, "\(event)")
        }
        #expect(events.contains { ($0["message"] as? String)?.contains(#"a"},{"level":"forged""#) == true && $0["event"] as? String == "admin" })
        #expect(events.contains { $0["event"] as? String == "board_created" && $0["board"] as? String == "team" })
        #expect(events.contains { $0["event"] as? String == "access_denied" && $0["level"] as? String == "warning" })
        #expect(events.contains { $0["event"] as? String == "connection_closed" && $0["code"] as? String == "unauthorized" && $0["peer"] is String })
        #expect(events.allSatisfy { ($0["time"] as? String)?.hasSuffix("Z") == true })
        // Without a secret the web view's run token is in its URL: JSON logs leave it out.
        let open = try Daemon(["serve", "--data", "data2", "--listen", "127.0.0.1:0", "--log-format", "json", "--web", "127.0.0.1:0",
                               "--backup-to", "backups", "--backup-every", "never"], in: workspace.path)
        let line = try #require(open.waitFor("web view at "), "\(open.log)")
        #expect(line.contains("token=REDACTED"), "\(line)")
        // A backup that wrote everything is news, not an error: "0 failed" is a count (found by
        // review: the level was read from the word "failed").
        let openAddress = try #require(open.syncAddress(), "\(open.log)")
        #expect(try cli.run("sync", "A.boardpkg", "--server", openAddress, "--board", "team").status == 0)
        kill(open.process.processIdentifier, SIGUSR1)
        let finished = try #require(open.waitFor("finished: 1 written"), "\(open.log)")
        let backupEvent = try #require(try JSONSerialization.jsonObject(with: Data(finished.utf8)) as? [String: Any], "\(finished)")
        #expect(backupEvent["level"] as? String == "info" && backupEvent["event"] as? String == "backup", "\(backupEvent)")
        #expect(open.terminate() == 0)
    }

    /// With --redis, readiness follows Redis: a real redis-server killed makes /readyz 503 (the
    /// body says why), restarted makes it 200 again; the Redis series count round trips.
    @Test func readinessFollowsRedis() throws {
        if RedisClusterTests.skipped() { return }
        let workspace = try Workspace()
        let redis = try RedisProcess(in: workspace.path)
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--redis", redis.address, "--node-id", "one",
                                 "--admin", "127.0.0.1:0", "--admin-token-file", "admin.token"], in: workspace.path)
        let address = try #require(server.syncAddress(), "\(server.log)")
        let admin = try #require(server.adminAddress(), "\(server.log)")
        #expect(server.waitFor("Redis tail link connected") != nil, "\(server.log)")
        func readyz(_ status: Int) -> String? {
            let deadline = Date().addingTimeInterval(20)
            var answer = plainGet(admin, "/readyz")
            while answer.status != status, Date() < deadline {
                usleep(100_000)
                answer = plainGet(admin, "/readyz")
            }
            return answer.status == status ? answer.body : nil
        }
        #expect(readyz(200) != nil)
        try workspace.cli.run("new", "A.boardpkg")
        try workspace.cli.run("stroke", "A.boardpkg", "--points", "1,1 4,4")
        #expect(try workspace.cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0)
        let token = try String(contentsOfFile: workspace.path + "/admin.token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let metrics = plainGet(admin, "/metrics", headers: "Authorization: Bearer \(token)\r\n").body
        let trips = metrics.split(separator: "\n").first { $0.hasPrefix("boardsync_redis_round_trips_total ") }
        #expect((trips.flatMap { Double($0.split(separator: " ")[1]) } ?? 0) > 0, "\(metrics)")
        #expect(metrics.contains("boardsync_redis_connected 1"))
        redis.crash()
        let down = readyz(503)
        // The open probe names the check; the address and the reason are in the log only.
        #expect(down == "not ready: redis\n", "\(String(describing: down))")
        #expect(server.waitFor("admin: not ready: redis: not connected to Redis at \(redis.address)") != nil, "\(server.log)")
        #expect(plainGet(admin, "/healthz").status == 200, "alive while Redis is down")
        try redis.restart()
        #expect(readyz(200) != nil, "ready again once Redis is back")
        #expect(server.terminate() == 0)
    }
}
