import BoardModel
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `serve --secret-file`, `token`, and `sync --token` as real processes over real TCP.
@Suite struct AccessCLITests {
    @Test func aServerWithASecretLetsInOnlyTokensForTheBoard() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        // Minting needs the secret to exist.
        let early = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "write")
        #expect(early.status == 1 && early.stderr.contains("no secret file at secret"), "\(early.stderr)")
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--secret-file", "secret"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        #expect(server.log.contains("access control on"), "\(server.log)")
        var info = stat()
        #expect(lstat(workspace.path + "/secret", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600, "the secret is created readable by its owner only")

        let write = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "write", "--expires", "1h")
        #expect(write.status == 0, "\(write.stderr)")
        let writeToken = write.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(writeToken.hasPrefix("bst1."))
        let readJSON = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "read", "--subject", "rob", "--json")
        let readInfo = try #require(try JSONSerialization.jsonObject(with: Data(readJSON.stdout.utf8)) as? [String: Any])
        #expect(readInfo["role"] as? String == "read" && readInfo["subject"] as? String == "rob")
        // Minted tokens expire by default, in 24 hours; `--expires never` says so explicitly.
        let expiry = try #require((readInfo["expires"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) }, "\(readInfo)")
        #expect(abs(expiry.timeIntervalSinceNow - 86_400) < 120, "\(expiry)")
        #expect((readInfo["tokenId"] as? String)?.isEmpty == false, "\(readInfo)")
        let never = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "read", "--expires", "never", "--json")
        #expect(never.status == 0 && never.stdout.contains("\"expires\" : \"never\""), "\(never.stdout) \(never.stderr)")
        let readToken = try #require(readInfo["token"] as? String)
        let otherBoard = try cli.run("token", "--secret-file", "secret", "--board", "other", "--role", "write").stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)

        try cli.run("new", "A.boardpkg")
        try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "10,10")
        // No token, another board's token, a tampered token: refused, nothing stored.
        for (label, extra) in [("none", [String]()), ("other board", ["--token", otherBoard]),
                               ("tampered", ["--token", String(writeToken.dropLast(2)) + "AA"])] {
            let refused = try cli.run(["sync", "A.boardpkg", "--server", address, "--board", "team", "--timeout", "10"] + extra)
            #expect(refused.status == 1, "\(label): \(refused.stdout)")
            #expect(refused.stderr.contains("access denied"), "\(label): \(refused.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/data/team.boardpkg"), "no board for the refused")
        // The write token syncs; the token can also come from a file.
        let synced = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", writeToken)
        #expect(synced.status == 0, "\(synced.stderr)")
        try Data((readToken + "\n").utf8).write(to: URL(fileURLWithPath: workspace.path + "/read.token"))
        try cli.run("new", "B.boardpkg")
        let mirrored = try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team", "--token-file", "read.token")
        #expect(mirrored.status == 0, "a reader with nothing of its own syncs: \(mirrored.stderr)")
        #expect(try cli.run("show", "B.boardpkg", "--json").stdout == cli.run("show", "A.boardpkg", "--json").stdout)
        // The reader edits and syncs again: refused, and the server's board is unchanged.
        try cli.run("stroke", "B.boardpkg", "--points", "1,1 5,5")
        let readerWrites = try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team", "--token-file", "read.token", "--timeout", "10")
        #expect(readerWrites.status == 1)
        #expect(readerWrites.stderr.contains("read-only"), "\(readerWrites.stderr)")
        try cli.run("new", "C.boardpkg")
        try cli.run("sync", "C.boardpkg", "--server", address, "--board", "team", "--token", writeToken)
        #expect(try workspace.board("C.boardpkg").strokes.isEmpty, "the reader's stroke never reached the server")
        #expect(server.terminate() == 0)
        #expect(server.log.contains("access denied to board 'team': no token"), "\(server.log)")
        #expect(server.log.contains("refused operations from a read-only session"), "\(server.log)")

        let peerToken = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "peer", "--json")
        #expect(peerToken.status == 0 && peerToken.stdout.contains("\"role\" : \"peer\""), "\(peerToken.stdout)")
        // Bad usage and unsafe secrets.
        #expect(try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "admin").status == 64)
        #expect(try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "read", "--expires", "soon").status == 64)
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", "x", "--token-file", "f").status == 64)
        chmod(workspace.path + "/secret", 0o644)
        let loose = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "read")
        #expect(loose.status == 1 && loose.stderr.contains("chmod 600"), "\(loose.stderr)")
        // A link in place of the secret, a secret too short to sign with, one too large to be one.
        symlink(workspace.path + "/secret", workspace.path + "/linked")
        let linked = try cli.run("token", "--secret-file", "linked", "--board", "team", "--role", "read")
        #expect(linked.status == 1 && linked.stderr.contains("not a regular file"), "\(linked.stderr)")
        for (name, text) in [("short", "abc\n"), ("huge", String(repeating: "x", count: 10_000))] {
            try Data(text.utf8).write(to: URL(fileURLWithPath: workspace.path + "/" + name))
            chmod(workspace.path + "/" + name, 0o600)
            let refused = try cli.run("serve", "--data", "data2", "--secret-file", name)
            #expect(refused.status == 1, "\(name): \(refused.stderr)")
            #expect(refused.stderr.contains(name) && (refused.stderr.contains("too short") || refused.stderr.contains("4 KB")), "\(name): \(refused.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/data2"), "no server started")
    }

    @Test func tokensAndBoardsTravelOverTLSAndUntrustedCertificatesAreRefused() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        // A self-signed certificate for 127.0.0.1, made by the openssl command; it is its own CA.
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else {
            print("SKIPPED: the TLS command-line test needs /usr/bin/openssl; .ci/run installs it")
            return
        }
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                             "-keyout", "server.key", "-out", "server.pem", "-days", "2", "-subj", "/CN=boardsync test",
                             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
        openssl.currentDirectoryURL = URL(fileURLWithPath: workspace.path)
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        try #require(openssl.terminationStatus == 0)

        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--secret-file", "secret",
                                 "--tls-cert", "server.pem", "--tls-key", "server.key"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        #expect(server.log.contains("TLS on"), "\(server.log)")
        let token = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "write").stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        try cli.run("new", "A.boardpkg")
        try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "10,10")
        let synced = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", token, "--tls-ca", "server.pem")
        #expect(synced.status == 0, "\(synced.stderr)")
        try cli.run("new", "B.boardpkg")
        let named = try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team", "--token", token,
                                "--tls-ca", "server.pem", "--tls-name", "localhost", "--json")
        #expect(named.status == 0, "\(named.stderr)")
        #expect(try cli.run("show", "B.boardpkg", "--json").stdout == cli.run("show", "A.boardpkg", "--json").stdout)

        // The system trust store does not know this certificate; a plain client is told to use TLS.
        let untrusted = try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team", "--token", token, "--tls", "--timeout", "10")
        #expect(untrusted.status == 1 && untrusted.stderr.contains("certificate verify failed"), "\(untrusted.stderr)")
        let plain = try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team", "--token", token, "--timeout", "10")
        #expect(plain.status == 1 && plain.stderr.contains("give --tls"), "\(plain.stderr)")
        #expect(server.terminate() == 0)
        #expect(server.log.contains("TLS handshake failed"), "\(server.log)")

        // An empty --tls-name would check no name at all: refused before anything is sent.
        let unnamed = try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team", "--token", token,
                                  "--tls-ca", "server.pem", "--tls-name", "", "--timeout", "10")
        #expect(unnamed.status == 64 && unnamed.stderr.contains("--tls-name needs a name"), "\(unnamed.status) \(unnamed.stderr)")
        // Bad usage and unusable files fail before anything listens.
        #expect(try cli.run("serve", "--data", "data2", "--tls-cert", "server.pem").status == 64)
        let missingKey = try cli.run("serve", "--data", "data2", "--tls-cert", "server.pem", "--tls-key", "nope.key")
        #expect(missingKey.status == 1 && missingKey.stderr.contains("cannot read the TLS key nope.key"), "\(missingKey.stderr)")
        #expect(try cli.run("peer", "A.boardpkg", "--listen", "127.0.0.1:0", "--tls").status == 64, "--tls without --connect")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/data2"), "no server started")
    }

    /// A live peer's connection closes when its token expires, and clients say why.
    @Test func anOpenConnectionClosesWhenItsTokenExpiresAndClientsSaySo() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--secret-file", "secret"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        let token = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "write", "--expires", "3s")
        #expect(token.status == 0 && token.stderr.contains("token id "), "\(token.stderr)")
        let text = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try cli.run("new", "A.boardpkg")
        let peer = try Daemon(["peer", "A.boardpkg", "--connect", address, "--board", "team", "--token", text], in: workspace.path)
        #expect(peer.waitFor("connected to") != nil, "\(peer.log)")
        // Keep-alives keep the link busy; the token's expiry ends it (within 10 s).
        #expect(peer.waitFor("token expired (code 22)") != nil, "\(peer.log)")
        #expect(peer.waitFor("expired: connect again with a fresh token") != nil, "\(peer.log)")
        // Asked once more (the same file-less token, expired still), the peer stops: exit 1.
        #expect(peer.terminate() == 1, "\(peer.log)")
        let late = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", text, "--timeout", "10")
        #expect(late.status == 1 && late.stderr.contains("the token expired") && late.stderr.contains("board-sync token"), "\(late.stderr)")
        #expect(server.terminate() == 0)
        #expect(server.log.contains("closed: token expired"), "\(server.log)")
    }

    /// `token revoke` beside the secret: a running server closes the connections it revokes and
    /// refuses the tokens from then on.
    @Test func revokingASubjectOrATokenEndsItsConnectionsOnARunningServer() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--secret-file", "secret"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        func mint(_ subject: String) throws -> [String: Any] {
            let result = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "write", "--subject", subject, "--json")
            return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stderr)")
        }
        let ann = try mint("ann"), bob = try mint("bob")
        try cli.run("new", "A.boardpkg")
        try cli.run("new", "B.boardpkg")
        let annPeer = try Daemon(["peer", "A.boardpkg", "--connect", address, "--board", "team", "--token", ann["token"] as! String], in: workspace.path)
        let bobPeer = try Daemon(["peer", "B.boardpkg", "--connect", address, "--board", "team", "--token", bob["token"] as! String], in: workspace.path)
        #expect(annPeer.waitFor("connected to") != nil && bobPeer.waitFor("connected to") != nil, "\(annPeer.log) \(bobPeer.log)")
        // Ann's subject: her open connection closes; bob's stays.
        let revoked = try cli.run("token", "revoke", "--secret-file", "secret", "--subject", "ann")
        #expect(revoked.status == 0 && revoked.stdout.contains("revoked: subject ann"), "\(revoked.stdout) \(revoked.stderr)")
        #expect(annPeer.waitFor("access revoked") != nil, "\(annPeer.log)")
        #expect(annPeer.terminate() == 1, "a revoked peer stops with exit 1: \(annPeer.log)")
        let refused = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", ann["token"] as! String, "--timeout", "10")
        #expect(refused.status == 1 && refused.stderr.contains("access denied"), "\(refused.stderr)")
        // A token minted for ann after the revocation works.
        let annAgain = try mint("ann")
        let synced = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", annAgain["token"] as! String)
        #expect(synced.status == 0, "\(synced.stderr)")
        // Bob's one token, by its id.
        let byID = try cli.run("token", "revoke", "--secret-file", "secret", "--token-id", try #require(bob["tokenId"] as? String, "\(bob)"))
        #expect(byID.status == 0, "\(byID.stderr)")
        #expect(bobPeer.waitFor("access revoked") != nil, "\(bobPeer.log)")
        #expect(bobPeer.terminate() == 1, "a revoked peer stops with exit 1: \(bobPeer.log)")
        // ...or by the token itself.
        let byToken = try cli.run("token", "revoke", "--secret-file", "secret", "--token", annAgain["token"] as! String)
        #expect(byToken.status == 0 && byToken.stdout.contains("revoked: token \(annAgain["tokenId"] as? String ?? "?")"), "\(byToken.stdout)")
        var info = stat()
        #expect(lstat(workspace.path + "/secret.revoked", &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(server.waitFor("revocations: 1 subject(s) and 2 token id(s)") != nil, "\(server.log)")
        #expect(server.terminate() == 0)
        // Bad usage: nothing, or two things, to revoke; a missing secret.
        #expect(try cli.run("token", "revoke", "--secret-file", "secret").status == 64)
        #expect(try cli.run("token", "revoke", "--secret-file", "secret", "--subject", "a", "--token-id", "b").status == 64)
        let missing = try cli.run("token", "revoke", "--secret-file", "nope", "--subject", "a")
        #expect(missing.status == 1 && missing.stderr.contains("no secret file at nope"), "\(missing.stderr)")
        let forged = try cli.run("token", "revoke", "--secret-file", "secret", "--token", "bst1.YQ.YQ")
        #expect(forged.status == 1, "\(forged.stderr)")
    }

    @Test func aServerWithoutASecretSaysSoLoudly() throws {
        let workspace = try Workspace()
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0"], in: workspace.path)
        _ = server.listeningAddress()
        #expect(server.log.contains("WARNING: no --secret-file"), "\(server.log)")
        #expect(server.terminate() == 0)
    }
}

