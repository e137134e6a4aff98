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

/// `/metrics` series that must move: tokens refused on the web port, and bytes queued for a
/// sync client that stops reading (real TCP on loopback).
@Suite(.serialized) struct MetricsTests {
    /// A sample's value in an exposition (nil when absent).
    static func value(_ body: String, _ sample: String) -> Double? {
        body.split(separator: "\n").first { $0.hasPrefix(sample + " ") }.flatMap { Double($0.split(separator: " ").last!) }
    }

    /// An admin port on the fixture's server that also reads `web`'s counters.
    static func admin(for fixture: WebFixture, options: AdminServer.Options) throws -> AdminServer {
        let (host, web, data, loop) = (fixture.host, fixture.web, fixture.temp.path + "/data", fixture.server.thread.loop)
        nonisolated(unsafe) let chosen = options
        return try fixture.server.thread.onLoop {
            try AdminServer(listen: SocketAddress(host: "127.0.0.1", port: 0), host: host, web: web, dataDirectory: data, loop: loop, options: chosen)
        }
    }

    static func metrics(_ admin: AdminServer, token: String) throws -> String {
        let client = try WebClient(admin.listenAddress)
        client.send(Array("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n".utf8))
        let response = try #require(client.response(), "an answer from /metrics")
        #expect(response.status == 200)
        return String(decoding: response.body, as: UTF8.self)
    }

    @Test func wrongTokensOnTheWebPortAreCountedByReason() throws {
        let (authority, fixture, package) = try WebSecurityTests.withTokens()
        defer { fixture.stop() }
        defer { package.close() }
        var options = AdminServer.Options()
        options.access = SyncEndpoint.AccessControl(authority: authority, wallClock: { Date().timeIntervalSince1970 })
        let admin = try Self.admin(for: fixture, options: options)
        defer { _ = try? fixture.server.thread.onLoop { admin.close() } }
        let adminToken = try authority.mint(board: TokenAuthority.adminScope, role: .admin, expires: nil, subject: "ops")
        let before = try Self.metrics(admin, token: adminToken)
        for reason in ["missing", "malformed", "other_board", "expired"] {
            #expect(Self.value(before, "boardsync_auth_failures_total{port=\"web\",reason=\"\(reason)\"}") == 0, "\(before)")
        }
        let other = try authority.mint(board: "elsewhere", role: .read, expires: nil, subject: "bob")
        let expired = try authority.mint(board: "team", role: .read, expires: Date().timeIntervalSince1970 - 60, subject: "bob",
                                         issued: Date().timeIntervalSince1970 - 120)
        let reader = try authority.mint(board: "team", role: .read, expires: nil, subject: "bob")
        for (target, status) in [("/b/team", 401), ("/b/team?token=nonsense", 401), ("/b/team?token=\(other)", 401),
                                 ("/b/team/asset/\(String(repeating: "0", count: 64))?token=\(other)", 401),
                                 ("/ws/team?token=\(expired)", 401), ("/b/team?token=\(reader)", 200)] {
            #expect(try WebClient(fixture.web.listenAddress).get(target)?.status == status, "\(target)")
        }
        let after = try Self.metrics(admin, token: adminToken)
        #expect(Self.value(after, "boardsync_auth_failures_total{port=\"web\",reason=\"missing\"}") == 1, "\(after)")
        #expect(Self.value(after, "boardsync_auth_failures_total{port=\"web\",reason=\"malformed\"}") == 1)
        #expect(Self.value(after, "boardsync_auth_failures_total{port=\"web\",reason=\"other_board\"}") == 2)
        #expect(Self.value(after, "boardsync_auth_failures_total{port=\"web\",reason=\"expired\"}") == 1)
        #expect(Self.value(after, "boardsync_auth_failures_total{port=\"sync\",reason=\"missing\"}") == 0, "the sync port's series are its own")
        #expect(after.contains("# HELP boardsync_auth_failures_total Tokens refused, by port (sync, admin, web) and reason."))
    }

