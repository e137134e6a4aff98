import BoardStore
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `PosixFileSystem` meets what someone else planted at a name it writes or reads: a FIFO at an
/// atomic write's predictable temp name (`.NAME.tmp`) once made `board-sync export` into a shared
/// folder hang for good (found by review); a FIFO or a device where a file is read did the same.
@Suite struct PosixFileSystemTests {
    static func folder() throws -> String {
        let path = NSTemporaryDirectory() + "posix-fs-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func aFIFOAtTheTempNameIsAnErrorNotAHang() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(mkfifo(folder + "/.board.svg.tmp", 0o666) == 0)
        let started = Date()
        #expect(throws: FileSystemError.self) { try PosixFileSystem().writeAtomically(folder + "/board.svg", Array("<svg/>".utf8)) }
        #expect(Date().timeIntervalSince(started) < 5, "refused at once")
        #expect(!FileManager.default.fileExists(atPath: folder + "/board.svg"), "nothing written under the final name")
        // The planted FIFO is cleared, so the next write succeeds.
        try PosixFileSystem().writeAtomically(folder + "/board.svg", Array("<svg/>".utf8))
        #expect(try PosixFileSystem().readFile(folder + "/board.svg") == Array("<svg/>".utf8))
    }

    @Test func aFIFOOrADeviceWhereAFileIsReadIsRefused() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(mkfifo(folder + "/manifest.json", 0o666) == 0)
        let started = Date()
        #expect {
            _ = try PosixFileSystem().readFile(folder + "/manifest.json")
        } throws: { error in
            "\(error)".contains("not a regular file")
        }
        #expect(throws: FileSystemError.self) { try PosixFileSystem().appendFile(folder + "/manifest.json", [1]) }
        #expect(throws: FileSystemError.self) { _ = try PosixFileSystem().readFile("/dev/zero") }
        #expect(Date().timeIntervalSince(started) < 5, "refused at once")
    }
}
