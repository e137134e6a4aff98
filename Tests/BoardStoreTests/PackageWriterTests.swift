import BoardCRDT
import BoardModel
import BoardStore
import Foundation
import Testing

/// The writer's work, counted through the file-system seam.
@Suite struct PackageWriterTests {
    static let root = "/boards/Test.boardpkg"

    func writes(_ fs: MemoryFileSystem) -> [String] {
        fs.journal.filter { $0.operation == .rename }.map { $0.path }
    }

    func pngWrites(_ fs: MemoryFileSystem) -> [String] {
        fs.journal.filter { $0.operation == .write && $0.path.hasSuffix(".png.tmp") }.map(\.path)
    }

    @Test func aStickerMoveRewritesTheManifestAndNoImage() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let (package, sticker, _, _) = try makeSamplePackage(fs, ids: IDSource())
        fs.resetJournal()
        try package.commit { try $0.move(sticker, to: pt(99, 99)) }
        let report = try package.save()
        #expect(pngWrites(fs).isEmpty, "no image file written: \(fs.journal)")
        #expect(report.written == [PackageLayout.manifest])
        #expect(report.removed.isEmpty)
        #expect(writes(fs).contains { $0.hasSuffix("manifest.json.tmp") })
    }

    @Test func aSaveFsyncsOnlyTheFoldersWhoseEntriesItChanged() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let (package, sticker, _, _) = try makeSamplePackage(fs, ids: IDSource())
        func syncedDirectories() -> [String] { fs.journal.filter { $0.operation == .syncDirectory }.map(\.path) }
        // A move: the manifest's rename (the package folder), then sync/ for undo.bin (a local
        // edit changed the history) and view.json; nothing else.
        fs.resetJournal()
        try package.commit { try $0.move(sticker, to: pt(99, 99)) }
        try package.save()
        #expect(syncedDirectories() == [Self.root, "\(Self.root)/sync", "\(Self.root)/sync"], "\(fs.journal)")
        // A new image: the stickers folder too, after its rename.
        fs.resetJournal()
        try package.commit { try $0.replaceImage(sticker, withPNG: pngGreen) }
        try package.save()
        #expect(syncedDirectories() == [Self.root, "\(Self.root)/stickers", "\(Self.root)/sync", "\(Self.root)/sync"], "\(fs.journal)")
        // A deleted sticker: its file's removal is made durable.
        fs.resetJournal()
        try package.commit { try $0.delete(sticker) }
        try package.save()
        #expect(syncedDirectories() == [Self.root, "\(Self.root)/stickers", "\(Self.root)/sync", "\(Self.root)/sync"], "\(fs.journal)")
        #expect(!fs.exists("\(Self.root)/stickers/\(sticker.uuid.uuidString).png"))
    }

    @Test func replacingOneStickerImageRewritesOneFile() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let (package, sticker, _, _) = try makeSamplePackage(fs, ids: IDSource())
        fs.resetJournal()
        try package.commit { try $0.replaceImage(sticker, withPNG: pngGreen) }
        let report = try package.save()
        #expect(report.written == [PackageLayout.manifest, PackageLayout.stickerFile(sticker.uuid)])
        #expect(pngWrites(fs) == ["\(Self.root)/stickers/.\(sticker.uuid.uuidString).png.tmp"])
        #expect(try fs.readFile("\(Self.root)/\(PackageLayout.stickerFile(sticker.uuid))") == Array(pngGreen))
    }

    @Test func deletingAStickerRemovesOneFile() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let (package, sticker, other, _) = try makeSamplePackage(fs, ids: IDSource())
        fs.resetJournal()
        try package.commit { try $0.delete(sticker) }
        let report = try package.save()
        #expect(report.removed == [PackageLayout.stickerFile(sticker.uuid)])
        #expect(pngWrites(fs).isEmpty)
        #expect(try fs.fileSize("\(Self.root)/\(PackageLayout.stickerFile(sticker.uuid))") == nil)
        #expect(try fs.fileSize("\(Self.root)/\(PackageLayout.stickerFile(other.uuid))") == pngBlue.count)
        // Restoring brings the file back from the package's own asset store.
        try package.commit { try $0.restore(sticker) }
        let restored = try package.save()
        #expect(restored.written.contains(PackageLayout.stickerFile(sticker.uuid)))
    }

    @Test func aDeletedOrTruncatedAssetFileIsRewrittenOnTheNextSave() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let (package, sticker, other, _) = try makeSamplePackage(fs, ids: IDSource())
        try fs.removeFile("\(Self.root)/\(PackageLayout.stickerFile(sticker.uuid))")
        fs.corrupt("\(Self.root)/\(PackageLayout.stickerFile(other.uuid))") { Array($0.prefix(10)) }
        fs.resetJournal()
        let report = try package.save()
        #expect(Set(report.written) == [PackageLayout.manifest, PackageLayout.stickerFile(sticker.uuid), PackageLayout.stickerFile(other.uuid)])
        #expect(try fs.readFile("\(Self.root)/\(PackageLayout.stickerFile(other.uuid))") == Array(pngBlue))
    }

    @Test func staleFilesAreRemovedAndPendingImagesNeverWrittenEmpty() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let (package, _, _, _) = try makeSamplePackage(fs, ids: IDSource())
        try fs.writeFile("\(Self.root)/stickers/leftover.png", [1, 2, 3])
        try fs.writeFile("\(Self.root)/stickers/.half.png.tmp", [1])
        // A sticker whose bytes have not arrived (added by hash only).
        let missing = AssetHash.of(Array("not here".utf8))
        let pending = try package.commit { try $0.addSticker(asset: missing, at: pt(1, 1)) }.item!
        let report = try package.save()
        #expect(Set(report.removed) == ["stickers/leftover.png", "stickers/.half.png.tmp"])
        #expect(report.pending == [PackageLayout.stickerFile(pending.uuid)])
        #expect(try fs.fileSize("\(Self.root)/\(PackageLayout.stickerFile(pending.uuid))") == nil)
        // The manifest lists it as pending, outside the seed's `stickers` array.
        let manifest = try JSONSerialization.jsonObject(with: Data(fs.readFile("\(Self.root)/manifest.json"))) as! [String: Any]
        let pendingList = manifest["pendingStickers"] as? [[String: Any]]
        #expect(pendingList?.first?["id"] as? String == pending.uuid.uuidString)
        #expect((manifest["stickers"] as? [[String: Any]])?.count == 2)
    }

    @Test func progressIsReportedPerPhase() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let (package, _, _, _) = try makeSamplePackage(fs, ids: IDSource())
        var phases: [PackageWriter.Phase] = []
        try package.save { progress in
            if phases.last != progress.phase { phases.append(progress.phase) }
        }
        #expect(phases == [.manifest, .background, .stickers])
    }

    @Test func manifestDecodesWithASeedOnlyDecoderAndMatchesTheSnapshot() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let (package, _, _, stroke) = try makeSamplePackage(fs, ids: IDSource())
        let bytes = try fs.readFile("\(Self.root)/manifest.json")
        let seed = try JSONDecoder().decode(SeedBoardSnapshot.self, from: Data(bytes))
        let board = package.replica.snapshot()
        #expect(seed.strokes.map(\.id) == [stroke.uuid])
        #expect(seed.strokes[0].points.map(\.x) == board.strokes[0].points.map(\.x))
        #expect(seed.stickers.map(\.id) == board.stickers.map(\.id))
        #expect(seed.stickers.allSatisfy { $0.imagePNG.isEmpty })
        #expect(seed.backgroundPNG == nil)
        // And with ours, field for field (bytes aside).
        let ours = try JSONDecoder().decode(BoardSnapshot.self, from: Data(bytes))
        var expected = board
        expected.backgroundPNG = nil
        for index in expected.stickers.indices { expected.stickers[index].imagePNG = Data() }
        #expect(ours == expected)
    }
}