    @Test func aWrongRunTokenOnTheWebPortIsCounted() throws {
        let fixture = try WebFixture()
        defer { fixture.stop() }
        var options = AdminServer.Options()
        options.runToken = "run-token-0123456789abcdef"
        let admin = try Self.admin(for: fixture, options: options)
        defer { _ = try? fixture.server.thread.onLoop { admin.close() } }
        #expect(try WebClient(fixture.web.listenAddress).get("/")?.status == 401)
        #expect(try WebClient(fixture.web.listenAddress).get("/?token=guess")?.status == 401)
        #expect(try WebClient(fixture.web.listenAddress).get("/b/team?token=guess")?.status == 401)
        #expect(try fixture.page().get("/")?.status == 200)
        let body = try Self.metrics(admin, token: "run-token-0123456789abcdef")
        #expect(Self.value(body, "boardsync_auth_failures_total{port=\"web\",reason=\"missing\"}") == 1, "\(body)")
        #expect(Self.value(body, "boardsync_auth_failures_total{port=\"web\",reason=\"bad_signature\"}") == 2)
    }

    /// A sync client that asks for 8 MiB of images and reads nothing: the bytes the kernel
    /// cannot take (its send buffer grows to 4 MiB at most, `tcp_wmem`; the client's window is
    /// 4 KiB) wait in the server's queues, and the gauge shows them; when the client goes,
    /// they go.
    @Test func queuedOutputRisesForAClientThatStopsReadingAndFallsWhenItLeaves() throws {
        var options = AdminServer.Options()
        options.runToken = "run-token-0123456789abcdef"
        let fixture = try AdminFixture(adminOptions: options, withAccess: false)
        defer { fixture.stop() }
        let temp = TempDirectory()
        var package = try makePackage(temp.path + "/big.boardpkg", id: 0xB16)
        defer { package.close() }
        var hashes: [AssetHash] = []
        for index in 0..<2 {
            let png = Data(PNGEncoder.solid(width: 1024, height: 1024, red: UInt8(index * 80), green: 7, blue: 9))
            try package.commit { try $0.addSticker(imagePNG: png, at: pt(Double(index) * 10, 0)) }
            try package.addAsset(png)
            hashes.append(AssetHash.of(png))
        }
        try syncOnce(&package, board: "big", server: fixture.server.address, timeout: 60)
        func queued() throws -> Double {
            let body = try fixture.request("/metrics", token: "run-token-0123456789abcdef").body
            return (Self.value(body, "boardsync_queued_output_bytes{where=\"session\"}") ?? -1)
                + (Self.value(body, "boardsync_queued_output_bytes{where=\"transport\"}") ?? -1)
        }
        #expect(try queued() == 0, "nothing waits before the stalled client")
        // A receive buffer of 4 KiB, set before connecting (the window the server sees).
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var small: Int32 = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = fixture.server.address.port.bigEndian
        _ = inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0)
        var open = true
        defer { if open { close(fd) } }
        let hello = Message.hello(Hello(board: "big", replica: ReplicaID(0x5107), version: .empty)).frame().encoded()
        let want = Message.want(hashes.map { AssetRequest(hash: $0) }).frame().encoded()
        _ = (hello + want).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var peak = 0.0
        let deadline = Date().addingTimeInterval(20)
        while peak <= 0, Date() < deadline {
            peak = try queued()
            if peak <= 0 { usleep(50_000) }
        }
        #expect(peak > 0, "bytes wait for the client that does not read")
        // Still there a moment later: the client reads nothing, so nothing drains.
        usleep(200_000)
        #expect(try queued() > 0)
        close(fd)
        open = false
        let host = fixture.server.host
        #expect(try fixture.server.thread.wait { host.connectionCount == 0 })
        #expect(try queued() == 0, "the client's queued bytes went with it")
    }
}
