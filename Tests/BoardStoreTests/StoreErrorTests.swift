import BoardCRDT
import BoardStore
import BoardSync
import Foundation
import Testing

/// `StoreError` is a value with a kind, a path, words and the error underneath; what users and
/// peers read is built from the first three only.
@Suite struct StoreErrorTests {
    static let root = "/boards/Test.boardpkg"

    @Test func aLockedPackageKeepsTheFileSystemsErrorAsItsCause() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, _, _, _) = try makeSamplePackage(fs, ids: ids)
        defer { package.close() }
        do {
            _ = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
            Issue.record("a second open of an open package succeeded")
        } catch let error as StoreError {
            #expect(error.code == .locked)
            #expect(error.path == Self.root)
            let cause = try #require(error.cause as? FileSystemError)
            #expect(cause.code == .locked)
            #expect(cause.path == "\(Self.root)/sync/lock")
            #expect(error.description == "\(Self.root) is open in another process (a peer, the server or another command); try again when it has finished")
            #expect(error.isStorageTrouble)
        }
    }

    @Test func anUnreadableManifestKeepsTheDecodersError() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, _, _, _) = try makeSamplePackage(fs, ids: ids)
        package.close()
        fs.corrupt("\(Self.root)/manifest.json") { Array($0.prefix($0.count / 2)) }
        do {
            _ = try PackageReader(fileSystem: fs).read(Self.root)
            Issue.record("half a manifest was read")
        } catch let error as StoreError {
            #expect(error.code == .damagedFile)
            #expect(error.path == "\(Self.root)/manifest.json")
            #expect(error.cause is DecodingError, "\(String(describing: error.cause))")
            #expect(error.description.hasPrefix("\(Self.root)/manifest.json is damaged: not a readable board manifest ("))
        }
    }

    @Test func aDamagedLogNamesItsOffsetAndNoPathToPeers() throws {
        let error = StoreError.damagedLog(path: "/srv/boards/a.boardpkg/sync/oplog", offset: 20, "a record's checksum does not match")
        #expect(error.code == .damagedLog)
        #expect(error.offset == 20)
        #expect(error.cause == nil)
        #expect(error.description == "the op log /srv/boards/a.boardpkg/sync/oplog is damaged at byte 20: a record's checksum does not match. Nothing was changed")
        #expect(error.descriptionWithoutPaths == "the board's op log is damaged at byte 20: a record's checksum does not match. Nothing was changed")
        #expect(!error.descriptionWithoutPaths.contains("/srv"))
        #expect(!error.isStorageTrouble)
    }

    @Test func equalityComparesCodePathAndWordsNotTheCause() {
        let plain = StoreError.writeFailed(path: "/a", "no space left on device")
        let caused = StoreError.writeFailed(path: "/a", "no space left on device",
                                            cause: FileSystemError(.io, path: "/a", "No space left on device"))
        #expect(plain == caused)
        #expect(plain != StoreError.writeFailed(path: "/b", "no space left on device"))
        #expect(plain != StoreError.damagedFile(path: "/a", "no space left on device"))
        #expect(StoreError.damagedLog(path: "/a", offset: 1, "x") != StoreError.damagedLog(path: "/a", offset: 2, "x"))
    }

    @Test func noKindsWordsForAPeerHoldThePath() {
        let path = "/srv/secret/boards/a.boardpkg"
        for code in StoreError.Code.allCases {
            let error = StoreError(code, path: path, "why", offset: code == .damagedLog ? 0 : nil)
            #expect(!error.descriptionWithoutPaths.contains(path), "\(code)")
            #expect(code == .unsupportedContentType || error.description.contains(path), "\(code)")
        }
    }
}
