import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Deleting a board with `--redis` (docs/DEPLOYMENT.md, "Deleting in a cluster"): the
/// tombstone lives in Redis, so a delete on one server closes the board on every server, no
/// server re-creates it, and an undelete on any server lets it come back. Real `serve`
/// processes on one real `redis-server`; skipped, loudly, without one.
@Suite(.serialized) struct RedisTombstoneTests {
    struct Cluster {
        let workspace: Workspace
        let redis: RedisProcess
        let adminToken: String

        init() throws {
            workspace = try Workspace()
            redis = try RedisProcess(in: workspace.path)
            try writeSecret(workspace.path + "/secret")
            adminToken = try workspace.cli.run("token", "--secret-file", "secret", "--role", "admin").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            try (adminToken + "\n").write(toFile: workspace.path + "/admin.token", atomically: true, encoding: .utf8)
        }

        struct Server {
            let daemon: Daemon
            let data: String
            let sync: String
            let admin: String
        }

        func server(_ data: String) throws -> Server {
            let daemon = try Daemon(["serve", "--data", data, "--listen", "127.0.0.1:0", "--redis", redis.address, "--node-id", data,
                                     "--secret-file", "secret", "--admin", "127.0.0.1:0"], in: workspace.path)
            let sync = try #require(daemon.syncAddress(), "\(daemon.log)")
            let admin = try #require(daemon.adminAddress(), "\(daemon.log)")
            #expect(daemon.waitFor("Redis commands link connected") != nil, "\(daemon.log)")
            return Server(daemon: daemon, data: workspace.path + "/" + data, sync: sync, admin: admin)
        }

        func token(_ board: String, _ role: String = "write", subject: String = "owner") throws -> String {
            try workspace.cli.run("token", "--secret-file", "secret", "--board", board, "--role", role, "--subject", subject)
                .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func admin(_ server: Server, _ arguments: String...) throws -> CLI.Result {
            try workspace.cli.run(["admin"] + arguments + ["--server", server.admin, "--token-file", "admin.token"])
        }

        func sync(_ package: String, to server: Server, board: String = "team") throws -> CLI.Result {
            try workspace.cli.run("sync", package, "--server", server.sync, "--board", board, "--token", try token(board))
        }

        /// `admin info NAME --json` of `server`, parsed (nil when refused).
        func info(_ server: Server, _ board: String) throws -> [String: Any]? {
            let result = try workspace.cli.run("admin", "info", board, "--json", "--server", server.admin, "--token-file", "admin.token")
            guard result.status == 0 else { return nil }
            return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        }

        /// Waits (at most 10 s) for `condition`.
        func eventually(_ condition: () throws -> Bool) rethrows -> Bool {
            for _ in 0..<100 {
                if try condition() { return true }
                usleep(100_000)
            }
            return try condition()
        }
    }

    @Test func aDeleteOnOneServerClosesTheBoardEverywhereAndAnUndeleteOnAnotherBringsItBack() throws {
        guard !RedisClusterTests.skipped() else { return }
        let cluster = try Cluster()
        let one = try cluster.server("one")
        let two = try cluster.server("two")
        let cli = cluster.workspace.cli
        // The board lives on server two (server one has never opened it).
        try cli.run("new", "team.boardpkg")
        try cli.run("stroke", "team.boardpkg", "--points", "1,1 4,4 9,2")
        #expect(try cluster.sync("team.boardpkg", to: two).status == 0)
        // A live peer of server two holds it.
        try cli.run("new", "holder.boardpkg")
        let holder = try Daemon(["peer", "holder.boardpkg", "--connect", two.sync, "--board", "team", "--token", try cluster.token("team", "peer", subject: "holder")],
                                in: cluster.workspace.path)
        #expect(try cluster.eventually { try cluster.info(two, "team")?["clients"] as? Int == 1 }, "the holder joined server two")
        #expect(!FileManager.default.fileExists(atPath: one.data + "/team.boardpkg"))

        // Deleted through server one: no client of its own holds it, so no --force.
        let deleted = try cluster.admin(one, "delete", "team", "--json")
        #expect(deleted.status == 0, "\(deleted.stdout) \(deleted.stderr) \(one.daemon.log)")
        // Server two closes its client with `boardDeleted` (24) and drops its copy.
        #expect(holder.waitFor("board deleted (code 24)") != nil, "\(holder.log)\n--- two:\n\(two.daemon.log)")
        #expect(cluster.eventually { !FileManager.default.fileExists(atPath: two.data + "/team.boardpkg") }, "\(two.daemon.log)")
        // In Redis: the tombstone, and none of the board's data.
        let tombstone = RedisProcess.command(cluster.redis.port, ["GET", "bs:{team}:deleted"]) ?? ""
        #expect(tombstone.contains("deletedAt") && tombstone.contains("\"node\":\"one"), "\(tombstone)")
        #expect(RedisProcess.command(cluster.redis.port, ["EXISTS", "bs:{team}:log"]) == ":0\r\n")
        // A lagging client with its copy cannot bring it back through either server.
        for server in [two, one] {
            let lagging = try cluster.sync("team.boardpkg", to: server)
            #expect(lagging.status == 1, "\(lagging.stdout)")
            #expect(lagging.stderr.contains("board deleted") && lagging.stderr.contains("'team'"), "\(lagging.stderr)")
        }
        #expect(cluster.eventually {
            !FileManager.default.fileExists(atPath: two.data + "/team.boardpkg") && !FileManager.default.fileExists(atPath: one.data + "/team.boardpkg")
        }, "no server keeps a copy")
        #expect(RedisProcess.command(cluster.redis.port, ["EXISTS", "bs:{team}:log"]) == ":0\r\n", "nothing was appended back")
        // Deleting it again through server two: already deleted.
        let again = try cluster.admin(two, "delete", "team")
        #expect(again.status == 1 && again.stderr.contains("410"), "\(again.stderr)")
        #expect(!(try cluster.admin(two, "list").stdout.contains("team")))
        kill(holder.process.processIdentifier, SIGTERM)
        holder.process.waitUntilExit()

