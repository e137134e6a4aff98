import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Foundation
import Testing

@Suite struct BoardPackageTests {
    static let root = "/boards/Test.boardpkg"

    @Test func reopeningRestoresEveryOperationUndoAndAssets() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, sticker, _, _) = try makeSamplePackage(fs, ids: ids)
        try package.commit { try $0.move(sticker, to: pt(70, 80)) }
        try package.save()
        let expected = try package.replica.snapshot().canonicalJSON()
        let vector = package.replica.versionVector
        package.close()
        let reopened = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
        #expect(reopened.notices.isEmpty, "\(reopened.notices)")
        #expect(reopened.replica.id == package.replica.id)
        #expect(reopened.replica.versionVector == vector)
        #expect(try reopened.replica.snapshot().canonicalJSON() == expected)
        // Undo works across the reopen: the move is undone first.
        try reopened.commit { try $0.undo() }
        #expect(reopened.replica.snapshot().stickers.first { $0.id == sticker.uuid }?.position == pt(10, 10))
    }

    @Test func aSecondOpenOfAnOpenPackageIsRefused() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, _, _, _) = try makeSamplePackage(fs, ids: ids)
        #expect(throws: StoreError.locked(path: Self.root)) {
            try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
        }
        package.close()
        _ = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
    }

    @Test func aCopiedPackageOpenedBesideItsOriginalGetsANewReplicaID() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, _, _, _) = try makeSamplePackage(fs, ids: ids)
        let original = package.replica.id
        package.close()
        fs.copyTree(Self.root, to: "/boards/Copy.boardpkg")
        let copy = try BoardPackage.open(at: "/boards/Copy.boardpkg", fileSystem: fs, newReplicaID: ids.make)
        let again = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
        #expect(again.replica.id == original)
        #expect(copy.replica.id != original)
        #expect(copy.notices.contains { $0.contains("copy") })
        #expect(try copy.replica.snapshot().canonicalJSON() == again.replica.snapshot().canonicalJSON())
        // Edits on both never collide: their op ids differ.
        let a = try copy.commit { try $0.setBackground(asset: nil) }.operations[0].id
        let b = try again.commit { try $0.setBackground(asset: nil) }.operations[0].id
        #expect(a != b)
        // The copy's id is remembered: reopening it keeps the new id.
        copy.close()
        let copyAgain = try BoardPackage.open(at: "/boards/Copy.boardpkg", fileSystem: fs, newReplicaID: ids.make)
        #expect(copyAgain.replica.id == copy.replica.id)
    }

    @Test func theViewIsRebuiltFromTheLogWhenMissingOrOlder() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, sticker, _, _) = try makeSamplePackage(fs, ids: ids)
        // Saved to the log but never to the view (the process stopped before a save).
        try package.commit { try $0.move(sticker, to: pt(1, 2)) }
        package.close()
        try fs.removeFile("\(Self.root)/background.png")
        let reopened = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
        #expect(reopened.notices.contains { $0.contains("rebuilt") })
        let manifest = try PackageReader(fileSystem: fs).read(Self.root)
        #expect(manifest.stickers.first { $0.id == sticker.uuid }?.position == pt(1, 2))
        #expect(manifest.backgroundPNG == pngGreen)
    }

    @Test func aPackageWithoutSyncDataIsImportedKeepingItemIDs() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectories("/boards/Seed.boardpkg/stickers")
        let strokeID = UUID(uuidString: "8B3E1F0A-0000-4000-8000-000000000001")!
        let stickerID = UUID(uuidString: "A573B5D1-0000-4000-8000-000000000002")!
        let seedManifest = """
        {"schemaVersion":1,"canvasSize":{"width":800,"height":600},
         "strokes":[{"id":"\(strokeID.uuidString)","color":{"red":1,"green":0,"blue":0,"alpha":1},"width":3,
                     "points":[{"x":1,"y":2},{"x":3,"y":4}]}],
         "stickers":[{"id":"\(stickerID.uuidString)","imagePNG":"","position":{"x":40,"y":50},"scale":2,"rotationRadians":0.5}]}
        """
        try fs.writeFile("/boards/Seed.boardpkg/manifest.json", Array(seedManifest.utf8))
        try fs.writeFile("/boards/Seed.boardpkg/stickers/\(stickerID.uuidString).png", Array(pngBlue))
        let package = try BoardPackage.open(at: "/boards/Seed.boardpkg", fileSystem: fs, newReplicaID: IDSource().make)
        let board = package.replica.snapshot()
        #expect(board.canvasSize == CodableSize(width: 800, height: 600))
        #expect(board.strokes.map(\.id) == [strokeID])
        #expect(board.strokes[0].points == [pt(1, 2), pt(3, 4)])
        #expect(board.stickers.map(\.id) == [stickerID])
        #expect(board.stickers[0].imagePNG == pngBlue)
        #expect(board.stickers[0].scale == 2)
        #expect(board.paintOrder == [strokeID, stickerID])
        #expect(fs.isDirectory("/boards/Seed.boardpkg/sync"))
    }

    /// A commit rolls back in place (no copy of the replica): a full disk failing the log
    /// append, or the image file, leaves the replica as it was, undo history included, and the
    /// same edit then commits with the next sequence number as if the failure never happened.
    @Test func aCommitFailingOnAFullDiskChangesNothingAndTheSameEditThenCommits() throws {
        struct Seen: Equatable {
            let state: OperationBatch, board: Data, undo: UndoHistory, lastSeq: UInt64, assets: [AssetHash]
            init(_ replica: Replica) throws {
                state = replica.fullState(); board = try replica.snapshot().canonicalJSON()
                undo = replica.undoHistory; lastSeq = replica.lastSeq; assets = replica.assets.hashes
            }
        }
        let edits: [(String, (inout Replica, ItemID) throws -> LocalEdit)] = [
            ("a drag and a delete (the log append fails)", { replica, sticker in
                replica.beginUndoGroup()
                defer { replica.endUndoGroup() }
                var made = try replica.move(sticker, to: pt(20, 20)).operations
                made += try replica.move(sticker, to: pt(30, 30)).operations
                made += try replica.delete(sticker).operations
                return LocalEdit(operations: made)
            }),
            ("a sticker with a new image (the image file fails)", { replica, _ in
                try replica.addSticker(imagePNG: pngGreen, at: pt(7, 7))
            }),
        ]
        for (name, edit) in edits {
            let fs = MemoryFileSystem()
            try fs.createDirectory("/boards")
            let ids = IDSource()
            let (package, sticker, _, _) = try makeSamplePackage(fs, ids: ids)
            let before = try Seen(package.replica)
            let files = try fs.listDirectory("\(Self.root)/sync/assets")
            fs.setCapacity(0)
            #expect(throws: FileSystemError.self, "\(name)") { try package.commit { try edit(&$0, sticker) } }
            #expect(try Seen(package.replica) == before, "\(name)")
            #expect(try fs.listDirectory("\(Self.root)/sync/assets") == files, "\(name)")
            fs.setCapacity(nil)
            let made = try package.commit { try edit(&$0, sticker) }
            #expect(made.operations.first?.id.seq == before.lastSeq + 1, "\(name)")
            // Undo takes back exactly the committed edit.
            try package.commit { try $0.undo() }
            #expect(try package.replica.snapshot().canonicalJSON() == before.board, "\(name)")
            let version = package.replica.versionVector
            package.close()
            let reopened = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
            #expect(reopened.replica.versionVector == version, "\(name)")
            #expect(try reopened.replica.snapshot().canonicalJSON() == before.board, "\(name)")
            reopened.close()
        }
    }

    @Test func tornLastLogRecordIsCutAndEarlierRecordsKept() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, sticker, _, _) = try makeSamplePackage(fs, ids: ids)
        let saved = package.replica.versionVector
        // The next commit's append is torn by a power loss.
        fs.crash(atStep: 1, tornWrite: true)
        #expect(throws: FileSystemError.self) { try package.commit { try $0.move(sticker, to: pt(5, 5)) } }
        fs.restart(.processCrash)
        package.close()
        let reopened = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
        #expect(reopened.notices.contains { $0.contains("torn") })
        #expect(reopened.replica.versionVector == saved)
    }

    @Test func aBitFlipInsideTheLogIsAClearErrorThatChangesNothing() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, _, _, _) = try makeSamplePackage(fs, ids: ids)
        package.close()
        let logPath = "\(Self.root)/sync/oplog"
        let before = try fs.readFile(logPath)
        fs.corrupt(logPath) { bytes in var b = bytes; b[20] ^= 0x04; return b }
        let damaged = try fs.readFile(logPath)
        do {
            _ = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
            Issue.record("a damaged log opened")
        } catch let error as StoreError {
            guard error.code == .damagedLog else { Issue.record("unexpected \(error)"); return }
            #expect(error.description.contains("oplog"))
        }
        #expect(try fs.readFile(logPath) == damaged, "the damaged log is left as it was")
        #expect(before != damaged)
    }

    @Test(arguments: [0, 3, 7, 8, 9, 15])
    func truncatedLogsRecoverToTheirCompleteRecords(keep: Int) throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, _, _, _) = try makeSamplePackage(fs, ids: ids)
        package.close()
        let logPath = "\(Self.root)/sync/oplog"
        let full = try fs.readFile(logPath)
        fs.corrupt(logPath) { Array($0.prefix(keep)) }
        let manifest = try fs.readFile("\(Self.root)/manifest.json")
        // The view shows operations the cut log lost: opening refuses instead of rewriting the
        // manifest as an empty board (issue 7, finding 8).
        #expect {
            _ = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
        } throws: { error in
            (error as? StoreError)?.code == .viewAheadOfLog
        }
        #expect(try fs.readFile("\(Self.root)/manifest.json") == manifest)
        // repair keeps a copy of the view, then the package opens with what the log holds.
        let report = try BoardPackage.repair(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
        #expect(report.viewCopy != nil)
        #expect(try fs.readFile(report.viewCopy! + "/manifest.json") == manifest)
        #expect(report.missingItems.count == 3, "the sample's items are named as missing")
        let reopened = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
        #expect(reopened.replica.storedOperationCount == 0, "no complete record survives \(keep) of \(full.count) bytes")
        #expect(reopened.replica.id == report.newReplica)
    }

    @Test func aDamagedManifestIsRebuiltFromTheLog() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, _, _, _) = try makeSamplePackage(fs, ids: ids)
        let expected = try package.replica.snapshot().canonicalJSON()
        package.close()
        fs.corrupt("\(Self.root)/manifest.json") { Array($0.prefix($0.count / 2)) }
        #expect(throws: StoreError.self) { try PackageReader(fileSystem: fs).read(Self.root) }
        fs.corrupt("\(Self.root)/sync/view.json") { _ in [] }
        let reopened = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
        #expect(try reopened.replica.snapshot().canonicalJSON() == expected)
        _ = try PackageReader(fileSystem: fs).read(Self.root)
    }

    @Test func compactionKeepsTheStateAndShrinksTheLog() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, sticker, _, _) = try makeSamplePackage(fs, ids: ids)
        package.compactionRecordThreshold = 50
        for x in 0..<200 { try package.commit { try $0.move(sticker, to: pt(Double(x), 0)) } }
        let before = package.logSize
        try package.save()
        #expect(package.logRecordCount == 1)
        #expect(package.logSize < before / 4)
        let expected = try package.replica.snapshot().canonicalJSON()
        let vector = package.replica.versionVector
        package.close()
        let reopened = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
        #expect(try reopened.replica.snapshot().canonicalJSON() == expected)
        #expect(reopened.replica.versionVector == vector)
    }

    @Test func coalescedSavesWaitForAPauseButNeverLongerThanTheMaximum() {
        var scheduler = SaveScheduler(quietPeriod: 0.25, maxDelay: 1.0)
        #expect(scheduler.deadline == nil)
        // 1,000 edits over one second: one every millisecond.
        var saves = 0
        for index in 0..<1000 {
            let now = Double(index) / 1000
            scheduler.noteChange(now: now)
            if scheduler.isDue(now: now) { saves += 1; scheduler.didSave() }
        }
        #expect(saves == 0, "continuous edits: the first forced save comes at 1 s")
        #expect(scheduler.deadline == 1.0)
        #expect(scheduler.isDue(now: 1.0))
        scheduler.didSave()
        scheduler.noteChange(now: 2.0)
        #expect(scheduler.deadline == 2.25)
    }
}