/// `serve`'s limits against a real server: each triggers its error while other connections
/// keep working.
@Suite struct ServeLimitCLITests {
    /// A raw TCP connection to HOST:PORT that sends nothing.
    final class RawConnection {
        let fd: Int32
        init(_ address: String) throws {
            let parts = address.split(separator: ":")
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = in_port_t(UInt16(parts[1])!).bigEndian
            inet_pton(AF_INET, String(parts[0]), &addr.sin_addr)
            let result = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard result == 0 else { throw CocoaError(.fileReadUnknown) }
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
        /// Everything the server sends until it closes (or 5 s pass).
        func readUntilClosed() -> (bytes: [UInt8], closed: Bool) {
            var all: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(fd, &buffer, buffer.count)
                if count == 0 { return (all, true) }
                if count < 0 { return (all, false) }
                all += buffer[0..<count]
            }
        }
        deinit { close(fd) }
    }

    @Test func connectionsPerAddressBoardsAndTheHandshakeDeadline() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--max-connections-per-address", "2",
                                 "--max-boards", "1", "--handshake-timeout", "1"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        try cli.run("new", "A.boardpkg")
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 2,2")
        // Two silent connections fill the address's quota: a sync is turned away with busy.
        var first: RawConnection? = try RawConnection(address)
        let second = try RawConnection(address)
        usleep(200_000)
        let turnedAway = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "one", "--timeout", "10")
        #expect(turnedAway.status == 1)
        #expect(turnedAway.stderr.contains("limit per address"), "\(turnedAway.stderr)")
        // The silent ones are closed once their second without a HELLO is up...
        let (_, closed) = second.readUntilClosed()
        #expect(closed, "a connection that never says HELLO is closed after --handshake-timeout")
        first = nil
        _ = first
        usleep(200_000)
        // ...and the sync goes through.
        let synced = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "one")
        #expect(synced.status == 0, "\(synced.stderr)")
        // One board is the limit: a second is refused, the first still syncs.
        let refused = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "two", "--timeout", "10")
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("limit of 1 boards"), "\(refused.stderr)")
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "one").status == 0)
        #expect(server.terminate() == 0)
        #expect(server.log.contains("no HELLO within 1 s"), "\(server.log)")
        // Nonsense values are bad usage.
        for bad in [["--max-connections", "0"], ["--idle-timeout", "2"], ["--max-ops-per-second", "lots"],
                    ["--view-save-seconds", "0"], ["--view-save-seconds", "-5"], ["--view-save-seconds", "soon"],
                    ["--view-save-threads", "-1"], ["--view-save-threads", "1.5"], ["--view-save-threads", "65"]] {
            let result = try cli.run(["serve", "--data", "data"] + bad)
            #expect(result.status == 64, "\(bad): \(result.stderr)")
        }
    }
}

