import BoardClient
import BoardModel
import BoardNet
import Foundation
import Testing

/// TCPTransport with TLS (BoardNet's OpenSSL wrapper) against a TLS SyncHost server.
@Suite struct TLSTransportTests {
    @Test func aLiveBoardGoesLiveOverTLS() async throws {
        guard let openssl = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            print("SKIPPED: the TLS transport test needs the `openssl` command")
            return
        }
        let dir = TempDirectory()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: openssl)
        process.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                             "-keyout", dir.path + "/key.pem", "-out", dir.path + "/cert.pem", "-days", "2",
                             "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "openssl made a certificate")

        var options = SyncHost.Options()
        options.serverTLS = try TLSContext.server(certificate: dir.path + "/cert.pem", key: dir.path + "/key.pem")
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server", options: options)
        let transport = TCPTransport(tls: try TLSContext.client(ca: dir.path + "/cert.pem"))
        let sync = LiveBoard.Sync(server: server.address, board: "tls")
        let alice = try LiveBoard.open(storage: .memory, sync: sync, transport: transport)
        let bob = try LiveBoard.open(storage: .memory, sync: sync, transport: transport)
        let runs = [Running(alice), Running(bob)]
        try await alice.edit { try $0.beginStroke(color: .black, width: 2, points: line(30)) }
        _ = try await first("bob to get alice's stroke over TLS", of: bob.updates) { $0.snapshot.strokes.count == 1 }
        #expect(await alice.close().allAcknowledged)
        _ = await bob.close()
        for run in runs { _ = try await run.ended() }

        // A plain client meeting the TLS server does not go live; it keeps retrying.
        let plain = try LiveBoard.open(storage: .memory, sync: sync)
        let plainRun = Running(plain)
        let offline = try await first("the plain client to be offline", of: plain.status) {
            if case .offline = $0.state { return true } else { return false }
        }
        if case .offline(_, _, let error) = offline.state { #expect(!error.isEmpty) }
        _ = await plain.close(within: 0)
        _ = try await plainRun.ended()
        await server.stop()
    }
}

extension TLSTransportTests {
    /// A server that accepts TCP and never answers the TLS handshake: the handshake counts in
    /// `Sync.handshakeTimeout` (the attempt is given up), and `close(within:)` is not held by it.
    @Test func aTLSHandshakeThatNeverCompletesIsBounded() async throws {
        guard let openssl = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            print("SKIPPED: the TLS transport test needs the `openssl` command")
            return
        }
        let dir = TempDirectory()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: openssl)
        process.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                             "-keyout", dir.path + "/key.pem", "-out", dir.path + "/cert.pem", "-days", "2",
                             "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "openssl made a certificate")
        let server = try HostileServer(.silent)
        defer { server.stop() }
        let transport = TCPTransport(tls: try TLSContext.client(ca: dir.path + "/cert.pem"))

        var sync = LiveBoard.Sync(server: server.address, board: "mute-tls")
        sync.handshakeTimeout = 1
        let quick = try LiveBoard.open(storage: .memory, sync: sync, transport: transport)
        let quickRun = Running(quick)
        let offline = try await first("the TLS attempt to be given up", of: quick.status, within: 15) {
            if case .offline = $0.state { return true } else { return false }
        }
        if case .offline(_, _, let error) = offline.state { #expect(error.contains("HELLO"), "\(error)") }
        _ = try await finishes("close", within: 5) { await quick.close(within: 0) }
        _ = try await quickRun.ended()

        sync.handshakeTimeout = 60
        let board = try LiveBoard.open(storage: .memory, sync: sync, transport: transport)
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        let run = Running(board)
        try await eventually("the TCP connection") { server.accepted >= 2 }
        let report = try await finishes("close(within: 1) during a TLS handshake", within: 5) { await board.close(within: 1) }
        #expect(!report.allAcknowledged)
        _ = try await run.ended(within: 5)
    }
}
