import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What a newcomer sees when the server's storage cannot serve, with real processes: `serve
/// --redis` against a port nothing listens on, and against a real `redis-server` that asks
/// for a password the server lacks or refuses the one it has. The client is told at once what
/// the server waits for (never the password; strangers only that it is the storage), the
/// server's log says it once, and `demo --redis` fails with one line and writes nothing.
@Suite(.serialized) struct StorageMessageTests {
    /// A `serve --redis` whose Redis nobody serves (a free port), with or without tokens.
    static func serverWithoutRedis(_ workspace: Workspace, secret: Bool) throws -> (Daemon, String, redisPort: Int) {
        let port = RedisProcess.freePort()
        let daemon = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--redis", "127.0.0.1:\(port)"]
                                + (secret ? ["--secret-file", "secret"] : []), in: workspace.path)
        let address = try #require(daemon.listeningAddress(), "\(daemon.log)")
        #expect(daemon.waitFor("storage unavailable") != nil, "\(daemon.log)")
        return (daemon, address, port)
    }

    /// A sync with a 3 s timeout: a refusal that came only after it would read "no result
    /// after 3 s", so the refusal's words show it came first (no timing is asserted).
    static func refusedSync(_ cli: CLI, _ arguments: [String]) throws -> CLI.Result {
        try cli.run(["sync"] + arguments + ["--timeout", "3"])
    }

    @Test func aServerWhoseRedisIsDownSaysSoAtOnce() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        let (server, address, port) = try Self.serverWithoutRedis(workspace, secret: false)
        // A stranger (no tokens on this server): the class of trouble and a retry hint, at once.
        for _ in 0..<3 {
            let result = try Self.refusedSync(cli, ["A.boardpkg", "--server", address, "--board", "team"])
            #expect(result.status == 1)
            #expect(result.stderr.contains("the server refused: storage unavailable (code 23): the server is waiting for its storage; retry later"),
                    "\(result.stderr)")
            #expect(!result.stderr.contains("\(port)"), "a stranger does not learn where the server's Redis is: \(result.stderr)")
            #expect(!result.stderr.contains("peer reported") && !result.stderr.contains("no result after"), "\(result.stderr)")
        }
        #expect(server.terminate() == 0)
        // The log: plainly, once (not per client, link or retry).
        let said = server.log.split(separator: "\n").filter { $0.contains("storage unavailable: ") }
        #expect(said.count == 1 && said[0].contains("Redis at 127.0.0.1:\(port) refused the connection"), "\(server.log)")
        #expect(!server.log.contains("retrying in"), "\(server.log)")
    }

    @Test func aTokenHolderHearsWhatTheServerWaitsFor() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        let (server, address, port) = try Self.serverWithoutRedis(workspace, secret: true)
        let token = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "write").stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let result = try Self.refusedSync(cli, ["A.boardpkg", "--server", address, "--board", "team", "--token", token])
        #expect(result.status == 1 && !result.stderr.contains("no result after"), "\(result.stderr)")
        #expect(result.stderr.contains("the server refused: storage unavailable (code 23): the server is waiting for its storage: Redis at 127.0.0.1:\(port) refused the connection; retry later"),
                "\(result.stderr)")
        // Without a token: "access denied" and nothing about the storage (the token comes first).
        let stranger = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--timeout", "3")
        #expect(stranger.stderr.contains("the server refused: unauthorized (code 7): access denied"), "\(stranger.stderr)")
        #expect(!stranger.stderr.contains("storage"))
        #expect(server.terminate() == 0)
    }

    /// A real Redis that asks for a password: a server without one and a server with a wrong
    /// one both tell a token holder at once; neither the client nor the logs show a password.
    @Test func aRedisPasswordMissingOrWrongIsNamedNeverShown() throws {
        if RedisClusterTests.skipped() { return }
        let workspace = try Workspace()
        let cli = workspace.cli
        let redis = try RedisProcess(in: workspace.path, extra: ["--requirepass", "right-horse-battery"])
        try "wrong-staple-guess\n".write(toFile: workspace.path + "/wrong-password", atomically: true, encoding: .utf8)
        try cli.run("new", "A.boardpkg")
        for (data, extra, expected) in [("none", [String](), "Redis at \(redis.address) asks for a password (NOAUTH)"),
                                         ("wrong", ["--redis-password-file", "wrong-password"], "Redis at \(redis.address) refused this server's password (WRONGPASS)")] {
            let server = try Daemon(["serve", "--data", data, "--listen", "127.0.0.1:0", "--redis", redis.address, "--secret-file", "secret"] + extra,
                                    in: workspace.path)
            let address = try #require(server.listeningAddress(), "\(server.log)")
            #expect(server.waitFor("storage unavailable") != nil, "\(server.log)")
            let token = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "write").stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let result = try Self.refusedSync(cli, ["A.boardpkg", "--server", address, "--board", "team", "--token", token])
            #expect(result.status == 1 && !result.stderr.contains("no result after"), "\(data): \(result.stderr)")
            #expect(result.stderr.contains("waiting for its storage: \(expected); retry later"), "\(data): \(result.stderr)")
            #expect(server.terminate() == 0)
            for text in [result.stderr, server.log] {
                #expect(!text.contains("horse") && !text.contains("staple"), "\(data): no password anywhere: \(text)")
            }
            #expect(server.log.split(separator: "\n").filter { $0.contains("storage unavailable: ") }.count == 1, "\(server.log)")
        }
    }

    /// Redis comes up after the server: the server says so, and the next sync goes through.
    @Test func whenRedisComesBackSyncsGoThrough() throws {
        if RedisClusterTests.skipped() { return }
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        let (server, address, port) = try Self.serverWithoutRedis(workspace, secret: false)
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--timeout", "3").status == 1)
        let redis = try RedisProcess(in: workspace.path, port: port)
        #expect(server.waitFor("storage available again") != nil, "\(server.log)")
        let synced = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--timeout", "20")
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(RedisProcess.command(redis.port, ["XLEN", "bs:{team}:log"]).map { $0 != ":0\r\n" } == true, "the stroke is in Redis")
        #expect(server.terminate() == 0)
    }

    /// `demo --servers 2 --redis` at a port nobody serves: one line saying why, and no folder.
    @Test func aDemoThatCannotReachRedisSaysSoOnceAndWritesNothing() throws {
        let workspace = try Workspace()
        let port = RedisProcess.freePort()
        let result = try workspace.cli.run("demo", "--servers", "2", "--redis", "127.0.0.1:\(port)", "--out", "out")
        #expect(result.status == 1)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "one error: \(result.stderr)")
        #expect(result.stderr.components(separatedBy: "refused the connection").count - 1 == 1, "said once: \(result.stderr)")
        #expect(result.stderr.contains("Redis at 127.0.0.1:\(port) refused the connection") && result.stderr.contains("nothing was written to out"),
                "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/out"), "no half-written --out folder")
        // An empty folder given as --out stays, empty.
        try FileManager.default.createDirectory(atPath: workspace.path + "/empty", withIntermediateDirectories: true)
        #expect(try workspace.cli.run("demo", "--servers", "2", "--redis", "127.0.0.1:\(port)", "--out", "empty").status == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: workspace.path + "/empty").isEmpty)
    }
}
