@testable import BoardNet
import BoardCRDT
import BoardModel
import BoardStore
import Foundation
import Testing

/// Backups and restores as a reviewer attacked them: a restore refused half-way must change
/// nothing (or say exactly what it moved), an image that cannot be read must fail its board's
/// backup rather than be left out, and a restore must refuse a board whose log shows an image
/// its backup lacks.
@Suite struct BackupRestoreTests {
    static func png(_ shade: UInt8) -> Data { Data(PNGEncoder.solid(width: 4, height: 4, red: shade, green: 9, blue: 9)) }

    /// A closed package at `path` with a stroke and one sticker per shade.
    @discardableResult
    static func makeBoard(_ path: String, id: UInt64, shades: [UInt8]) throws -> BoardPackage {
        let package = try BoardPackage.create(at: path, fileSystem: PosixFileSystem(), replicaID: ReplicaID(id))
        try package.commit { try $0.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 0), width: 2, points: [CodablePoint(x: 1, y: 1), CodablePoint(x: 5, y: 5)]) }
        for shade in shades { _ = try package.commit { try $0.addSticker(imagePNG: png(shade), at: CodablePoint(x: Double(shade), y: 2)) } }
        package.close()
        return package
    }

    /// One backup run over closed packages (board name: the package's name).
    static func backUp(_ worker: BackupWorker, _ packages: [String]) throws -> BackupReport {
        var report = BackupReport(run: 1, takenAt: 0)
        let sources = try packages.map { try BackupSource(board: (($0 as NSString).lastPathComponent as NSString).deletingPathExtension, closedPackage: $0, takenAt: 0) }
        worker.queue.sync { worker.backUp(sources, report: &report) }
        return report
    }

    static func contents(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    /// The review's repro: two boards in the backup, the destination holds both, another
    /// process holds the second's lock. `restore --force` used to swap the first, then fail on
    /// the second and say nothing changed; now it takes every lock first and moves nothing.
    @Test func aHeldLockRefusesTheWholeRestoreBeforeAnythingMoves() throws {
        let directory = TempDirectory()
        let target = DirectoryBackupTarget(root: directory.path + "/backups")
        try Self.makeBoard(directory.path + "/alpha.boardpkg", id: 1, shades: [10])
        try Self.makeBoard(directory.path + "/beta.boardpkg", id: 2, shades: [20])
        let report = try Self.backUp(BackupWorker(target: target), [directory.path + "/alpha.boardpkg", directory.path + "/beta.boardpkg"])
        #expect(report.written == ["alpha", "beta"], "\(report.failed)")
        let data = directory.path + "/data"
        _ = try BackupRestore.restore(from: target, into: data)
        // Marks the boards that are there, to find them where they were afterwards.
        for board in ["alpha", "beta"] { try Data("here".utf8).write(to: URL(fileURLWithPath: "\(data)/\(board).boardpkg/mark")) }
        let lock = try PosixFileSystem().lock("\(data)/beta.boardpkg/sync/lock")
        var options = BackupRestore.Options()
        options.force = true
        #expect {
            try BackupRestore.restore(from: target, into: data, options: options)
        } throws: { error in
            "\(error)".contains("beta.boardpkg is open in another process")
        }
        #expect(Self.contents(data) == ["alpha.boardpkg", "beta.boardpkg"], "nothing moved aside, no staging left")
        for board in ["alpha", "beta"] { #expect(FileManager.default.fileExists(atPath: "\(data)/\(board).boardpkg/mark"), "\(board) stays") }
        lock.release()
        let outcome = try BackupRestore.restore(from: target, into: data, options: options)
        #expect(outcome.movedAside.count == 2)
        #expect(!FileManager.default.fileExists(atPath: "\(data)/alpha.boardpkg/mark"))
    }

    /// Staged boards and their destinations in a temp dir, each holding a file naming it.
    static func moves(_ root: String, _ names: [String]) throws -> [BackupRestore.Move] {
        try names.map { name in
            for place in ["staging/\(name)", "data/\(name)"] {
                try FileManager.default.createDirectory(atPath: "\(root)/\(place)", withIntermediateDirectories: true)
                try Data(place.utf8).write(to: URL(fileURLWithPath: "\(root)/\(place)/who"))
            }
            return BackupRestore.Move(staged: "\(root)/staging/\(name)", destination: "\(root)/data/\(name)", aside: "\(root)/data/\(name).before-restore-T")
        }
    }

    static func who(_ path: String) -> String? {
        (try? Data(contentsOf: URL(fileURLWithPath: path + "/who"))).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A rename failing part-way (the disk, a permission): the renames done are undone, each
    /// destination holds what it held, each staged board is back in staging.
    @Test func aFailedRenameIsUndone() throws {
        let directory = TempDirectory()
        let moves = try Self.moves(directory.path, ["a", "b", "c"])
        let fileSystem = PosixFileSystem()
        var calls = 0
        var caught: Error?
        do {
            _ = try BackupRestore.moveIntoPlace(moves, data: directory.path + "/data", fileSystem) { from, to in
                calls += 1
                if calls == 4 { throw FileSystemError(.io, path: from, "refused by the test") }  // b's staged copy into place
                try fileSystem.rename(from, to)
            }
        } catch {
            caught = error
        }
        #expect(caught is FileSystemError, "the rename's own error: \(String(describing: caught))")
        #expect(calls == 7, "three renames undone")
        for name in ["a", "b", "c"] {
            #expect(Self.who("\(directory.path)/data/\(name)") == "data/\(name)")
            #expect(Self.who("\(directory.path)/staging/\(name)") == "staging/\(name)")
        }
        #expect(Self.contents(directory.path + "/data") == ["a", "b", "c"])
    }

    /// When undoing fails too, the error says so and names every move that stands.
    @Test func aFailedUndoSaysWhatIsWhere() throws {
        let directory = TempDirectory()
        let moves = try Self.moves(directory.path, ["a", "b"])
        let fileSystem = PosixFileSystem()
        var calls = 0
        var caught: BackupRestore.PartlyRestored?
        do {
            _ = try BackupRestore.moveIntoPlace(moves, data: directory.path + "/data", fileSystem) { from, to in
                calls += 1
                // b moved aside (3), b's staged copy refused (4), the undo of b's aside refused (5).
                if calls == 4 || calls == 5 { throw FileSystemError(.io, path: from, "refused by the test") }
                try fileSystem.rename(from, to)
            }
        } catch let error as BackupRestore.PartlyRestored {
            caught = error
        }
        let text = try #require(caught).description
        #expect(text.contains("\(directory.path)/data/a -> \(directory.path)/data/a.before-restore-T"), "\(text)")
        #expect(text.contains("\(directory.path)/staging/a -> \(directory.path)/data/a"), "\(text)")
        #expect(text.contains("\(directory.path)/data/b -> \(directory.path)/data/b.before-restore-T"), "\(text)")
        // What it says is so.
        #expect(Self.who("\(directory.path)/data/a") == "staging/a")
        #expect(Self.who("\(directory.path)/data/a.before-restore-T") == "data/a")
        #expect(Self.who("\(directory.path)/data/b.before-restore-T") == "data/b")
    }

    /// An image that fails its hash, or cannot be read, fails its board's backup for the run
    /// (naming the image); the board's previous backup stays as it was.
    @Test func aDamagedImageFailsTheBoardAndKeepsItsPreviousBackup() throws {
        let directory = TempDirectory()
        let target = DirectoryBackupTarget(root: directory.path + "/backups")
        let path = directory.path + "/team.boardpkg"
        try Self.makeBoard(path, id: 1, shades: [10])
        let worker = BackupWorker(target: target)
        #expect(try Self.backUp(worker, [path]).written == ["team"])
        let manifestPath = directory.path + "/backups/boards/team/manifest.json"
        let first = try Data(contentsOf: URL(fileURLWithPath: manifestPath))
        // A second sticker, whose stored image is then damaged.
        let package = try openPackage(path)
        _ = try package.commit { try $0.addSticker(imagePNG: Self.png(20), at: CodablePoint(x: 3, y: 3)) }
        package.close()
        let hex = AssetHash.of(Self.png(20)).hex
        let image = "\(path)/sync/assets/\(hex)"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: image))
        bytes[bytes.count / 2] ^= 0x10
        try bytes.write(to: URL(fileURLWithPath: image))
        let damaged = try Self.backUp(worker, [path])
        #expect(damaged.written.isEmpty && damaged.failed.map { $0.board } == ["team"], "\(damaged)")
        #expect(damaged.failed.first?.error.contains(hex) == true && damaged.failed.first?.error.contains("SHA-256") == true, "\(damaged.failed)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: manifestPath)) == first, "the previous backup stays")
        // Unreadable (here a directory where the file was): failed too.
        try FileManager.default.removeItem(atPath: image)
        try FileManager.default.createDirectory(atPath: image, withIntermediateDirectories: false)
        let unreadable = try Self.backUp(BackupWorker(target: target), [path])
        #expect(unreadable.failed.first?.error.contains("\(hex) cannot be read") == true, "\(unreadable.failed)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: manifestPath)) == first)
    }

    /// A manifest that leaves out an image its log shows (as one written before this fix
    /// could) is refused, naming the board and the image; so is a stored image that fails its
    /// hash, naming it. Nothing is restored either time.
    @Test func restoreRefusesABoardMissingAnImage() throws {
        let directory = TempDirectory()
        let target = DirectoryBackupTarget(root: directory.path + "/backups")
        try Self.makeBoard(directory.path + "/team.boardpkg", id: 1, shades: [10, 20])
        #expect(try Self.backUp(BackupWorker(target: target), [directory.path + "/team.boardpkg"]).written == ["team"])
        let manifestPath = directory.path + "/backups/boards/team/manifest.json"
        let good = try Data(contentsOf: URL(fileURLWithPath: manifestPath))
        var manifest = try BackupManifest.decode(Array(good), board: "team")
        let left = manifest.assets.removeLast()
        try Data(manifest.encoded()).write(to: URL(fileURLWithPath: manifestPath))
        #expect {
            try BackupRestore.restore(from: target, into: directory.path + "/out")
        } throws: { error in
            "\(error)".contains("board 'team'") && "\(error)".contains(left)
        }
        #expect(Self.contents(directory.path + "/out").isEmpty)
        // A stored image damaged at the destination.
        try good.write(to: URL(fileURLWithPath: manifestPath))
        let stored = directory.path + "/backups/assets/\(left)"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: stored))
        bytes[bytes.count - 1] ^= 1
        try bytes.write(to: URL(fileURLWithPath: stored))
        #expect {
            try BackupRestore.restore(from: target, into: directory.path + "/out")
        } throws: { error in
            "\(error)".contains("assets/\(left)") && "\(error)".contains("does not match its SHA-256")
        }
        #expect(Self.contents(directory.path + "/out").isEmpty)
    }

    /// A board that itself lacks an image its log shows (a sticker whose image never reached
    /// the server) backs up with the image named as not held, and restores as it was.
    @Test func anImageTheBoardNeverHeldIsNamedAndRestoreAcceptsIt() throws {
        let directory = TempDirectory()
        let target = DirectoryBackupTarget(root: directory.path + "/backups")
        let path = directory.path + "/team.boardpkg"
        try Self.makeBoard(path, id: 1, shades: [10, 20])
        let hex = AssetHash.of(Self.png(20)).hex
        try FileManager.default.removeItem(atPath: "\(path)/sync/assets/\(hex)")
        #expect(try Self.backUp(BackupWorker(target: target), [path]).written == ["team"])
        let manifest = try BackupManifest.decode(Array(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/backups/boards/team/manifest.json"))), board: "team")
        #expect(manifest.imagesNotHeld == [hex] && !manifest.assets.contains(hex))
        let outcome = try BackupRestore.restore(from: target, into: directory.path + "/out")
        #expect(outcome.restored.map(\.board) == ["team"])
    }
}

/// What a hostile S3 endpoint can send a listing (found by review: 16 MiB pages of 4 KB keys
/// grew memory without bound, only the key count was bounded): a key over S3's 1,024 bytes is
/// an error, only the backup's own names are kept, and the replies' bytes in all are bounded
/// (`BackupLimits.maxListedBytes`).
@Suite struct S3ListingBoundTests {
    static func target(_ endpoint: FakeHTTPEndpoint, prefix: String = "") throws -> S3BackupTarget {
        try S3BackupTarget(endpoint: endpoint.url, bucket: "bucket", prefix: prefix, region: "us-east-1",
                           credentials: S3Credentials(accessKey: "AKIDTEST", secretKey: "secret"), client: HTTPClient(timeout: 20))
    }

    static func page(_ keys: [String], next: String?) -> [UInt8] {
        var body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult>"
        for key in keys { body += "<Contents><Key>\(key)</Key><Size>1</Size></Contents>" }
        if let next { body += "<IsTruncated>true</IsTruncated><NextContinuationToken>\(next)</NextContinuationToken>" }
        body += "</ListBucketResult>"
        return Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)
    }

    @Test func onlyTheBackupsOwnNamesAreKept() throws {
        let hex = String(repeating: "ab", count: 32)
        let endpoint = try FakeHTTPEndpoint { head, send in
            let token = FakeHTTPEndpoint.query(head, "continuation-token")
            let keys = token == nil
                ? ["p/assets/\(hex)", "p/assets/not-an-image", "p/assets/\(hex.uppercased())", "p/boards/team/manifest.json"]
                : ["p/boards/team/log-\(hex)", "p/boards/../manifest.json", "p/boards/a/b/manifest.json", "p/boards/second/manifest.json", "other/assets/\(hex)"]
            _ = send(Self.page(keys, next: token == nil ? "page2" : nil)[...])
        }
        defer { endpoint.stop() }
        let target = try Self.target(endpoint, prefix: "p")
        #expect(try target.list("assets/") == ["assets/\(hex)"])
        #expect(try target.list("boards/") == ["boards/team/manifest.json", "boards/second/manifest.json"])
    }

    @Test func aKeyOverS3sLimitIsAnError() throws {
        let endpoint = try FakeHTTPEndpoint { _, send in
            _ = send(Self.page(["assets/" + String(repeating: "A", count: 4000)], next: nil)[...])
        }
        defer { endpoint.stop() }
        #expect {
            try Self.target(endpoint).list("assets/")
        } throws: { error in
            "\(error)".contains("4007 bytes") && "\(error)".contains("1024")
        }
    }

    /// Pages without end, each with a fresh token and keys no backup uses: the listing stops at
    /// its bound on reply bytes with an error naming it.
    @Test func endlessPagesStopAtTheByteBound() throws {
        let endpoint = try FakeHTTPEndpoint { head, send in
            let token = Int(FakeHTTPEndpoint.query(head, "continuation-token") ?? "0") ?? 0
            let keys = (0..<2000).map { "assets/junk-\(token)-\($0)-" + String(repeating: "x", count: 100) }
            _ = send(Self.page(keys, next: "\(token + 1)")[...])
        }
        defer { endpoint.stop() }
        var limits = BackupLimits.standard
        limits.maxListedBytes = 4 << 20
        let target = try S3BackupTarget(endpoint: endpoint.url, bucket: "bucket", prefix: "", region: "us-east-1",
                                        credentials: S3Credentials(accessKey: "AKIDTEST", secretKey: "secret"), client: HTTPClient(timeout: 20), limits: limits)
        #expect {
            try target.list("assets/")
        } throws: { error in
            "\(error)".contains("maxListedBytes")
        }
    }
}
