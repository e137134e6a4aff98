import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A sync server with access control and its admin port, on one loop thread.
final class AdminFixture: @unchecked Sendable {  // host and admin only touched on the loop thread
    let authority: TokenAuthority
    let access: SyncEndpoint.AccessControl
    let server: ServerFixture
    let admin: AdminServer
    let temp = TempDirectory()

    init(adminOptions: AdminServer.Options = AdminServer.Options(), withAccess: Bool = true,
         serverOptions: SyncHost.Options = SyncHost.Options()) throws {
        authority = try TokenAuthority(secret: Array("0123456789abcdef0123456789abcdef".utf8))
        access = SyncEndpoint.AccessControl(authority: authority, wallClock: { Date().timeIntervalSince1970 })
        var options = serverOptions
        if withAccess { options.access = access }
        server = try ServerFixture(data: temp.path + "/data", options: options)
        var adminOptions = adminOptions
        if withAccess { adminOptions.access = access }
        let host = server.host
        let data = temp.path + "/data"
        let loop = server.thread.loop
        nonisolated(unsafe) let chosen = adminOptions
        admin = try server.thread.onLoop {
            try AdminServer(listen: SocketAddress(host: "127.0.0.1", port: 0), host: host, dataDirectory: data, loop: loop, options: chosen)
        }
    }

    var address: SocketAddress { admin.listenAddress }

    func token(_ role: AccessRole, board: String = "team", expires: Double? = nil, subject: String = "ops") throws -> String {
        try authority.mint(board: role == .admin ? TokenAuthority.adminScope : board, role: role,
                           expires: expires ?? Date().timeIntervalSince1970 + 3600, subject: subject, issued: Date().timeIntervalSince1970 - 1)
    }

    /// One request on a fresh connection: its status and body.
    func request(_ target: String, token: String? = nil, method: String = "GET", host: String = "127.0.0.1",
                 extra: String = "") throws -> (status: Int, body: String) {
        let client = try WebClient(address)
        let authorization = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
        client.send(Array("\(method) \(target) HTTP/1.1\r\nHost: \(host)\r\n\(authorization)\(extra)\r\n".utf8))
        let response = try #require(client.response(), "an answer to \(target)")
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }

    func stop() {
        let admin = self.admin
        _ = try? server.thread.onLoop { admin.close() }
        server.stop()
    }
}

/// `serve --admin` (issue 26): probes open, metrics behind the admin token, and what a
/// stranger or a board token holder can do to the port.
@Suite(.serialized) struct AdminServerTests {
    @Test func probesAreOpenAndMetricsNeedAnAdminToken() throws {
        let fixture = try AdminFixture()
        defer { fixture.stop() }
        #expect(try fixture.request("/healthz") == (200, "ok\n"))
        #expect(try fixture.request("/readyz") == (200, "ready\n"))
        #expect(try fixture.request("/metrics").status == 401, "no token")
        #expect(try fixture.request("/metrics?token=\(fixture.token(.admin))").status == 401, "a token in the URL is not taken")
        #expect(try fixture.request("/metrics", token: "bst1.bm90.YQ").status == 401, "a forged token")
        for role in [AccessRole.read, .write, .peer] {
            #expect(try fixture.request("/metrics", token: fixture.token(role)).status == 403, "a \(role) token is not an admin token")
        }
        #expect(try fixture.request("/metrics", token: fixture.token(.admin, expires: Date().timeIntervalSince1970 - 5)).status == 401, "expired")
        let other = try TokenAuthority(secret: Array("another secret, 32 bytes long...".utf8))
        let foreign = try other.mint(board: TokenAuthority.adminScope, role: .admin, expires: nil, subject: "ops")
        #expect(try fixture.request("/metrics", token: foreign).status == 401, "signed with another secret")
        let admin = try fixture.token(.admin)
        let metrics = try fixture.request("/metrics", token: admin)
        #expect(metrics.status == 200)
        #expect(metrics.body.contains("boardsync_auth_failures_total{port=\"admin\",reason=\"not_admin\"} 3"), "\(metrics.body)")
        #expect(metrics.body.contains("boardsync_auth_failures_total{port=\"admin\",reason=\"missing\"} 2"))
        #expect(metrics.body.contains("boardsync_auth_failures_total{port=\"admin\",reason=\"expired\"} 1"))
        #expect(metrics.body.contains("boardsync_auth_failures_total{port=\"admin\",reason=\"bad_signature\"} 2"))
        #expect(try fixture.request("/anything", token: admin).status == 404)
        #expect(try fixture.request("/anything").status == 401, "everything but the probes is behind the token")
        // Revoking the admin token's subject closes the port to it at the next request.
        let access = fixture.access
        try fixture.server.thread.onLoop {
            access.revocations.set(Revocations(parsing: Revocations.line(subject: "ops", at: Date().timeIntervalSince1970)), from: "test")
        }
        #expect(try fixture.request("/metrics", token: admin).status == 401, "revoked")
    }

