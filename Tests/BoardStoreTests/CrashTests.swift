import BoardCRDT
import BoardModel
import BoardStore
import Foundation
import Testing

/// Crash at every write step of an edit and a save, through the file-system seam, then reopen.
@Suite struct CrashTests {
    static let root = "/boards/Test.boardpkg"

    /// The package the crash lands on: saved state plus one committed (so saved) but unsaved-view
    /// edit, then the work of `work` which the crash interrupts.
    static func scenario(crashAt step: Int, kind: MemoryFileSystem.CrashKind, torn: Bool,
                         work: (BoardPackage, ItemID, ItemID) throws -> Void) throws -> (MemoryFileSystem, VersionVector, Bool) {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, sticker, other, _) = try makeSamplePackage(fs, ids: ids)
        try package.commit { try $0.move(sticker, to: pt(33, 44)) }
        let saved = package.replica.versionVector
        fs.crash(atStep: step, tornWrite: torn)
        var completed = true
        do {
            try work(package, sticker, other)
        } catch let error as FileSystemError where error.code == .crashed {
            completed = false
        }
        fs.restart(kind)
        package.close()
        return (fs, saved, completed)
    }

    static func checkNoHalfWrittenFiles(_ fs: MemoryFileSystem, _ context: String) throws {
        if let manifest = try? fs.readFile("\(root)/manifest.json") {
            #expect((try? JSONDecoder().decode(BoardSnapshot.self, from: Data(manifest))) != nil, "manifest half-written: \(context)")
        }
        if let background = try? fs.readFile("\(root)/background.png") {
            #expect((try? PNGHeader(validating: background)) != nil, "background half-written: \(context)")
        }
        for name in try fs.listDirectory("\(root)/stickers") where !name.hasPrefix(".") {
            let bytes = try fs.readFile("\(root)/stickers/\(name)")
            #expect((try? PNGHeader(validating: bytes)) != nil, "\(name) half-written: \(context)")
        }
        for name in try fs.listDirectory("\(root)/sync/assets") where !name.hasPrefix(".") {
            let bytes = try fs.readFile("\(root)/sync/assets/\(name)")
            #expect(AssetHash.of(bytes).hex == name, "asset \(name) half-written: \(context)")
        }
    }

    static let kinds: [(MemoryFileSystem.CrashKind, Bool, String)] = [
        (.processCrash, false, "process crash"),
        (.powerLoss(tornTail: false), false, "power loss"),
        (.powerLoss(tornTail: true), true, "power loss, torn writes"),
    ]

    @Test func aCrashAtEveryStepOfASaveLosesNothingSaved() throws {
        for (kind, torn, name) in Self.kinds {
            var step = 1
            while true {
                let (fs, saved, completed) = try Self.scenario(crashAt: step, kind: kind, torn: torn) { package, sticker, other in
                    // A save that rewrites the manifest and an image and removes another image.
                    try package.commit { try $0.replaceImage(sticker, withPNG: pngBlue) }
                    try package.commit { try $0.delete(other) }
                    try package.save()
                }
                let context = "\(name), crash at step \(step)"
                try Self.checkNoHalfWrittenFiles(fs, "\(context)")
                let reopened = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: IDSource(start: 0x9000).make)
                #expect(reopened.replica.versionVector.dominates(saved), "lost saved operations: \(context)")
                // After opening, the view matches the log exactly.
                let view = try PackageReader(fileSystem: fs).read(Self.root)
                let expected = reopened.replica.snapshot()
                #expect(view.stickers.map(\.id) == expected.stickers.map(\.id), "\(context)")
                #expect(view.stickers.map(\.imagePNG) == expected.stickers.map(\.imagePNG), "\(context)")
                #expect(view.stickers.map(\.position) == expected.stickers.map(\.position), "\(context)")
                try Self.checkNoHalfWrittenFiles(fs, context + " after reopen")
                if completed { break }
                step += 1
            }
            #expect(step > 10, "the save had \(step) steps")
        }
    }

    @Test func anEditIsSavedExactlyWhenCommitReturns() throws {
        for (kind, torn, name) in Self.kinds {
            var step = 1
            while true {
                var committed = false
                var target: VersionVector?
                let (fs, saved, completed) = try Self.scenario(crashAt: step, kind: kind, torn: torn) { package, sticker, _ in
                    try package.commit { try $0.addSticker(imagePNG: pngGreen, at: pt(7, 7)) }
                    committed = true
                    target = package.replica.versionVector
                }
                let reopened = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: IDSource(start: 0x9000).make)
                let context = "\(name), crash at step \(step)"
                #expect(reopened.replica.versionVector.dominates(saved), "\(context)")
                if committed, let target {
                    #expect(reopened.replica.versionVector.dominates(target), "a committed edit was lost: \(context)")
                    #expect(reopened.replica.missingAssets.isEmpty, "a committed edit's image was lost: \(context)")
                }
                if completed { break }
                step += 1
            }
        }
    }
}
