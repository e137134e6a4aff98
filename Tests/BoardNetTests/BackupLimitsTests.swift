import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import Foundation
import Testing

/// One set of size bounds (`BackupLimits`) on both sides of a backup, injected small here: what
/// the writer accepts, restore accepts; a board over a bound is refused by the writer, loudly,
/// and the other boards are still backed up; copies go a chunk at a time.
@Suite(.serialized) struct BackupLimitsTests {
    /// A package in `data` with `strokes` strokes and, optionally, a sticker; its log's size.
    @discardableResult
    static func board(_ data: String, _ name: String, id: UInt64, strokes: Int, sticker: Bool = false) throws -> Int {
        let package = try makePackage(data + "/\(name).boardpkg", id: id)
        for index in 0..<strokes {
            try package.commit { try $0.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 0), width: 2, points: [pt(Double(index), 1), pt(5, 5)]) }
        }
        if sticker { try package.commit { try $0.addSticker(imagePNG: pngA, at: pt(3, 3)) } }
        let size = package.logSize
        package.close()
        return size
    }

    /// Runs one backup of `data` on a real server's loop; the report and the log's lines.
    static func backUp(_ data: String, to target: any BackupTarget) throws -> (BackupReport, BackupStatus, [String]) {
        let server = try ServerFixture(data: data)
        defer { server.stop() }
        let lines = LinesBox()
        let host = server.host
        let loop = server.thread.loop
        let scheduler = try server.thread.onLoop {
            let scheduler = BackupScheduler(host: host, dataDirectory: data, target: target, every: nil, log: { lines.append($0) })
            scheduler.backupNow()
            return SchedulerRef(scheduler)
        }
        _ = loop
        #expect(try server.thread.wait(timeout: 60) { scheduler.value.lastReport != nil }, "the run ended: \(lines.all)")
        let (report, status) = try server.thread.onLoop { (scheduler.value.lastReport!, scheduler.value.status) }
        _ = try server.thread.onLoop { scheduler.value.stop() }
        return (report, status, lines.all)
    }

    @Test func aBoardOverTheLogBoundIsRefusedLoudlyAndTheOthersAreBackedUp() throws {
        let directory = TempDirectory()
        let data = directory.path + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let atLimit = try Self.board(data, "small", id: 1, strokes: 2)
        let big = try Self.board(data, "big", id: 2, strokes: 40)
        try Self.board(data, "other", id: 3, strokes: 1)
        #expect(big > atLimit)
        var limits = BackupLimits()
        limits.maxLogBytes = atLimit  // "small" is exactly at the bound: backed up and restored
        let target = DirectoryBackupTarget(root: directory.path + "/backups", limits: limits)
        let (report, status, lines) = try Self.backUp(data, to: target)
        #expect(Set(report.written) == ["small", "other"], "\(report.failed)")
        #expect(report.tooLarge == ["big"])
        #expect(status.tooLarge == ["big"] && status.failing == ["big"])
        let line = try #require(lines.first { $0.contains("board 'big' failed") }, "\(lines)")
        #expect(line.hasPrefix("ERROR ") && line.contains("TOO LARGE TO BACK UP") && line.contains("\(big) bytes")
                && line.contains("BackupLimits.maxLogBytes"), "\(line)")
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/backups/boards/big"), "nothing of it was written")
        // Restore under the same bounds takes everything the writer wrote.
        let outcome = try BackupRestore.restore(from: target, into: directory.path + "/restored")
        #expect(Set(outcome.restored.map(\.board)) == ["small", "other"])
        #expect(outcome.restored.first { $0.board == "small" }?.operations ?? 0 >= 2)
        // The other side of the same bound: a backup made under larger bounds names a log over
        // it, and restore under these refuses it by name, changing nothing.
        let roomy = DirectoryBackupTarget(root: directory.path + "/roomy")
        let (wide, _, _) = try Self.backUp(data, to: roomy)
        #expect(Set(wide.written) == ["small", "big", "other"], "\(wide.failed)")
        let narrow = DirectoryBackupTarget(root: directory.path + "/roomy", limits: limits)
        #expect {
            try BackupRestore.restore(from: narrow, into: directory.path + "/refused")
        } throws: { error in
            "\(error)".contains("board 'big'") && "\(error)".contains("BackupLimits.maxLogBytes")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/refused/small.boardpkg"))
    }

    @Test func imagesAndManifestsHaveTheirBoundsToo() throws {
        let directory = TempDirectory()
        let data = directory.path + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try Self.board(data, "pictures", id: 1, strokes: 1, sticker: true)
        try Self.board(data, "plain", id: 2, strokes: 1)
        var images = BackupLimits()
        images.maxImageBytes = pngA.count - 1
        let (imageReport, _, imageLines) = try Self.backUp(data, to: DirectoryBackupTarget(root: directory.path + "/a", limits: images))
        #expect(imageReport.tooLarge == ["pictures"] && imageReport.written == ["plain"], "\(imageReport.failed)")
        #expect(imageLines.contains { $0.contains("TOO LARGE") && $0.contains("BackupLimits.maxImageBytes") }, "\(imageLines)")
        var manifests = BackupLimits()
        manifests.maxManifestBytes = 200  // a manifest is about 400 bytes
        let (manifestReport, _, manifestLines) = try Self.backUp(data, to: DirectoryBackupTarget(root: directory.path + "/b", limits: manifests))
        #expect(Set(manifestReport.tooLarge) == ["pictures", "plain"], "\(manifestReport.failed)")
        #expect(manifestLines.contains { $0.contains("BackupLimits.maxManifestBytes") }, "\(manifestLines)")
        var listing = BackupLimits()
        listing.maxListedKeys = 1
        let target = DirectoryBackupTarget(root: directory.path + "/c")
        _ = try Self.backUp(data, to: target)  // two boards: two manifests, two logs, an image
        #expect {
            try BackupRestore.restore(from: DirectoryBackupTarget(root: directory.path + "/c", limits: listing), into: directory.path + "/r")
        } throws: { "\($0)".contains("BackupLimits.maxListedKeys") }
    }

    /// Chunks of 7 bytes (none aligned with a record, an image or a file's end): what is
    /// copied and restored is byte for byte what was backed up.
    @Test func copiesGoAChunkAtATime() throws {
        let directory = TempDirectory()
        let data = directory.path + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try Self.board(data, "team", id: 1, strokes: 5, sticker: true)
        var limits = BackupLimits()
        limits.chunkBytes = 7
        let target = DirectoryBackupTarget(root: directory.path + "/backups", limits: limits)
        let (report, _, _) = try Self.backUp(data, to: target)
        #expect(report.written == ["team"], "\(report.failed)")
        let original = try Data(contentsOf: URL(fileURLWithPath: data + "/team.boardpkg/sync/oplog"))
        let logs = try FileManager.default.contentsOfDirectory(atPath: directory.path + "/backups/boards/team").filter { $0.hasPrefix("log-") }
        #expect(logs.count == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/backups/boards/team/" + logs[0])) == original)
        _ = try BackupRestore.restore(from: target, into: directory.path + "/restored")
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/restored/team.boardpkg/sync/oplog")) == original)
        let restored = try openPackage(directory.path + "/restored/team.boardpkg")
        defer { restored.close() }
        #expect(restored.replica.snapshot().strokes.count == 5 && restored.replica.snapshot().stickers.count == 1)
    }

    /// The streamed check reads what the whole-bytes check reads, record by record.
    @Test func theStreamedCheckAgreesWithTheWholeOne() throws {
        let directory = TempDirectory()
        try Self.board(directory.path, "team", id: 1, strokes: 6, sticker: true)
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: directory.path + "/team.boardpkg/sync/oplog")))
        var variants: [[UInt8]] = [bytes, Array(bytes.dropLast(3)), bytes + [UInt8](repeating: 0, count: 40), Array(bytes.prefix(5))]
        var flipped = bytes
        flipped[bytes.count / 2] ^= 0x10
        variants.append(flipped)
        for variant in variants {
            var reads = 0
            let streamed = OpLog.check(size: variant.count) { offset, count in
                reads += 1
                return Array(variant[offset..<(offset + count)])
            }
            #expect(streamed == OpLog.check(variant))
            #expect(reads > 2 || variant.count < 20, "read a record at a time, not whole")
        }
        #expect(OpLog.check(bytes).records == 7 && OpLog.check(bytes).damage == nil)
    }
}

final class LinesBox: @unchecked Sendable {  // appended on the loop thread, read after the run ends
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

final class SchedulerRef: @unchecked Sendable {  // the scheduler is only touched on its loop thread
    let value: BackupScheduler
    init(_ value: BackupScheduler) { self.value = value }
}
