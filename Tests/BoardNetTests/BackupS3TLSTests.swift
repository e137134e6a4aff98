@testable import BoardNet
import BoardModel
import BoardStore
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// S3 backups over https://, end to end: moto's S3 (`pip install 'moto[server]'`; `.ci/run`
/// does) behind a TLS-terminating proxy (TLSTerminatingProxy.swift) whose certificate a test CA
/// signs, the client trusting that CA only (`HTTPClient(tls: TLSContext.client(ca:))`).
@Suite(.serialized) struct BackupS3TLSTests {
    typealias Moto = BackupS3MultipartTests.Moto

    static func skipped() -> Bool {
        guard Moto.available else {
            print("BackupS3TLSTests: SKIPPED the HTTPS S3 tests: no moto server (pip install 'moto[server]'; .ci/run does)")
            return true
        }
        return false
    }

    static func httpsTarget(_ proxy: TLSTerminatingProxy, ca: String, bucket: String = "boards", limits: BackupLimits = BackupLimits()) throws -> S3BackupTarget {
        try S3BackupTarget(endpoint: proxy.endpoint, bucket: bucket, prefix: "prod", region: "us-east-1",
                           credentials: S3Credentials(accessKey: "AKIDEXAMPLE", secretKey: "not-checked"),
                           client: HTTPClient(timeout: 20, tls: try TLSContext.client(ca: ca)), limits: limits)
    }

    /// Objects go up, come back (whole and streamed), are listed and deleted through TLS; an
    /// object of many TLS records comes back byte for byte through the streaming GET.
    @Test func putGetStreamListAndDeleteThroughHTTPS() throws {
        if Self.skipped() { return }
        guard let pki = try TestPKI.make() else { return }
        let moto = try Moto()
        let proxy = try TLSTerminatingProxy(certificate: pki.server.cert, key: pki.server.key, upstreamPort: UInt16(moto.port))
        defer { proxy.stop() }
        let target = try Self.httpsTarget(proxy, ca: pki.ca)
        #expect(target.description.hasPrefix("s3://boards/prod/ at https://127.0.0.1:"), "\(target.description)")
        let created = try target.send("PUT", key: nil)
        #expect(created.status == 200, "\(String(decoding: created.body, as: UTF8.self))")

        let manifestKey = BackupManifest.key(board: "team")
        let small = Array("{\"board\":\"team\"}".utf8)
        try target.put(manifestKey, small)
        // Far over one TLS record (16 KiB), not a multiple of it, every byte value.
        let big = (0..<300_001).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        let assetKey = "assets/" + String(repeating: "ab", count: 32)
        try target.put(assetKey, big)

        #expect(try target.get(manifestKey, maxBytes: 1 << 20) == small)
        var pieces = 0
        var streamed: [UInt8] = []
        #expect(try target.get(assetKey, maxBytes: 1 << 20) { streamed += $0; pieces += 1 })
        #expect(streamed == big, "\(streamed.count) of \(big.count) bytes")
        #expect(pieces >= 1)
        #expect(try target.get("assets/" + String(repeating: "cd", count: 32), maxBytes: 1 << 20) == nil, "a missing key is nil")
        // A body over the caller's bound is refused, not cut.
        #expect(throws: BackupError.self) { try target.get(assetKey, maxBytes: 1000) { _ in } }

        #expect(try Set(target.list("")) == [manifestKey, assetKey])
        #expect(try target.list("boards/") == [manifestKey])
        try target.delete(assetKey)
        #expect(try target.get(assetKey, maxBytes: 1 << 20) == nil)
        #expect(try target.list("") == [manifestKey])

        // Every request went through the proxy's TLS, and none failed there.
        #expect(proxy.handshakes >= 10, "\(proxy.handshakes)")
        #expect(proxy.errors.isEmpty, "\(proxy.errors)")
    }

