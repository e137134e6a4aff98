import BoardModel
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The last backup at SIGTERM (`serve --backup-final-timeout`, docs/DEPLOYMENT.md "Backups"):
/// a real server on a schedule that never comes round in the test, so only the final run can
/// carry the edits it acknowledged.
@Suite(.serialized) struct BackupFinalCLITests {
    /// Syncs a fresh package from `address` and returns every stroke and sticker id on `board`.
    static func served(_ workspace: Workspace, _ address: String, _ board: String, as package: String) throws -> Set<UUID> {
        try workspace.cli.run("new", package)
        let sync = try workspace.cli.run("sync", package, "--server", address, "--board", board)
        #expect(sync.status == 0, "\(sync.stderr)")
        return try BackupCLITests.ids(workspace, package)
    }

    @Test func sigtermBacksUpEveryAcknowledgedOperation() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "backups", "--backup-every", "1h"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "\(server.log)")
        #expect(server.waitFor("a last one at SIGTERM (at most 20 s)") != nil, "\(server.log)")
        var acknowledged: [String: Set<UUID>] = [:]
        for (index, board) in ["team", "second", "team"].enumerated() {
            let package = "P\(index).boardpkg"
            try cli.run("new", package)
            try cli.run("stroke", package, "--points", "\(index),1 \(index + 5),6")
            if index == 0 { try cli.run("sticker", package, "--image", "red.png", "--at", "10,10") }
            let sync = try cli.run("sync", package, "--server", address, "--board", board)
            #expect(sync.status == 0, "\(sync.stderr)")
            acknowledged[board, default: []].formUnion(try BackupCLITests.ids(workspace, package))
        }
        #expect(server.terminate() == 0)
        #expect(!server.log.contains("backup 1 finished"), "no scheduled run: \(server.log)")
        #expect(server.log.contains("final backup 1: 2 boards changed since the last completed backup"), "\(server.log)")
        #expect(server.log.contains("final backup 1 completed: 2 written, 0 unchanged, 0 failed"), "\(server.log)")
        // The disk is lost; the backup brings back everything acknowledged before SIGTERM.
        try FileManager.default.removeItem(atPath: workspace.path + "/data")
        let restore = try cli.run("restore", "--from", "backups", "--data", "data")
        #expect(restore.status == 0, "\(restore.stderr)")
        let again = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "later", "--backup-every", "never"], in: workspace.path)
        let againAddress = try #require(again.listeningAddress(), "\(again.log)")
        for board in ["team", "second"] {
            let restored = try Self.served(workspace, againAddress, board, as: "fresh-\(board).boardpkg")
            #expect(!acknowledged[board]!.isEmpty && acknowledged[board]!.isSubset(of: restored), "board \(board): lost \(acknowledged[board]!.subtracting(restored))")
        }
        #expect(try workspace.board("fresh-team.boardpkg").stickers.count == 1, "the image came back")
        // After a completed run, only what changed since goes in the final one.
        kill(again.process.processIdentifier, SIGUSR1)
        #expect(again.waitFor("backup 1 finished: 2 written", count: 1, within: 30), "\(again.log)")
        try cli.run("stroke", "fresh-team.boardpkg", "--points", "40,40 50,50")
        #expect(try cli.run("sync", "fresh-team.boardpkg", "--server", againAddress, "--board", "team").status == 0)
        let late = try BackupCLITests.ids(workspace, "fresh-team.boardpkg")
        #expect(again.terminate() == 0)
        #expect(again.log.contains("final backup 2: 1 board changed since the last completed backup"), "\(again.log)")
        #expect(again.log.contains("final backup 2 completed: 1 written"), "\(again.log)")
        let second = try cli.run("restore", "--from", "later", "--data", "data-later", "--board", "team")
        #expect(second.status == 0, "\(second.stderr)")
        let check = try Daemon(["serve", "--data", "data-later", "--listen", "127.0.0.1:0"], in: workspace.path)
        let checkAddress = try #require(check.listeningAddress(), "\(check.log)")
        #expect(late.isSubset(of: try Self.served(workspace, checkAddress, "team", as: "late.boardpkg")))
        #expect(check.terminate() == 0)
        // Nothing changed: nothing to do at SIGTERM.
        let quiet = try Daemon(["serve", "--data", "data-later", "--listen", "127.0.0.1:0", "--backup-to", "later", "--backup-every", "never"], in: workspace.path)
        _ = try #require(quiet.listeningAddress(), "\(quiet.log)")
        #expect(quiet.terminate() == 0)
        #expect(quiet.log.contains("final backup: no board changed since its last completed backup"), "\(quiet.log)")
    }

    /// A destination that takes the connection and never answers: the final run is given up
    /// after --backup-final-timeout, said so in the log, and the server still exits 0.
    @Test func aFinalBackupThatCannotFinishIsBoundedAndSaysSo() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let credentials = workspace.path + "/s3.keys"
        try Data("AKIDHUNG\nsecret\n".utf8).write(to: URL(fileURLWithPath: credentials))
        chmod(credentials, 0o600)
        let (hung, port) = loopbackListener()
        defer { close(hung) }
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "s3://bucket/p", "--s3-endpoint", "http://127.0.0.1:\(port)",
                                 "--s3-credentials-file", credentials, "--backup-every", "never", "--backup-timeout", "600", "--backup-final-timeout", "1"], in: workspace.path)
        let serverAddress = try #require(server.listeningAddress(), "\(server.log)")
        try cli.run("new", "A.boardpkg")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        #expect(try cli.run("sync", "A.boardpkg", "--server", serverAddress, "--board", "team").status == 0)
        #expect(server.terminate() == 0)
        #expect(server.log.contains("final backup 1 did NOT complete within 1s (--backup-final-timeout)") && server.log.contains(": team"), "\(server.log)")
        // Off, and bad values.
        let off = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "backups", "--backup-final-timeout", "0"], in: workspace.path)
        _ = try #require(off.listeningAddress(), "\(off.log)")
        #expect(off.terminate() == 0)
        #expect(off.log.contains("final backup: off (--backup-final-timeout 0)"), "\(off.log)")
        for (extra, message) in [(["--backup-final-timeout", "5"], "needs --backup-to"), (["--backup-to", "b", "--backup-final-timeout", "7200"], "--backup-final-timeout must be")] {
            let result = try cli.run(["serve", "--data", "data", "--listen", "127.0.0.1:0"] + extra)
            #expect(result.status == 64 && result.stderr.contains(message), "\(extra): \(result.status) \(result.stderr)")
        }
    }

    /// What backups did, on the admin port's /metrics: runs, the last run's boards, and the
    /// gauges to alert on (boards failing, boards too large to back up).
    @Test func backupMetricsOnTheAdminPort() throws {
        let server = try AdminAPICLITests.Server(["--backup-to", "backups", "--backup-every", "never"])
        try server.upload("team")
        func metrics() -> String { adminRequest(server.admin, "GET", "/metrics", token: server.adminToken).body }
        #expect(metrics().contains("boardsync_backup_runs_total 0"), "\(metrics())")
        kill(server.daemon.process.processIdentifier, SIGUSR1)
        #expect(server.daemon.waitFor("backup 1 finished: 1 written", count: 1, within: 30), "\(server.daemon.log)")
        let text = metrics()
        for line in ["boardsync_backup_runs_total 1", "boardsync_backup_last_run_boards{result=\"written\"} 1", "boardsync_backup_boards_failing 0",
                     "boardsync_backup_boards_too_large 0", "# HELP boardsync_backup_boards_too_large "] {
            #expect(text.contains(line), "\(line) in \(text)")
        }
        #expect(!text.contains("boardsync_backup_last_finished_timestamp_seconds 0\n"), "\(text)")
        #expect(server.daemon.terminate() == 0)
        #expect(server.daemon.log.contains("final backup: no board changed"), "\(server.daemon.log)")
    }
}
