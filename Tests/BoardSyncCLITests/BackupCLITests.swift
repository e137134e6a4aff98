import BoardModel
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `serve --backup-to`, `restore --from` (docs/DEPLOYMENT.md, "Backups"): real server
/// processes, real files, moto's S3 on loopback.
@Suite(.serialized) struct BackupCLITests {
    static func motoSkipped() -> Bool {
        guard MotoProcess.available else {
            print("BackupCLITests: SKIPPED the S3 backup tests: no moto server (pip install 'moto[server]'; .ci/run does)")
            return true
        }
        return false
    }

    /// Every stroke and sticker id on a package's board.
    static func ids(_ workspace: Workspace, _ package: String) throws -> Set<UUID> {
        let board = try workspace.board(package)
        return Set(board.strokes.map(\.id) + board.stickers.map(\.id))
    }

    /// Waits for a backup run that takes its points after the server logged the close of its
    /// `connections`-th connection (every sync so far: each was acknowledged before it closed)
    /// and for that run to finish; returns its run number. (The log is read lazily, so lines
    /// are placed by where they stand in it, not by when the test saw them.)
    static func waitForBackup(after connections: Int, _ server: Daemon) -> Int? {
        guard server.waitFor(" closed", count: connections, within: 20) else { return nil }
        var closes = 0
        var mark = server.log.endIndex
        var index = server.log.startIndex
        while let range = server.log.range(of: " closed", range: index..<server.log.endIndex) {
            closes += 1
            if closes == connections { mark = range.upperBound; break }
            index = range.upperBound
        }
        let offset = server.log.distance(from: server.log.startIndex, to: mark)
        let marker = ": took the points of "
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let after = server.log.dropFirst(offset)
            if let range = after.range(of: marker) {
                let line = after[..<range.lowerBound].split(separator: "\n").last ?? ""
                guard let run = line.components(separatedBy: "backup ").last.flatMap({ Int($0) }) else { return nil }
                return server.waitFor("backup \(run) finished", count: 1, within: 30) ? run : nil
            }
            _ = server.waitFor(marker, count: (server.log.components(separatedBy: marker).count), within: 1.5)
        }
        return nil
    }

    /// The drill: a server loaded by peers backs up on schedule, is killed with -9, its data
    /// directory wiped; restored, a new server serves every operation acknowledged before the
    /// last completed backup, images included.
    @Test func restoreDrillAfterKillNine() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "backups", "--backup-every", "1s"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "\(server.log)")
        let peers = ["P0.boardpkg", "P1.boardpkg", "P2.boardpkg"]
        for peer in peers { try cli.run("new", peer) }
        try cli.run("sticker", "P0.boardpkg", "--image", "red.png", "--at", "10,10")
        var acknowledged: [String: Set<UUID>] = ["team": [], "second": []]
        for round in 0..<4 {
            for (index, peer) in peers.enumerated() {
                try cli.run("stroke", peer, "--points", "\(round),\(index) \(round + 5),\(index + 5)")
                let board = index == 2 ? "second" : "team"
                let sync = try cli.run("sync", peer, "--server", address, "--board", board)
                #expect(sync.status == 0, "\(sync.stderr)")
                acknowledged[board, default: []].formUnion(try Self.ids(workspace, peer))
            }
            if round == 1 { _ = Self.waitForBackup(after: 6, server) }  // backups run while peers edit
        }
        let run = try #require(Self.waitForBackup(after: 12, server), "a backup after the last acknowledged edit: \(server.log)")
        #expect(server.log.contains("backup \(run) finished: "), "\(server.log)")
        // Edits after the backup (not promised to survive), then the crash and a wiped disk.
        try cli.run("stroke", "P1.boardpkg", "--points", "50,50 60,60")
        #expect(try cli.run("sync", "P1.boardpkg", "--server", address, "--board", "team").status == 0)
        kill(server.process.processIdentifier, SIGKILL)
        server.process.waitUntilExit()
        try FileManager.default.removeItem(atPath: workspace.path + "/data")
        let restore = try cli.run("restore", "--from", "backups", "--data", "data")
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(restore.stdout.contains("restored board 'team'") && restore.stdout.contains("restored board 'second'"), "\(restore.stdout)")
        let again = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0"], in: workspace.path)
        let newAddress = try #require(again.listeningAddress(), "\(again.log)")
        for board in ["team", "second"] {
            let fresh = "fresh-\(board).boardpkg"
            try cli.run("new", fresh)
            let sync = try cli.run("sync", fresh, "--server", newAddress, "--board", board)
            #expect(sync.status == 0, "\(sync.stderr)")
            let restored = try Self.ids(workspace, fresh)
            #expect(acknowledged[board]!.isSubset(of: restored), "board \(board): lost \(acknowledged[board]!.subtracting(restored))")
            #expect(!acknowledged[board]!.isEmpty)
        }
        // The sticker's image came back with it.
        let sticker = try #require(try workspace.board("fresh-team.boardpkg").stickers.first)
        #expect(FileManager.default.fileExists(atPath: workspace.path + "/fresh-team.boardpkg/stickers/\(sticker.id.uuidString).png"))
        #expect(again.terminate() == 0)
    }

    /// More boards than one turn of the loop takes: their points are taken in turns, each
    /// batch copied before the next is taken, and every board is backed up and restored.
    @Test func manyBoardsAreTakenInTurns() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "seed.boardpkg")
        try cli.run("stroke", "seed.boardpkg", "--points", "1,1 2,2")
        try FileManager.default.createDirectory(atPath: workspace.path + "/data", withIntermediateDirectories: true)
        for index in 0..<150 {
            try FileManager.default.copyItem(atPath: workspace.path + "/seed.boardpkg", toPath: workspace.path + "/data/b\(index).boardpkg")
        }
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "backups", "--backup-every", "never"], in: workspace.path)
        _ = try #require(server.listeningAddress(), "\(server.log)")
        #expect(server.waitFor("backups: every board") != nil)
        kill(server.process.processIdentifier, SIGUSR1)
        #expect(server.waitFor("backup 1 finished: 150 written", count: 1, within: 180), "\(server.log)")
        #expect(server.log.contains("took the points of 64 boards of 150"), "\(server.log)")
        #expect(server.terminate() == 0)
        let restore = try cli.run("restore", "--from", "backups", "--data", "restored", "--json")
        #expect(restore.status == 0, "\(restore.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(restore.stdout.utf8)) as? [String: Any])
        #expect((report["boards"] as? [Any])?.count == 150)
    }

    /// A damaged backup (truncated log, a flipped byte, an unreadable manifest, a missing
    /// image) is refused with a clear error and the data directory is left as it was.
    @Test func aDamagedBackupIsRefusedAndChangesNothing() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "good", "--backup-every", "never"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "\(server.log)")
        try cli.run("new", "A.boardpkg")
        try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "1,1")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0)
        // On demand: SIGUSR1.
        kill(server.process.processIdentifier, SIGUSR1)
        #expect(server.waitFor("1 written") != nil, "\(server.log)")
        // Again with no change: only changed boards are backed up, so nothing is written.
        kill(server.process.processIdentifier, SIGUSR1)
        #expect(server.waitFor("backup 2 finished: 0 written") != nil, "\(server.log)")
        #expect(server.terminate() == 0)
        // A restarted server reads the board's manifest and finds its backup current.
        let restarted = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "good", "--backup-every", "never"], in: workspace.path)
        _ = try #require(restarted.listeningAddress())
        #expect(restarted.waitFor("backups: every board") != nil)
        kill(restarted.process.processIdentifier, SIGUSR1)
        #expect(restarted.waitFor("backup 1 finished: 0 written, 1 unchanged") != nil, "\(restarted.log)")
        #expect(restarted.terminate() == 0)
        let manager = FileManager.default
        let root = workspace.path
        let log = try #require(try manager.contentsOfDirectory(atPath: root + "/good/boards/team").first { $0.hasPrefix("log-") })
        let asset = try #require(try manager.contentsOfDirectory(atPath: root + "/good/assets").first)
        func damaged(_ name: String, _ change: (String) throws -> Void) throws -> CLI.Result {
            try? manager.removeItem(atPath: root + "/\(name)")
            try manager.copyItem(atPath: root + "/good", toPath: root + "/\(name)")
            try change(root + "/\(name)")
            return try cli.run("restore", "--from", name, "--data", "out-\(name)")
        }
        let truncated = try damaged("truncated") { path in
            let file = path + "/boards/team/\(log)"
            let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
            try bytes.prefix(bytes.count - 5).write(to: URL(fileURLWithPath: file))
        }
        #expect(truncated.status == 1 && truncated.stderr.contains("truncated"), "\(truncated.stderr)")
        let flipped = try damaged("flipped") { path in
            let file = path + "/boards/team/\(log)"
            var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
            bytes[bytes.count - 3] ^= 0x40
            try bytes.write(to: URL(fileURLWithPath: file))
        }
        #expect(flipped.status == 1 && flipped.stderr.contains("does not match its SHA-256"), "\(flipped.stderr)")
        let manifest = try damaged("manifest") { path in
            try Data("{\"format\": ".utf8).write(to: URL(fileURLWithPath: path + "/boards/team/manifest.json"))
        }
        #expect(manifest.status == 1 && manifest.stderr.contains("not readable"), "\(manifest.stderr)")
        let image = try damaged("image") { path in try manager.removeItem(atPath: path + "/assets/\(asset)") }
        #expect(image.status == 1 && image.stderr.contains("missing"), "\(image.stderr)")
        for name in ["truncated", "flipped", "manifest", "image"] {
            #expect(!manager.fileExists(atPath: root + "/out-\(name)/team.boardpkg"), "\(name): nothing restored")
        }
        // The good backup restores; restoring again over it is refused unless forced, and
        // forced keeps the board that was there.
        #expect(try cli.run("restore", "--from", "good", "--data", "out").status == 0)
        let refused = try cli.run("restore", "--from", "good", "--data", "out")
        #expect(refused.status == 1 && refused.stderr.contains("not empty"), "\(refused.stderr)")
        let forced = try cli.run("restore", "--from", "good", "--data", "out", "--force", "--json")
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try manager.contentsOfDirectory(atPath: root + "/out").contains { $0.hasPrefix("team.boardpkg.before-restore-") })
        // Never from under a server that holds the board open.
        let serving = try Daemon(["serve", "--data", "out", "--listen", "127.0.0.1:0"], in: workspace.path)
        let servingAddress = try #require(serving.listeningAddress())
        #expect(try cli.run("sync", "A.boardpkg", "--server", servingAddress, "--board", "team").status == 0)
        let held = try cli.run("restore", "--from", "good", "--data", "out", "--force")
        #expect(held.status == 1 && held.stderr.contains("open in another process"), "\(held.stderr)")
        #expect(serving.terminate() == 0)
    }

    /// A target that refuses writes (here a file where its images go) or cannot be reached:
    /// each run says why, the server keeps serving, and the next run after the fix writes.
    @Test func aBrokenTargetIsLoggedAndServingGoesOn() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try FileManager.default.createDirectory(atPath: workspace.path + "/backups", withIntermediateDirectories: true)
        try Data("in the way".utf8).write(to: URL(fileURLWithPath: workspace.path + "/backups/assets"))
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "backups", "--backup-every", "1s"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "\(server.log)")
        try cli.run("new", "A.boardpkg")
        try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "1,1")
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0)
        #expect(server.waitFor("board 'team' failed: ") != nil, "\(server.log)")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0, "serving goes on")
        try FileManager.default.removeItem(atPath: workspace.path + "/backups/assets")
        #expect(server.waitFor("1 written") != nil, "\(server.log)")
        #expect(server.terminate() == 0)
        #expect(try cli.run("restore", "--from", "backups", "--data", "restored").status == 0)

        // S3 that is not there: a clear line, serving goes on; the secret is never logged.
        let credentials = workspace.path + "/s3.keys"
        try Data("AKIDUNREACHABLE\nsuper-secret-value\n".utf8).write(to: URL(fileURLWithPath: credentials))
        chmod(credentials, 0o600)
        let closed = RedisProcess.freePort()
        let s3 = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "s3://bucket/p", "--s3-endpoint", "http://127.0.0.1:\(closed)",
                             "--s3-credentials-file", credentials, "--backup-every", "1s", "--backup-timeout", "2"], in: workspace.path)
        let s3Address = try #require(s3.listeningAddress(), "\(s3.log)")
        #expect(s3.waitFor("cannot connect to 127.0.0.1:\(closed)") != nil, "\(s3.log)")
        #expect(try cli.run("sync", "A.boardpkg", "--server", s3Address, "--board", "team").status == 0)
        #expect(s3.terminate() == 0)
        #expect(!s3.log.contains("super-secret-value"))

        // S3 that takes the connection and never answers: the request's deadline ends it, and
        // meanwhile the server serves (the backup thread waits, never the loop).
        let (hung, hungPort) = loopbackListener()
        defer { close(hung) }
        let slow = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "s3://bucket/p", "--s3-endpoint", "http://127.0.0.1:\(hungPort)",
                               "--s3-credentials-file", credentials, "--backup-every", "1s", "--backup-timeout", "3"], in: workspace.path)
        let slowAddress = try #require(slow.listeningAddress(), "\(slow.log)")
        #expect(slow.waitFor("took the points") != nil, "\(slow.log)")
        for _ in 0..<3 {
            try cli.run("stroke", "A.boardpkg", "--points", "3,3 4,4")
            #expect(try cli.run("sync", "A.boardpkg", "--server", slowAddress, "--board", "team", "--timeout", "5").status == 0, "served while the backup hangs")
        }
        #expect(slow.waitFor("timed out") != nil, "\(slow.log)")
        #expect(slow.terminate() == 0)
    }

    @Test func badBackupOptionsAreUsageErrors() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let cases: [([String], String)] = [
            (["--backup-every", "10s"], "needs --backup-to"),
            (["--backup-to", "b", "--backup-every", "0s"], "--backup-every"),
            (["--backup-to", "b", "--s3-region", "us-east-1"], "is for an s3://"),
            (["--backup-to", "s3://Bad_Bucket/x"], "not an S3 bucket name"),
            (["--backup-to", "s3://bucket/x", "--s3-endpoint", "ftp://x", "--s3-credentials-file", "/nonexistent"], "no S3 credentials file"),
        ]
        for (extra, message) in cases {
            let result = try cli.run(["serve", "--data", "data", "--listen", "127.0.0.1:0"] + extra)
            #expect(result.status == (extra.contains("--s3-endpoint") ? 1 : 64), "\(extra): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains(message), "\(extra): \(result.stderr)")
        }
        // Credentials: never argv; a file others can read is refused.
        let open = workspace.path + "/open.keys"
        try Data("AKID\nsecret\n".utf8).write(to: URL(fileURLWithPath: open))
        chmod(open, 0o644)
        let readable = try cli.run("restore", "--from", "s3://bucket", "--s3-endpoint", "http://127.0.0.1:9", "--s3-credentials-file", open, "--data", "d")
        #expect(readable.status == 1 && readable.stderr.contains("chmod 600"), "\(readable.stderr)")
        #expect(!readable.stderr.contains("secret\n"))
        let missing = try cli.run("restore", "--from", "backups-that-are-not-there", "--data", "d")
        #expect(missing.status == 1 && missing.stderr.contains("no board backups"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/d"))
    }

    /// Backups to moto's S3 (no signature checks: a key prefix), restored from it.
    @Test func backupToS3AndRestore() throws {
        if Self.motoSkipped() { return }
        let workspace = try Workspace()
        let cli = workspace.cli
        let moto = try MotoProcess(authenticating: false)
        let keys = workspace.path + "/s3.keys"
        try moto.setUp(bucket: "boards", credentials: keys, in: workspace.path)
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "s3://boards/prod/eu", "--s3-endpoint", moto.endpoint,
                                 "--s3-credentials-file", keys, "--backup-every", "1s"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "\(server.log)")
        try cli.run("new", "A.boardpkg")
        try cli.run("sticker", "A.boardpkg", "--image", "photo.png", "--at", "3,3")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0)
        let expected = try Self.ids(workspace, "A.boardpkg")
        #expect(Self.waitForBackup(after: 1, server) != nil, "\(server.log)")
        #expect(server.log.contains("1 written"), "\(server.log)")
        kill(server.process.processIdentifier, SIGKILL)
        server.process.waitUntilExit()
        let restore = try cli.run("restore", "--from", "s3://boards/prod/eu", "--s3-endpoint", moto.endpoint, "--s3-credentials-file", keys, "--data", "restored", "--json")
        #expect(restore.status == 0, "\(restore.stderr)")
        let again = try Daemon(["serve", "--data", "restored", "--listen", "127.0.0.1:0"], in: workspace.path)
        let newAddress = try #require(again.listeningAddress())
        try cli.run("new", "B.boardpkg")
        #expect(try cli.run("sync", "B.boardpkg", "--server", newAddress, "--board", "team").status == 0)
        #expect(try Self.ids(workspace, "B.boardpkg") == expected)
        #expect(again.terminate() == 0)
    }

    /// moto checking signatures: our SigV4 is accepted with the right key and refused, with a
    /// clear line and no lost serving, with a wrong secret.
    @Test func s3SignaturesAreCheckedAndWrongCredentialsSaySo() throws {
        if Self.motoSkipped() { return }
        let workspace = try Workspace()
        let cli = workspace.cli
        let moto = try MotoProcess(authenticating: true)
        let keys = workspace.path + "/s3.keys"
        try moto.setUp(bucket: "boards", credentials: keys, in: workspace.path)
        let good = try String(contentsOfFile: keys, encoding: .utf8)
        let wrong = workspace.path + "/wrong.keys"
        try Data("\(good.split(separator: "\n")[0])\nnot-the-secret-at-all\n".utf8).write(to: URL(fileURLWithPath: wrong))
        chmod(wrong, 0o600)
        try cli.run("new", "A.boardpkg")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        let refused = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "s3://boards", "--s3-endpoint", moto.endpoint,
                                  "--s3-credentials-file", wrong, "--backup-every", "1s"], in: workspace.path)
        let refusedAddress = try #require(refused.listeningAddress())
        #expect(try cli.run("sync", "A.boardpkg", "--server", refusedAddress, "--board", "team").status == 0)
        #expect(refused.waitFor("SignatureDoesNotMatch") != nil, "\(refused.log)")
        #expect(refused.log.contains("check the S3 credentials"))
        #expect(try cli.run("sync", "A.boardpkg", "--server", refusedAddress, "--board", "team").status == 0, "serving goes on")
        #expect(refused.terminate() == 0)
        #expect(!refused.log.contains("not-the-secret-at-all"))
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", "s3://boards", "--s3-endpoint", moto.endpoint,
                                 "--s3-credentials-file", keys, "--backup-every", "1s"], in: workspace.path)
        #expect(server.waitFor("1 written") != nil, "\(server.log)")
        #expect(server.terminate() == 0)
        let wrongRestore = try cli.run("restore", "--from", "s3://boards", "--s3-endpoint", moto.endpoint, "--s3-credentials-file", wrong, "--data", "r")
        #expect(wrongRestore.status == 1 && wrongRestore.stderr.contains("SignatureDoesNotMatch"), "\(wrongRestore.stderr)")
        let restore = try cli.run("restore", "--from", "s3://boards", "--s3-endpoint", moto.endpoint, "--s3-credentials-file", keys, "--data", "r")
        #expect(restore.status == 0, "\(restore.stderr)")
    }
}