    /// A log above the (small) multipart threshold goes up in parts over TLS; a restore streams
    /// it back, whole, through TLS too.
    @Test func multipartUploadAndRestoreThroughHTTPS() throws {
        if Self.skipped() { return }
        guard let pki = try TestPKI.make() else { return }
        let moto = try Moto()
        let proxy = try TLSTerminatingProxy(certificate: pki.server.cert, key: pki.server.key, upstreamPort: UInt16(moto.port))
        defer { proxy.stop() }
        let directory = TempDirectory()
        let data = directory.path + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let logBytes = try BackupLimitsTests.board(data, "team", id: 1, strokes: 30, sticker: true)
        var limits = BackupLimits()
        limits.multipartThreshold = 1024
        limits.partBytes = 300
        limits.chunkBytes = 100
        #expect(logBytes > 3 * limits.partBytes, "several parts: \(logBytes) bytes")
        let target = try Self.httpsTarget(proxy, ca: pki.ca, limits: limits)
        #expect(try target.send("PUT", key: nil).status == 200)
        let (report, _, lines) = try BackupLimitsTests.backUp(data, to: target)
        #expect(report.written == ["team"], "\(report.failed) \(lines)")
        let manifest = try BackupManifest.decode(try #require(try target.get(BackupManifest.key(board: "team"), maxBytes: limits.maxManifestBytes)), board: "team")
        let log = try target.send("GET", key: BackupManifest.logKey(board: "team", log: manifest.log), maxBytes: limits.maxLogBytes)
        let parts = (logBytes + limits.partBytes - 1) / limits.partBytes
        #expect(log.headers["etag"]?.contains("-\(parts)") == true, "a multipart object: \(log.headers)")
        let original = try Data(contentsOf: URL(fileURLWithPath: data + "/team.boardpkg/sync/oplog"))
        #expect(Data(log.body) == original)
        let outcome = try BackupRestore.restore(from: target, into: directory.path + "/restored")
        #expect(outcome.restored.map(\.board) == ["team"] && outcome.restored.first?.images == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/restored/team.boardpkg/sync/oplog")) == original)
        #expect(proxy.handshakes > parts, "\(proxy.handshakes)")
        #expect(proxy.errors.isEmpty, "\(proxy.errors)")
    }

    /// A server certificate signed by a CA the client does not trust, or signed by the trusted
    /// CA for another host: refused in the handshake with OpenSSL's reason, no request reaches
    /// the store, and a backup run through it fails the board loudly and writes nothing.
    @Test func anUntrustedOrMisnamedCertificateIsRefusedAndNothingIsWritten() throws {
        if Self.skipped() { return }
        guard let pki = try TestPKI.make() else { return }
        let moto = try Moto()
        let plain = try moto.target(bucket: "boards", limits: BackupLimits())  // creates the bucket, over http
        let directory = TempDirectory()
        let data = directory.path + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try BackupLimitsTests.board(data, "team", id: 1, strokes: 3, sticker: true)
        let cases: [(String, (cert: String, key: String), String)] = [
            ("signed by another CA", pki.rogueServer, "certificate verify failed"),
            ("for another host", pki.elsewhere, "IP address mismatch"),
        ]
        for (what, certificate, reason) in cases {
            let proxy = try TLSTerminatingProxy(certificate: certificate.cert, key: certificate.key, upstreamPort: UInt16(moto.port))
            defer { proxy.stop() }
            let target = try Self.httpsTarget(proxy, ca: pki.ca)
            let key = BackupManifest.key(board: "team")
            do {
                try target.put(key, Array("{}".utf8))
                Issue.record("\(what): a PUT through an unverifiable certificate succeeded")
            } catch {
                let text = "\(error)"
                #expect(text.contains("S3 PUT \(key) at 127.0.0.1:\(proxy.port)") && text.contains("TLS handshake failed"), "\(what): \(text)")
                #expect(text.contains(reason), "\(what): \(text)")
            }
            #expect(throws: BackupError.self, "\(what): the streamed GET") { try target.get(key, maxBytes: 1 << 20) { _ in } }
            #expect(throws: BackupError.self, "\(what): the listing") { try target.list("") }
            let (report, _, lines) = try BackupLimitsTests.backUp(data, to: target)
            #expect(report.written.isEmpty && report.failed.map(\.board) == ["team"], "\(what): \(report.failed) \(lines)")
            #expect(report.failed.first?.error.contains(reason) == true, "\(what): \(report.failed)")
            #expect(proxy.handshakes == 0, "\(what): no session was established")
            // Nothing reached the store.
            #expect(try plain.list("").isEmpty, "\(what)")
            let uploads = try plain.send("GET", key: nil, query: [("uploads", "")], maxBytes: 1 << 20)
            #expect(!String(decoding: uploads.body, as: UTF8.self).contains("<UploadId>"))
        }
    }
}
