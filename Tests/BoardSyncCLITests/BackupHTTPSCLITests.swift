import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `serve --backup-to s3://…` and `restore --from s3://…` with an https:// `--s3-endpoint`:
/// moto's S3 behind a TLS-terminating proxy whose certificate a private test CA signs; the
/// processes trust that CA through OpenSSL's `SSL_CERT_FILE` (docs/DEPLOYMENT.md, "Backups").
@Suite(.serialized) struct BackupHTTPSCLITests {
    /// Under a key prefix (moto not checking signatures: it refuses a listing whose prefix holds
    /// '/' even from boto3 itself).
    @Test func backupOverHTTPSUnderAPrefixAndRestoreWithAPrivateCAFromSSLCertFile() throws {
        try Self.drill(destination: "s3://boards/prod/eu", authenticating: false)
    }

    /// moto checking every request's SigV4 signature, the Host header (the proxy's port) included.
    @Test func signedBackupOverHTTPSAndRestoreWithAPrivateCAFromSSLCertFile() throws {
        try Self.drill(destination: "s3://boards", authenticating: true)
    }

    static func drill(destination: String, authenticating: Bool) throws {
        guard MotoProcess.available else {
            print("BackupHTTPSCLITests: SKIPPED the HTTPS S3 backup test: no moto server (pip install 'moto[server]'; .ci/run does)")
            return
        }
        let workspace = try Workspace()
        let cli = workspace.cli
        guard let certificates = try ProxyCertificates.make(in: workspace.path) else { return }
        let moto = try MotoProcess(authenticating: authenticating)
        let keys = workspace.path + "/s3.keys"
        try moto.setUp(bucket: "boards", credentials: keys, in: workspace.path)
        let proxy = try TLSTerminatingProxy(certificate: certificates.server.cert, key: certificates.server.key, upstreamPort: UInt16(moto.port))
        defer { proxy.stop() }
        let trust = ["SSL_CERT_FILE": certificates.ca]
        let s3 = ["--s3-endpoint", proxy.endpoint, "--s3-credentials-file", keys]

        try cli.run("new", "A.boardpkg")
        try cli.run("sticker", "A.boardpkg", "--image", "photo.png", "--at", "3,3")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        try cli.run("stroke", "A.boardpkg", "--points", "4,4 9,1")

        // Without the CA the store's certificate is refused, the log says why, serving goes on,
        // and nothing is written.
        let untrusting = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", destination, "--backup-every", "1s"] + s3,
                                    in: workspace.path, environment: ["SSL_CERT_FILE": certificates.untrusted.cert])
        let untrustingAddress = try #require(untrusting.listeningAddress(), "\(untrusting.log)")
        #expect(try cli.run("sync", "A.boardpkg", "--server", untrustingAddress, "--board", "team").status == 0)
        #expect(untrusting.waitFor("certificate verify failed") != nil, "\(untrusting.log)")
        #expect(try cli.run("sync", "A.boardpkg", "--server", untrustingAddress, "--board", "team").status == 0, "serving goes on")
        #expect(untrusting.terminate() == 0)
        #expect(!untrusting.log.contains("1 written"), "\(untrusting.log)")
        #expect(proxy.handshakes == 0, "no TLS session was established")
        try FileManager.default.removeItem(atPath: workspace.path + "/data")

        // With it: backed up over https (every request signed for the proxy's Host and checked
        // by moto), then restored over https into a new directory.
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--backup-to", destination, "--backup-every", "1s"] + s3,
                                in: workspace.path, environment: trust)
        let address = try #require(server.listeningAddress(), "\(server.log)")
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0)
        let expected = try BackupCLITests.ids(workspace, "A.boardpkg")
        #expect(expected.count == 3)
        #expect(BackupCLITests.waitForBackup(after: 1, server) != nil, "\(server.log)")
        #expect(server.log.contains("1 written"), "\(server.log)")
        #expect(!server.log.contains("certificate"), "\(server.log)")
        kill(server.process.processIdentifier, SIGKILL)
        server.process.waitUntilExit()
        let backedUp = proxy.handshakes
        #expect(backedUp > 0)

        let refused = try ServeConfigCLITests.run(workspace, ["restore", "--from", destination, "--data", "refused"] + s3,
                                                  environment: ["SSL_CERT_FILE": certificates.untrusted.cert])
        #expect(refused.status == 1 && refused.stderr.contains("certificate verify failed"), "\(refused.status) \(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/refused"), "nothing restored")

        let restore = try ServeConfigCLITests.run(workspace, ["restore", "--from", destination, "--data", "restored", "--json"] + s3, environment: trust)
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(restore.stdout.contains("\"team\""), "\(restore.stdout)")
        #expect(proxy.handshakes > backedUp, "the restore went through TLS")
        let again = try Daemon(["serve", "--data", "restored", "--listen", "127.0.0.1:0"], in: workspace.path)
        let newAddress = try #require(again.listeningAddress(), "\(again.log)")
        try cli.run("new", "B.boardpkg")
        #expect(try cli.run("sync", "B.boardpkg", "--server", newAddress, "--board", "team").status == 0)
        #expect(try BackupCLITests.ids(workspace, "B.boardpkg") == expected, "every operation, the image included")
        #expect(try workspace.board("B.boardpkg").stickers.first?.imagePNG != nil)
        #expect(again.terminate() == 0)
    }
}