/// `bin/load`'s generator as a process, small and bounded: a real server, clients on two boards,
/// every client converged, and the figures it promises in its JSON.
@Suite struct LoadToolTests {
    @Test func aSmallLoadRunConvergesAndReportsItsFigures() throws {
        let workspace = try Workspace()
        let program = URL(fileURLWithPath: CLI.binary).deletingLastPathComponent().appendingPathComponent("board-load").path
        let runner = CLI(directory: workspace.path, program: program)
        let result = try runner.run(["--clients", "8", "--boards", "2", "--rate", "400", "--seconds", "1", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let figures = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
        #expect(figures["converged"] as? Bool == true)
        #expect((figures["operationsMade"] as? Int ?? 0) > 100)
        // Each operation reaches the three other clients of its board.
        #expect(figures["operationsDeliveredToClients"] as? Int == 3 * (figures["operationsMade"] as? Int ?? -1))
        for key in ["sustainedOpsPerSecond", "latencyMedianMs", "latencyP99Ms", "serverPeakKB", "serverKBPerConnection"] {
            #expect(figures[key] != nil, "\(key)")
        }
        // The same load from two client processes: each board's clients are split between them,
        // so every operation crosses processes through the server, and all still converge.
        let split = try runner.run(["--clients", "8", "--boards", "2", "--rate", "400", "--seconds", "1", "--processes", "2", "--json"])
        #expect(split.status == 0, "\(split.stderr)")
        let splitFigures = try #require(try JSONSerialization.jsonObject(with: Data(split.stdout.utf8)) as? [String: Any], "\(split.stdout)")
        #expect(splitFigures["converged"] as? Bool == true && splitFigures["processes"] as? Int == 2)
        #expect((splitFigures["operationsMade"] as? Int ?? 0) > 100)
        #expect(splitFigures["operationsDeliveredToClients"] as? Int == 3 * (splitFigures["operationsMade"] as? Int ?? -1))
        #expect((splitFigures["latencySamples"] as? Int ?? 0) > 0)
        #expect(try runner.run(["--clients", "zero"]).status == 64)
        #expect(try runner.run(["--help"]).stdout.contains("USAGE: board-load"))
    }
}
