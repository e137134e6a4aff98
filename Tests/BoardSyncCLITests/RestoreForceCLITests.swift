import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The review's repro of a partial `restore --force`: a backup of two boards, a data directory
/// holding both, another process (`flock`) holding the second's lock. The restore used to move
/// the first board aside and put the backup's in its place, fail on the second, and say
/// "nothing was changed"; now it is refused before anything moves, and that is true.
@Suite(.serialized) struct RestoreForceCLITests {
    @Test func aBoardLockedByAnotherProcessRefusesTheWholeRestore() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "backups", "--backup-every", "never"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "\(server.log)")
        #expect(server.waitFor("backups: every board") != nil)
        for board in ["alpha", "beta"] {
            try cli.run("new", "\(board).boardpkg")
            try cli.run("stroke", "\(board).boardpkg", "--points", "1,1 2,2")
            #expect(try cli.run("sync", "\(board).boardpkg", "--server", address, "--board", board).status == 0)
        }
        kill(server.process.processIdentifier, SIGUSR1)
        #expect(server.waitFor("backup 1 finished: 2 written") != nil, "\(server.log)")
        #expect(server.terminate() == 0)
        #expect(try cli.run("restore", "--from", "backups", "--data", "out").status == 0)
        let out = workspace.path + "/out"
        for board in ["alpha", "beta"] { try Data(board.utf8).write(to: URL(fileURLWithPath: "\(out)/\(board).boardpkg/mark")) }

        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        holder.arguments = ["-x", "\(out)/beta.boardpkg/sync/lock", "-c", "echo locked; exec sleep 60"]
        let pipe = Pipe()
        holder.standardOutput = pipe
        try holder.run()
        defer {
            kill(holder.processIdentifier, SIGTERM)
            holder.waitUntilExit()
        }
        #expect(String(decoding: pipe.fileHandleForReading.availableData, as: UTF8.self).contains("locked"))

        let refused = try cli.run("restore", "--from", "backups", "--data", "out", "--force")
        #expect(refused.status == 1, "\(refused.stdout)")
        #expect(refused.stderr.contains("beta.boardpkg is open in another process") && refused.stderr.contains("nothing was changed"), "\(refused.stderr)")
        let entries = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
        #expect(entries == ["alpha.boardpkg", "beta.boardpkg"], "nothing moved aside, no staging left: \(entries)")
        for board in ["alpha", "beta"] {
            #expect(FileManager.default.fileExists(atPath: "\(out)/\(board).boardpkg/mark"), "\(board) is the board that was there")
        }
    }
}