    @Test func everyFamilyHasHelpAndTypeAndEverySampleParses() throws {
        let fixture = try AdminFixture()
        defer { fixture.stop() }
        let body = try fixture.request("/metrics", token: fixture.token(.admin)).body
        var helped = Set<String>(), typed = Set<String>(), sampled = Set<String>()
        for line in body.split(separator: "\n").map(String.init) {
            if line.hasPrefix("# HELP ") { helped.insert(String(line.split(separator: " ")[2])); continue }
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                typed.insert(String(parts[2]))
                #expect(["counter", "gauge", "histogram"].contains(String(parts[3])), "\(line)")
                continue
            }
            // name{label="value",...} number
            let name = String(line.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" })
            #expect(!name.isEmpty, "\(line)")
            let value = String(line.split(separator: " ").last ?? "")
            #expect(Double(value) != nil || value == "+Inf", "\(line)")
            var family = name
            for suffix in ["_bucket", "_sum", "_count"] where typed.contains(String(name.dropLast(suffix.count))) && name.hasSuffix(suffix) {
                family = String(name.dropLast(suffix.count))
            }
            #expect(typed.contains(family), "\(name) sampled before its TYPE")
            sampled.insert(family)
        }
        #expect(helped == typed)
        #expect(typed.count >= 15, "\(typed.sorted())")
        for family in ["boardsync_connections", "boardsync_boards_open", "boardsync_operations_received_total", "boardsync_operations_sent_total",
                       "boardsync_bytes_received_total", "boardsync_bytes_sent_total", "boardsync_frames_refused_total",
                       "boardsync_auth_failures_total", "boardsync_rate_limited_sessions_total", "boardsync_fsync_seconds",
                       "boardsync_group_commit_operations", "boardsync_queued_output_bytes", "boardsync_handshake_deltas_in_flight",
                       "boardsync_web_pages", "process_resident_memory_bytes"] {
            #expect(sampled.contains(family), "\(family) missing")
        }
        #expect(!body.contains("process_resident_memory_bytes 0\n"), "resident memory is read")
    }

