import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import Foundation
import Testing

/// What a backup copies: the op log's durable prefix, held open so a compaction cannot change it.
@Suite struct BackupSourceTests {
    static func open(_ path: String, _ id: UInt64) throws -> BoardPackage {
        try BoardPackage.create(at: path, fileSystem: PosixFileSystem(), replicaID: ReplicaID(id))
    }

    /// Operations merged under a group commit are in the log but not yet synced: a backup
    /// point leaves them out until the sync.
    @Test func aBackupPointHoldsOnlySyncedRecords() throws {
        let directory = TempDirectory()
        let server = try Self.open(directory.path + "/server.boardpkg", 1)
        let peer = try Self.open(directory.path + "/peer.boardpkg", 2)
        try peer.commit { try $0.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 0), width: 2, points: [CodablePoint(x: 1, y: 1), CodablePoint(x: 5, y: 5)]) }
        let durable = server.backupPoint.logBytes
        #expect(durable == server.logSize)
        #expect(try server.merge(peer.replica.fullState(), deferringSync: true) == 1)
        #expect(server.logSize > durable)
        #expect(server.backupPoint.logBytes == durable, "a merge waiting for its sync is not in the point")
        try server.syncMerges()
        #expect(server.backupPoint.logBytes == server.logSize)
        let source = try BackupSource(board: "team", point: server.backupPoint, takenAt: 0)
        let check = OpLog.check(try source.readLog())
        #expect(check.damage == nil && check.tornTail == nil && check.operations == 1)
    }

    /// A source captured before a compaction reads the bytes it named, whole and clean, after
    /// the compaction renamed a new log into place.
    @Test func aSourceKeepsItsBytesThroughACompaction() throws {
        let directory = TempDirectory()
        let package = try Self.open(directory.path + "/team.boardpkg", 1)
        package.compactionRecordThreshold = 4
        let sticker = try package.commit { try $0.addSticker(imagePNG: Data(PNGEncoder.solid(width: 4, height: 4, red: 9, green: 9, blue: 9)), at: CodablePoint(x: 1, y: 1)) }.item
        for step in 0..<40 { try package.commit { try $0.move(sticker!, to: CodablePoint(x: Double(step), y: 2)) } }
        let logPath = directory.path + "/team.boardpkg/sync/oplog"
        let before = try Array(Data(contentsOf: URL(fileURLWithPath: logPath)))
        let source = try BackupSource(board: "team", point: package.backupPoint, takenAt: 0)
        #expect(source.point.logBytes == before.count)
        try package.save()  // compacts: 41 records, each move superseding the last
        #expect(package.logRecordCount == 1, "the log was compacted")
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: logPath))) != before)
        let read = try source.readLog()
        #expect(read == before)
        let check = OpLog.check(read)
        #expect(check.damage == nil && check.records == 41, "\(check)")
    }

    /// A damaged log is reported, a torn tail left out.
    @Test func checkTellsDamageFromATornTail() throws {
        let directory = TempDirectory()
        let package = try Self.open(directory.path + "/team.boardpkg", 1)
        try package.commit { try $0.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 0), width: 2, points: [CodablePoint(x: 1, y: 1)]) }
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: directory.path + "/team.boardpkg/sync/oplog")))
        let torn = OpLog.check(bytes.dropLast(3).map { $0 })
        #expect(torn.damage == nil && torn.tornTail != nil && torn.validBytes == OpLog.magic.count)
        var flipped = bytes
        flipped[bytes.count - 2] ^= 1
        #expect(OpLog.check(flipped).damage != nil)
        #expect(OpLog.check(Array("not a log at all".utf8)).damage != nil)
    }
}
