import BoardCRDT
import BoardModel
import BoardSimulation
@testable import BoardStore
import Foundation
import Testing

/// Issue 27's contract for history, beyond `HistoryTests`: an undo of a restore kept across a
/// reopen, a restore concurrent with two replicas' edits merged in both orders and held to the
/// reference model of the contract, a pruned package syncing with one that is not (and a new one
/// catching up from the pruned one), and an archive cut short inside its committed bytes.
@Suite struct HistoryContractTests {
    typealias Random = HistoryTests.Random

    /// The board `replica` shows, as the contract's reference model computes it from its
    /// surviving operations (image bytes left out).
    static func byTheContract(_ replica: Replica) throws -> Bool {
        try ContractModel.withoutImageBytes(replica.snapshot()).canonicalJSON()
            == ContractModel.board(from: replica.fullState().operations).canonicalJSON()
    }

    @Test(arguments: 1...8 as ClosedRange<UInt64>)
    func theUndoOfARestoreReturnsThePresentAfterAReopen(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        var (package, _, _) = try HistoryTests.randomHistory(seed: seed, steps: 120, fs: fs)
        defer { package.close() }
        let history = try package.history()
        var random = Random(state: seed ^ 0xAB)
        let version = history.versions[random.below(history.versions.count)]
        let present = package.replica.snapshot()
        try package.restore(to: version.vector)
        let restored = package.replica.snapshot()
        try package.save()
        package.close()
        package = try BoardPackage.open(at: "/h/board.boardpkg", fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        #expect(try HistoryTests.same(package.replica.snapshot(), restored), "seed \(seed): the restore is saved")
        _ = try package.commit { try $0.undo() }
        #expect(try HistoryTests.same(package.replica.snapshot(), present), "seed \(seed): the undo after a reopen returns the present")
        _ = try package.commit { try $0.redo() }
        #expect(try HistoryTests.same(package.replica.snapshot(), restored), "seed \(seed): redo restores again")
        // The restore, its undo and redo are versions like any edit, and the present's view is the board.
        let after = try package.history()
        #expect(after.versions.count >= history.versions.count + 3, "seed \(seed)")
        #expect(try HistoryTests.same(after.snapshot(at: after.latest), package.replica.snapshot()), "seed \(seed)")
    }

    @Test(arguments: 1...12 as ClosedRange<UInt64>)
    func aRestoreConcurrentWithTwoReplicasEditsConvergesByTheContractInEitherOrder(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        let (package, _, peers) = try HistoryTests.randomHistory(seed: seed, steps: 100, fs: fs)
        defer { package.close() }
        var first = peers[0], second = peers[1]
        // Everyone up to date, then all three act without hearing of each other.
        for index in 0..<2 {
            let peer = index == 0 ? first : second
            _ = try package.merging(peer.operations(since: package.replica.versionVector), deferringSync: false)
        }
        try first.apply(package.replica.operations(since: first.versionVector))
        try second.apply(package.replica.operations(since: second.versionVector))
        var random = Random(state: seed ^ 0xC0)
        let history = try package.history()
        let target = history.versions[random.below(history.versions.count)].vector
        try package.restore(to: target)
        for _ in 0..<4 {
            _ = try HistoryTests.edit(&first, &random)
            _ = try HistoryTests.edit(&second, &random)
        }
        var restorer = package.replica
        // One order: the restorer hears the first peer, then the second; the first hears the
        // second, then the restorer; the second hears the restorer, then the first.
        try restorer.apply(first.operations(since: restorer.versionVector))
        try restorer.apply(second.operations(since: restorer.versionVector))
        var one = first, two = second
        try one.apply(second.operations(since: one.versionVector))
        try one.apply(package.replica.operations(since: one.versionVector))
        try two.apply(package.replica.operations(since: two.versionVector))
        try two.apply(first.operations(since: two.versionVector))
        // The other order, through the package itself (saved, then reopened).
        _ = try package.merging(second.operations(since: package.replica.versionVector), deferringSync: false)
        _ = try package.merging(first.operations(since: package.replica.versionVector), deferringSync: false)
        let expected = restorer.snapshot()
        for (name, replica) in [("restorer", restorer), ("first", one), ("second", two), ("package", package.replica)] {
            #expect(try HistoryTests.same(replica.snapshot(), expected), "seed \(seed): \(name) converged")
            #expect(try Self.byTheContract(replica), "seed \(seed): \(name) by the contract's reference model")
        }
        let history2 = try package.history()
        #expect(try HistoryTests.same(history2.snapshot(at: history2.latest), expected), "seed \(seed): the history's present")
    }

    @Test(arguments: 1...8 as ClosedRange<UInt64>)
    func aPrunedPackageSyncsWithOneThatIsNotAndANewOneCatchesUpFromIt(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        let (pruned, _, _) = try HistoryTests.randomHistory(seed: seed, steps: 120, fs: fs, path: "/h/a.boardpkg")
        defer { pruned.close() }
        let whole = try BoardPackage.create(at: "/h/b.boardpkg", fileSystem: fs, replicaID: ReplicaID(0xB0B))
        defer { whole.close() }
        whole.checkpointInterval = 5
        for image in HistoryTests.images { try whole.addAsset(image) }
        func sync() throws {
            _ = try whole.merging(pruned.replica.operations(since: whole.replica.versionVector), deferringSync: false)
            _ = try pruned.merging(whole.replica.operations(since: pruned.replica.versionVector), deferringSync: false)
        }
        try sync()
        var random = Random(state: seed ^ 0x9A)
        // Both edit and sync a while; the horizon is then past the versions both had before.
        for _ in 0..<3 {
            _ = try pruned.commit { try HistoryTests.edit(&$0, &random) }
            _ = try whole.commit { try HistoryTests.edit(&$0, &random) }
            try sync()
        }
        let horizon = try pruned.history().latest
        try pruned.pruneHistory(before: horizon)
        for round in 0..<6 {
            _ = try pruned.commit { try HistoryTests.edit(&$0, &random) }
            _ = try whole.commit { try HistoryTests.edit(&$0, &random) }
            if round % 2 == 1 { try pruned.compactLog(); try whole.compactLog() }
            if round % 3 != 2 { try sync() }
        }
        try sync()
        #expect(try HistoryTests.same(pruned.replica.snapshot(), whole.replica.snapshot()), "seed \(seed): both converge")
        #expect(try Self.byTheContract(pruned.replica), "seed \(seed)")
        let prunedHistory = try pruned.history(), wholeHistory = try whole.history()
        #expect(prunedHistory.horizon == horizon, "seed \(seed): the pruned package keeps its horizon")
        #expect(wholeHistory.horizon == nil && wholeHistory.versions.first.map { !$0.vector.dominates(horizon) } == true,
                "seed \(seed): the other keeps the versions before it")
        #expect(try HistoryTests.same(prunedHistory.snapshot(at: prunedHistory.latest), pruned.replica.snapshot()), "seed \(seed)")
        #expect(try HistoryTests.same(wholeHistory.snapshot(at: wholeHistory.latest), whole.replica.snapshot()), "seed \(seed)")
        // A package behind the horizon (it has nothing) catches up from the pruned one.
        let late = try BoardPackage.create(at: "/h/c.boardpkg", fileSystem: fs, replicaID: ReplicaID(0xC0C))
        defer { late.close() }
        _ = try late.merging(pruned.replica.operations(since: late.replica.versionVector), deferringSync: false)
        #expect(late.replica.versionVector == pruned.replica.versionVector, "seed \(seed): the late package catches up")
        #expect(try ContractModel.withoutImageBytes(late.replica.snapshot()).canonicalJSON()
                == ContractModel.withoutImageBytes(pruned.replica.snapshot()).canonicalJSON(), "seed \(seed)")
    }

    /// Builds a package whose archive holds several records; returns its path and the archive's records.
    static func archived(_ fs: MemoryFileSystem) throws -> (path: String, records: [HistoryArchive.Record], items: Int) {
        try fs.createDirectories("/h")
        let path = "/h/b.boardpkg"
        let package = try BoardPackage.create(at: path, fileSystem: fs, replicaID: ReplicaID(0xA))
        defer { package.close() }
        package.checkpointInterval = 4
        for round in 0..<3 {
            for index in 0..<3 { _ = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(Double(round * 10 + index), 5)) } }
            try package.compactLog()
        }
        let records = HistoryArchive.parse(try fs.readFile(path + "/" + PackageLayout.history)).records
        return (path, records, package.replica.itemIDs.count)
    }

    @Test(arguments: [0, 1, 7, 20])
    func anArchiveCutShortInsideItsCommittedRecordsIsReportedAndRepaired(cutInto: Int) throws {
        let fs = MemoryFileSystem()
        let (path, records, items) = try Self.archived(fs)
        let archive = path + "/" + PackageLayout.history
        let last = records[records.count - 1]
        let size = try fs.fileSize(archive)!
        // Cut inside the last record (which a finished compaction wrote and the index names).
        let cut = last.offset + 1 + cutInto
        #expect(cut < size)
        try fs.truncateFile(archive, to: cut)
        var package = try BoardPackage.open(at: path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        var error: StoreError?
        do { _ = try package.history() } catch let caught as StoreError { error = caught }
        #expect(error?.code == .damagedFile && error?.path == archive && error?.offset == last.offset, "cut at \(cut): \(String(describing: error))")
        #expect(error.map { "\($0)".contains("board-sync repair") } == true)
        #expect(throws: StoreError.self) { try BoardHistory.readChecked(package: path, fileSystem: fs) }
        #expect(package.replica.itemIDs.count == items, "the live board does not depend on the archive")
        package.close()
        let report = try BoardPackage.repair(at: path, fileSystem: fs, newReplicaID: { ReplicaID(0xBEEF) })
        #expect(report.damagedArchiveCopy == archive + ".damaged")
        #expect(report.archiveDropped.first?.offset == last.offset)
        #expect(report.newReplica == nil)
        package = try BoardPackage.open(at: path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        defer { package.close() }
        let history = try package.history()
        #expect(history.latest == package.replica.versionVector)
        #expect(try HistoryTests.same(history.snapshot(at: history.latest), package.replica.snapshot()))
        // Compaction goes on after the repair.
        _ = try package.commit { try $0.setCanvasSize(CodableSize(width: 640, height: 480)) }
        try package.compactLog()
        #expect(try package.history().latest == package.replica.versionVector)
    }

    @Test func anArchiveCutAtARecordBoundaryIsTakenForAnUnfinishedPrune() throws {
        // The limit of the check: a prune or repair that crashed between rewriting the archive
        // and its index leaves whole records shorter than the committed size, as this cut does.
        let fs = MemoryFileSystem()
        let (path, records, _) = try Self.archived(fs)
        try fs.truncateFile(path + "/" + PackageLayout.history, to: records[records.count - 1].offset)
        let package = try BoardPackage.open(at: path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        defer { package.close() }
        let history = try package.history()
        #expect(history.latest == package.replica.versionVector, "the log's state still holds every operation")
    }
}