    @Test func metricsMoveWithTrafficAndAdminTokensOpenNoBoard() throws {
        let fixture = try AdminFixture()
        defer { fixture.stop() }
        let admin = try fixture.token(.admin)
        // An admin token is refused for every board, by the library and by the server.
        #expect(fixture.authority.verify(Array(admin.utf8), board: "team", now: Date().timeIntervalSince1970) == .failure(.adminToken))
        let temp = TempDirectory()
        var package = try makePackage(temp.path + "/a.boardpkg", id: 7)
        defer { package.close() }
        let refused = syncOnceError("an admin token on the sync port") {
            try syncOnce(&package, board: "team", server: fixture.server.address, token: admin)
        }
        #expect(refused != nil)
        for index in 0..<5 {
            try package.commit { replica in
                let edit = try replica.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 2, points: [pt(Double(index), 0), pt(9, 9)])
                replica.finishStroke()
                return edit
            }
        }
        let made = package.replica.versionVector.totalCount
        try syncOnce(&package, board: "team", server: fixture.server.address, token: fixture.token(.write))
        // A browser's request to the sync port: refused at its first bytes, counted by reason.
        let reply = rawExchange(fixture.server.address, Array("GET /team HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        let code = try #require(errorCode(in: reply))
        let host = fixture.server.host
        #expect(try fixture.server.thread.wait { host.connectionCount == 0 })
        let body = try fixture.request("/metrics", token: admin).body
        func value(_ sample: String) -> Double? {
            body.split(separator: "\n").first { $0.hasPrefix(sample + " ") }.flatMap { Double($0.split(separator: " ").last!) }
        }
        #expect(value("boardsync_operations_received_total") == Double(made), "\(body)")
        #expect(value("boardsync_boards_open") == 1)
        #expect((value("boardsync_bytes_received_total") ?? 0) > 0)
        #expect((value("boardsync_group_commit_operations_count") ?? 0) >= 1)
        #expect(value("boardsync_group_commit_operations_sum") == Double(made))
        // A count of fsyncs the histogram observed (it recorded one), not a bound on their time.
        #expect((value("boardsync_fsync_seconds_count") ?? 0) >= 1)
        #expect(value("boardsync_auth_failures_total{port=\"sync\",reason=\"admin_token\"}") == 1)
        #expect(value("boardsync_sessions_closed_total{reason=\"unauthorized\"}") == 1)
        #expect(value("boardsync_connections_accepted_total") == 3)
        let framesRefused = body.split(separator: "\n").filter { $0.hasPrefix("boardsync_frames_refused_total{") }
            .map { Double($0.split(separator: " ").last!) ?? 0 }.reduce(0, +)
        #expect(framesRefused == 1, "the refused request, code \(code)")
        #expect(value("boardsync_connections{port=\"sync\",state=\"open\"}") == 0)
    }

    @Test func aSessionOverTheOperationRateIsCountedAsRateLimited() throws {
        var serverOptions = SyncHost.Options()
        serverOptions.maxOperationsPerSecond = 2  // bursts of 10
        let fixture = try AdminFixture(serverOptions: serverOptions)
        defer { fixture.stop() }
        var peerOptions = SyncHost.Options()
        peerOptions.credentials = Array(try fixture.token(.write).utf8)
        peerOptions.reconnect = false
        peerOptions.viewSaveThreads = 0
        let loop = fixture.server.thread.loop
        let address = fixture.server.address
        nonisolated(unsafe) let chosen = peerOptions
        let peer = try fixture.server.thread.onLoop {
            let peer = try SyncHost(board: "team", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(0xBEE))), listen: nil, loop: loop, options: chosen)
            peer.connect(to: address)
            return peer
        }
        let server = fixture.server.host
        #expect(try fixture.server.thread.wait { server.boards["team"]?.hub.sessionCount == 1 })
        try fixture.server.thread.onLoop {
            for index in 0..<40 {
                try peer.edit { replica in
                    let edit = try replica.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 1), width: 1, points: [pt(Double(index), 1)])
                    replica.finishStroke()
                    return edit
                }
            }
        }
        #expect(try fixture.server.thread.wait { server.closedByCode[.tooFast] == 1 })
        let body = try fixture.request("/metrics", token: fixture.token(.admin)).body
        #expect(body.contains("boardsync_rate_limited_sessions_total 1\n"), "\(body)")
        #expect(body.contains("boardsync_frames_refused_total{reason=\"tooFast\"} 1\n"))
        try fixture.server.thread.onLoop { peer.shutdown(save: false) }
    }

    @Test func withoutAccessControlTheRunTokenOpensMetrics() throws {
        var options = AdminServer.Options()
        options.runToken = "run-token-0123456789abcdef"
        let fixture = try AdminFixture(adminOptions: options, withAccess: false)
        defer { fixture.stop() }
        #expect(try fixture.request("/metrics", token: "run-token-0123456789abcdef").status == 200)
        #expect(try fixture.request("/metrics", token: "run-token-0123456789abcdeX").status == 401)
        #expect(try fixture.request("/metrics", token: "").status == 401)
        #expect(try fixture.request("/healthz").status == 200)
        // Neither access control nor a run token: the port does not start.
        let host = fixture.server.host
        let loop = fixture.server.thread.loop
        let data = fixture.temp.path
        #expect(throws: AccessSetupError.self) {
            try fixture.server.thread.onLoop {
                _ = try AdminServer(listen: SocketAddress(host: "127.0.0.1", port: 0), host: host, dataDirectory: data, loop: loop)
            }
        }
    }

    @Test func otherHostNamesOtherSitesAndOtherMethodsGetNothing() throws {
        let fixture = try AdminFixture()
        defer { fixture.stop() }
        let admin = try fixture.token(.admin)
        #expect(try fixture.request("/metrics", token: admin, host: "evil.example").status == 421, "DNS rebinding")
        #expect(try fixture.request("/readyz", host: "evil.example:9100").status == 421)
        #expect(try fixture.request("/metrics", token: admin, host: "localhost:9100").status == 200)
        #expect(try fixture.request("/metrics", token: admin, extra: "Origin: https://evil.example\r\n").status == 403, "cross-site")
        #expect(try fixture.request("/healthz", extra: "Origin: http://127.0.0.1\r\n").status == 403, "no browser pages at all")
        #expect(try fixture.request("/metrics", token: admin, extra: "Sec-Fetch-Site: cross-site\r\n").status == 403)
        #expect(try fixture.request("/metrics", token: admin, method: "POST").status == 405)
        #expect(try fixture.request("/metrics", token: admin, extra: "Content-Length: 5\r\n").status == 413, "no bodies")
        var options = AdminServer.Options()
        options.allowedHosts = ["ops.example"]
        let named = try AdminFixture(adminOptions: options)
        defer { named.stop() }
        #expect(try named.request("/metrics", token: named.token(.admin), host: "ops.example").status == 200)
    }

    @Test func hugeHeadsSlowStrangersAndCrowdsAreBounded() throws {
        var options = AdminServer.Options()
        options.maxUnanswered = 4
        options.maxConnections = 8
        options.maxConnectionsPerAddress = 8
        options.requestTimeout = 1
        let fixture = try AdminFixture(adminOptions: options)
        defer { fixture.stop() }
        let admin = try fixture.token(.admin)
        // A head over the limit: 431, nothing more read.
        let big = String(repeating: "a", count: 20_000)
        #expect(try fixture.request("/metrics", token: admin, extra: "X-Big: \(big)\r\n").status == 431)
        let many = (0..<100).map { "X-\($0): 1\r\n" }.joined()
        #expect(try fixture.request("/healthz", extra: many).status == 431, "too many header fields")
        // Slowloris: strangers that never finish their request make room, oldest first, and
        // are answered 408 (or dropped) once the request timeout passes.
        var idle: [WebClient] = []
        for _ in 0..<12 {
            let client = try WebClient(fixture.address)
            client.send(Array("GET /metrics HT".utf8))
            idle.append(client)
            usleep(10_000)
        }
        #expect(try fixture.request("/metrics", token: admin).status == 200, "a request with its token still gets in")
        let admin2 = fixture.admin
        #expect(try fixture.server.thread.wait(timeout: 10) { admin2.connectionCount == 0 }, "strangers are gone after the request timeout")
        let late = try #require(idle.last)
        late.send(Array("TP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        #expect(late.response(seconds: 2)?.status != 200, "a request finished after its timeout is not answered 200")
        withExtendedLifetime(idle) {}
    }

    @Test func oneAddressCannotHoldEveryPlace() throws {
        var options = AdminServer.Options()
        options.maxConnectionsPerAddress = 3
        options.maxUnanswered = 100
        let fixture = try AdminFixture(adminOptions: options)
        defer { fixture.stop() }
        var held: [WebClient] = []
        for _ in 0..<3 {
            let client = try WebClient(fixture.address)
            client.send(Array("GET /healthz HTTP/1.1\r\n".utf8))  // an unfinished head holds its place
            held.append(client)
        }
        let admin = fixture.admin
        #expect(try fixture.server.thread.wait { admin.connectionCount == 3 })
        let crowded = try WebClient(fixture.address)
        let answer = try #require(crowded.response(seconds: 5))
        #expect(answer.status == 503)
        #expect(String(decoding: answer.body, as: UTF8.self).contains("too many admin connections are open from 127.0.0.1"))
        held.removeAll()
        #expect(try fixture.server.thread.wait { admin.connectionCount == 0 })
        #expect(try fixture.request("/healthz").status == 200, "places come back when connections close")
    }

    @Test func readinessFailsWhileDrainingAndWhenStorageCannotBeWritten() throws {
        var options = AdminServer.Options()
        options.readinessInterval = 0
        var failing: String? = nil
        let lock = NSLock()
        options.readinessChecks = [("redis", { lock.lock(); defer { lock.unlock() }; return failing })]
        var logged: [String] = []
        options.log = { line in lock.lock(); logged.append(line); lock.unlock() }
        func seen() -> [String] { lock.lock(); defer { lock.unlock() }; return logged }
        let fixture = try AdminFixture(adminOptions: options)
        defer { fixture.stop() }
        #expect(try fixture.request("/readyz").status == 200)
        lock.lock(); failing = "not connected to Redis at 10.1.2.3:6379"; lock.unlock()
        let notReady = try fixture.request("/readyz")
        // The open probe names the failing check only; the detail (an internal address) is logged.
        #expect(notReady == (503, "not ready: redis\n"))
        #expect(seen().contains("admin: not ready: redis: not connected to Redis at 10.1.2.3:6379"), "\(seen())")
        lock.lock(); failing = nil; lock.unlock()
        // The data directory gone (a lost volume): not ready. (Removed rather than made
        // read-only: tests may run as root, whom permissions do not stop.)
        let data = fixture.temp.path + "/data"
        try FileManager.default.moveItem(atPath: data, toPath: data + ".away")
        let lost = try fixture.request("/readyz")
        #expect(lost == (503, "not ready: storage\n"))
        #expect(seen().contains { $0.hasPrefix("admin: not ready: the data directory cannot be written") })
        try FileManager.default.moveItem(atPath: data + ".away", toPath: data)
        #expect(try fixture.request("/readyz").status == 200)
        let admin = fixture.admin
        try fixture.server.thread.onLoop { admin.beginDraining() }
        #expect(try fixture.request("/readyz") == (503, "not ready: draining\n"))
        #expect(try fixture.request("/healthz").status == 200, "liveness holds while draining")
        #expect(try fixture.request("/metrics", token: fixture.token(.admin)).body.contains("boardsync_ready 0"))
        let probes = try FileManager.default.contentsOfDirectory(atPath: data).filter { $0.hasPrefix(".readyz") }
        #expect(probes.isEmpty, "the storage probe leaves nothing behind")
    }

    @Test func withACertificateTheAdminPortSpeaksHTTPSOnly() throws {
        guard let pki = try TestPKI.make() else { return }
        var options = AdminServer.Options()
        options.tls = try TLSContext.server(certificate: pki.server.cert, key: pki.server.key)
        let fixture = try AdminFixture(adminOptions: options)
        defer { fixture.stop() }
        let plain = try WebClient(fixture.address)
        plain.send(Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        #expect(plain.response(seconds: 2)?.status != 200, "no plain HTTP on an HTTPS admin port")
        let client = try WebClient(fixture.address)
        #expect(try client.startTLS(TLSContext.client(ca: pki.ca)))
        client.send(Array("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(try fixture.token(.admin))\r\n\r\n".utf8))
        let answer = try #require(client.response())
        #expect(answer.status == 200)
        #expect(String(decoding: answer.body, as: UTF8.self).contains("# TYPE boardsync_boards_open gauge"))
    }

    @Test func labelValuesAndHelpAreEscaped() {
        var text = MetricsText()
        text.family("x", .gauge, "a \\ help\nline", [([("l", "a\"b\\c\nd")], 1.5)])
        #expect(text.text == "# HELP x a \\\\ help\\nline\n# TYPE x gauge\nx{l=\"a\\\"b\\\\c\\nd\"} 1.5\n")
        var histogram = Histogram(bounds: [1, 2])
        for value in [0.5, 1, 1.5, 3] { histogram.observe(value) }
        var out = MetricsText()
        out.histogram("h", "h", histogram)
        #expect(out.text.contains("h_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 3\nh_bucket{le=\"+Inf\"} 4\nh_sum 6\nh_count 4\n"))
    }
}