        // Undeleted through server two: the name comes back, on either server.
        let undeleted = try cluster.admin(two, "undelete", "team")
        #expect(undeleted.status == 0, "\(undeleted.stderr)")
        #expect(RedisProcess.command(cluster.redis.port, ["EXISTS", "bs:{team}:deleted"]) == ":0\r\n")
        #expect(try cluster.admin(two, "undelete", "team").status == 1, "nothing left to undelete")
        #expect(try cluster.sync("team.boardpkg", to: one).status == 0)
        try cli.run("new", "fresh.boardpkg")
        #expect(try cluster.sync("fresh.boardpkg", to: two).status == 0)
        let info = try #require(try cluster.info(two, "team"))
        #expect((info["operations"] as? Int ?? 0) >= 1, "the stroke came back from the lagging copy: \(info)")
        #expect(one.daemon.terminate() == 0)
        #expect(two.daemon.terminate() == 0)
    }

    @Test func withoutRedisNothingIsDeletedAndNothingUnknownIsServed() throws {
        guard !RedisClusterTests.skipped() else { return }
        let cluster = try Cluster()
        let one = try cluster.server("one")
        try cluster.workspace.cli.run("new", "team.boardpkg")
        try cluster.workspace.cli.run("stroke", "team.boardpkg", "--points", "1,1 4,4 9,2")
        #expect(try cluster.sync("team.boardpkg", to: one).status == 0)
        cluster.redis.crash()
        #expect(one.daemon.waitFor("storage unavailable") != nil, "\(one.daemon.log)")
        // A delete cannot write its tombstone: refused, nothing deleted.
        let refused = try cluster.admin(one, "delete", "team", "--force")
        #expect(refused.status == 1 && refused.stderr.contains("503") && refused.stderr.contains("not deleted"), "\(refused.stderr)")
        #expect(FileManager.default.fileExists(atPath: one.data + "/team.boardpkg"))
        // A board this server has no copy of is not served while its tombstone cannot be read.
        try cluster.workspace.cli.run("new", "other.boardpkg")
        let unknown = try cluster.sync("other.boardpkg", to: one, board: "other")
        #expect(unknown.status == 1 && unknown.stderr.contains("storage"), "\(unknown.stderr)")
        // Redis back: the delete goes through.
        try cluster.redis.restart()
        #expect(try cluster.eventually { try cluster.admin(one, "delete", "team", "--force").status == 0 })
        #expect(!FileManager.default.fileExists(atPath: one.data + "/team.boardpkg"))
        #expect(one.daemon.terminate() == 0)
    }

    @Test func aHostileAdminCannotStoreUnboundedTombstones() throws {
        guard !RedisClusterTests.skipped() else { return }
        let cluster = try Cluster()
        let one = try cluster.server("one")
        // The set that counts tombstones at its limit (as if 100,000 boards had been deleted).
        let members = (0..<100_000).map { "b\($0)" }
        for start in stride(from: 0, to: members.count, by: 1000) {
            RedisProcess.command(cluster.redis.port, ["SADD", "bs:deleted"] + members[start..<(start + 1000)])
        }
        #expect(RedisProcess.command(cluster.redis.port, ["SCARD", "bs:deleted"]) == ":100000\r\n")
        try cluster.workspace.cli.run("new", "team.boardpkg")
        #expect(try cluster.sync("team.boardpkg", to: one).status == 0)
        let full = try cluster.admin(one, "delete", "team")
        #expect(full.status == 1 && full.stderr.contains("507") && full.stderr.contains("limit"), "\(full.stderr)")
        #expect(RedisProcess.command(cluster.redis.port, ["EXISTS", "bs:{team}:deleted"]) == ":0\r\n")
        RedisProcess.command(cluster.redis.port, ["SREM", "bs:deleted", "b0"])
        #expect(try cluster.admin(one, "delete", "team").status == 0)
        #expect(RedisProcess.command(cluster.redis.port, ["SCARD", "bs:deleted"]) == ":100000\r\n")
        #expect(one.daemon.terminate() == 0)
    }
}
