@testable import BoardNet
import BoardModel
import BoardStore
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// S3 multipart uploads against moto's S3 (`pip install 'moto[server]'`; `.ci/run` does), with
/// small injected bounds so a board's log goes up in many parts, and a restore streamed back.
@Suite(.serialized) struct BackupS3MultipartTests {
    /// moto's server on a free loopback port, parts of 256 bytes allowed (S3 wants 5 MiB).
    final class Moto {
        static let available: Bool = {
            let probe = Process()
            probe.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            probe.arguments = ["python3", "-c", "import moto.server"]
            probe.standardOutput = FileHandle.nullDevice
            probe.standardError = FileHandle.nullDevice
            guard (try? probe.run()) != nil else { return false }
            probe.waitUntilExit()
            return probe.terminationStatus == 0
        }()

        let process = Process()
        let port: Int

        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
            port = Int(UInt16(bigEndian: address.sin_port))
            close(fd)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-m", "moto.server", "-H", "127.0.0.1", "-p", String(port)]
            var environment = ProcessInfo.processInfo.environment
            environment["S3_UPLOAD_PART_MIN_SIZE"] = "256"
            process.environment = environment
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline {
                if let fd = connectedSocket(SocketAddress(host: "127.0.0.1", port: UInt16(port)), receiveTimeout: timeval(tv_sec: 1, tv_usec: 0)) {
                    close(fd)
                    return
                }
                usleep(50_000)
            }
            throw BackupError("moto did not start on port \(port)")
        }

        var endpoint: String { "http://127.0.0.1:\(port)" }

        func target(bucket: String, limits: BackupLimits) throws -> S3BackupTarget {
            let target = try S3BackupTarget(endpoint: endpoint, bucket: bucket, prefix: "prod", region: "us-east-1",
                                            credentials: S3Credentials(accessKey: "AKIDEXAMPLE", secretKey: "not-checked"), limits: limits)
            let created = try target.send("PUT", key: nil)  // the bucket
            #expect(created.status == 200, "\(String(decoding: created.body, as: UTF8.self))")
            return target
        }

        deinit {
            if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        }
    }

    static func skipped() -> Bool {
        guard Moto.available else {
            print("BackupS3MultipartTests: SKIPPED: no moto server (pip install 'moto[server]'; .ci/run does)")
            return true
        }
        return false
    }

    @Test func aLogAboveTheThresholdGoesUpInPartsAndComesBackWhole() throws {
        if Self.skipped() { return }
        let moto = try Moto()
        let directory = TempDirectory()
        let data = directory.path + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let logBytes = try BackupLimitsTests.board(data, "team", id: 1, strokes: 30, sticker: true)
        var limits = BackupLimits()
        limits.multipartThreshold = 1024
        limits.partBytes = 300
        limits.chunkBytes = 100
        #expect(logBytes > 3 * limits.partBytes, "several parts: \(logBytes) bytes")
        let target = try moto.target(bucket: "boards", limits: limits)
        let (report, _, lines) = try BackupLimitsTests.backUp(data, to: target)
        #expect(report.written == ["team"], "\(report.failed) \(lines)")
        // moto names a multipart object's ETag "<md5>-<parts>".
        let manifest = try BackupManifest.decode(try #require(try target.get(BackupManifest.key(board: "team"), maxBytes: limits.maxManifestBytes)), board: "team")
        let log = try target.send("GET", key: BackupManifest.logKey(board: "team", log: manifest.log), maxBytes: limits.maxLogBytes)
        let parts = (logBytes + limits.partBytes - 1) / limits.partBytes
        #expect(log.headers["etag"]?.contains("-\(parts)") == true, "\(log.headers)")
        let original = try Data(contentsOf: URL(fileURLWithPath: data + "/team.boardpkg/sync/oplog"))
        #expect(Data(log.body) == original)
        // Restored through streamed GETs (chunks of whatever the socket brings).
        let outcome = try BackupRestore.restore(from: target, into: directory.path + "/restored")
        #expect(outcome.restored.map(\.board) == ["team"] && outcome.restored[0].images == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/restored/team.boardpkg/sync/oplog")) == original)
        // No upload left open at the store.
        let uploads = try target.send("GET", key: nil, query: [("uploads", "")], maxBytes: 1 << 20)
        #expect(!String(decoding: uploads.body, as: UTF8.self).contains("<UploadId>"), "\(String(decoding: uploads.body, as: UTF8.self))")
    }

    /// Parts the store refuses (under moto's 256-byte minimum): the board fails with S3's
    /// words, the upload is aborted (no parts left at the store), nothing names the log.
    @Test func aRefusedUploadIsAbortedAndNamed() throws {
        if Self.skipped() { return }
        let moto = try Moto()
        let directory = TempDirectory()
        let data = directory.path + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try BackupLimitsTests.board(data, "team", id: 1, strokes: 30)
        var limits = BackupLimits()
        limits.multipartThreshold = 512
        limits.partBytes = 100
        let target = try moto.target(bucket: "boards", limits: limits)
        let (report, _, lines) = try BackupLimitsTests.backUp(data, to: target)
        #expect(report.written.isEmpty && report.failed.map(\.board) == ["team"], "\(lines)")
        #expect(report.failed.first?.error.contains("EntityTooSmall") == true, "\(report.failed)")
        #expect(try target.get(BackupManifest.key(board: "team"), maxBytes: 1 << 20) == nil)
        let uploads = try target.send("GET", key: nil, query: [("uploads", "")], maxBytes: 1 << 20)
        #expect(uploads.status == 200 && !String(decoding: uploads.body, as: UTF8.self).contains("<UploadId>"), "\(String(decoding: uploads.body, as: UTF8.self))")
    }
}
