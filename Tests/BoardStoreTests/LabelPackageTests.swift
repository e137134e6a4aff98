import BoardCRDT
import BoardModel
@testable import BoardStore
import Foundation
import Testing

/// Named versions in a package: a label is an operation in the op log, so it survives a crash,
/// compaction (the full state holds the winning write), a repair (a log record) and a reopen,
/// and its history shows it.
@Suite struct LabelPackageTests {
    static let path = "/l/board.boardpkg"

    static func labelled(_ fs: MemoryFileSystem) throws -> (BoardPackage, LabelID, VersionVector) {
        try fs.createDirectories("/l")
        let package = try BoardPackage.create(at: path, fileSystem: fs, replicaID: ReplicaID(0xA))
        _ = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(5, 5)) }
        _ = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(15, 5)) }
        let version = package.replica.versionVector
        let edit = try package.commit { try $0.setLabel(text: "two stickers", version: version, time: 1_234) }
        guard case .setLabel(let id, _)? = edit.operations.first?.payload else { throw Failure("no label operation") }
        return (package, id, version)
    }

    struct Failure: Error { let message: String; init(_ message: String) { self.message = message } }

    func expectLabel(_ package: BoardPackage, _ id: LabelID, _ version: VersionVector, text: String = "two stickers", _ context: String) throws {
        #expect(package.replica.labels.map(\.id) == [id], "\(context)")
        #expect(package.replica.label(id)?.text == text && package.replica.label(id)?.version == version, "\(context)")
        let history = try package.history()
        #expect(history.labels.map(\.text) == [text], "\(context): the history shows it")
        #expect(history.versionNumber(of: version) != nil, "\(context): it names a version of the history")
    }

    @Test func aLabelSurvivesCompactionReopenAndRenames() throws {
        let fs = MemoryFileSystem()
        var (package, id, version) = try Self.labelled(fs)
        let board = package.replica.snapshot()
        try package.compactLog()
        try expectLabel(package, id, version, "after a compaction")
        package.close()
        package = try BoardPackage.open(at: Self.path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        try expectLabel(package, id, version, "after a reopen")
        #expect(try HistoryTests.same(package.replica.snapshot(), board), "a label changes nothing on the board")
        _ = try package.commit { try $0.renameLabel(id, to: "renamed", time: 5) }
        try package.compactLog()
        package.close()
        package = try BoardPackage.open(at: Self.path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        defer { package.close() }
        try expectLabel(package, id, version, text: "renamed", "a rename after compaction and reopen")
        // The history holds both writes (the log of every operation).
        #expect(try package.history().operationLog.filter { if case .setLabel = $0.operation.payload { true } else { false } }.count == 2)
    }

    @Test func aLabelSurvivesACrashAtEveryStepOfACompaction() throws {
        for (kind, torn, name) in CrashTests.kinds {
            var step = 1
            while step < 200 {
                let fs = MemoryFileSystem()
                let (package, id, version) = try Self.labelled(fs)
                fs.crash(atStep: step, tornWrite: torn)
                var completed = true
                do { try package.compactLog() } catch let error as FileSystemError where error.code == .crashed { completed = false }
                fs.restart(kind)
                package.close()
                let reopened = try BoardPackage.open(at: Self.path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
                #expect(reopened.replica.label(id)?.version == version, "\(name), crash at step \(step)")
                #expect(reopened.replica.label(id)?.text == "two stickers", "\(name), crash at step \(step)")
                reopened.close()
                if completed { break }
                step += 1
            }
        }
    }

    @Test func aLabelSurvivesARepairOfALaterDamagedRecord() throws {
        let fs = MemoryFileSystem()
        var (package, id, version) = try Self.labelled(fs)
        let logPath = Self.path + "/" + PackageLayout.opLog
        let before = try fs.readFile(logPath).count
        _ = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(25, 5)) }
        package.close()
        // Damage the record written after the label's.
        var bytes = try fs.readFile(logPath)
        bytes[before + 12] ^= 0xFF
        try fs.writeFile(logPath, bytes)
        _ = try BoardPackage.repair(at: Self.path, fileSystem: fs, newReplicaID: { ReplicaID(0xBEEF) })
        package = try BoardPackage.open(at: Self.path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        defer { package.close() }
        #expect(package.replica.label(id)?.version == version, "the label's record checks out: kept")
        #expect(package.replica.itemIDs.count == 2, "the damaged record's sticker is gone")
        #expect(try package.history().labels.map(\.id) == [id])
    }

    @Test func aDeletedLabelStaysDeletedThroughCompaction() throws {
        let fs = MemoryFileSystem()
        var (package, id, _) = try Self.labelled(fs)
        _ = try package.commit { try $0.removeLabel(id) }
        try package.compactLog()
        package.close()
        package = try BoardPackage.open(at: Self.path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        defer { package.close() }
        #expect(package.replica.labels.isEmpty && package.replica.labelRegisterCount == 1)
        #expect(try package.history().labels.isEmpty)
    }
}
