import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Foundation
import Testing

/// Tokens and roles (docs/DEPLOYMENT.md): minting and checking, and a server endpoint that
/// requires them.
@Suite struct AccessTokenTests {
    static let secret = Array("0123456789abcdef0123456789abcdef".utf8)

    @Test func hmacMatchesRFC4231() {
        // RFC 4231 test case 2.
        let tag = HMAC.sha256(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        #expect(tag.map { String(format: "%02x", $0) }.joined() == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        // Test case 6: a key longer than the block is hashed first.
        let long = HMAC.sha256(key: [UInt8](repeating: 0xAA, count: 131), message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))
        #expect(long.map { String(format: "%02x", $0) }.joined() == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        #expect(HMAC.constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!HMAC.constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!HMAC.constantTimeEquals([1, 2, 3], [1, 2]))
    }

    @Test func aTokenOpensItsBoardWithItsRoleUntilItExpires() throws {
        let authority = try TokenAuthority(secret: Self.secret)
        let token = Array(try authority.mint(board: "plans", role: .read, expires: 1_000, subject: "ann", tokenID: "t1", issued: 900.25).utf8)
        #expect(authority.verify(token, board: "plans", now: 999)
            == .success(AccessGrant(board: "plans", role: .read, expires: 1_000, subject: "ann", tokenID: "t1", issued: 900.25)))
        #expect(authority.verify(token, board: "plans", now: 1_000) == .failure(.expired(1_000)))
        #expect(authority.verify(token, board: "other", now: 10) == .failure(.otherBoard("plans")))
        let forever = Array(try authority.mint(board: "plans", role: .write, expires: nil, subject: "bob", tokenID: "t2").utf8)
        #expect(authority.verify(forever, board: "plans", now: 4e9) == .success(AccessGrant(board: "plans", role: .write, expires: nil, subject: "bob", tokenID: "t2")))
        // Every minted token gets an id of its own: derived from its fields when none is given
        // (the authority draws no randomness), so tokens minted at different times differ...
        let ids = try (0..<20).map { index in
            try authority.decode(Array(authority.mint(board: "plans", role: .read, expires: nil, subject: "c", issued: 1_000 + Double(index)).utf8)).get().tokenID
        }
        #expect(Set(ids).count == 20 && !ids.contains(nil))
        // ...and ids a host draws from its generator (`token` draws one per token) are its own too.
        var generator = SystemRandomNumberGenerator()
        let drawn = (0..<20).map { _ in TokenAuthority.hex16(UInt64.random(in: 1...UInt64.max, using: &generator)) }
        #expect(Set(drawn).count == 20 && drawn.allSatisfy { $0.count == 16 })
        #expect(TokenAuthority.hex16(0xAB) == "00000000000000ab")
    }

    /// A token minted before tokens had ids and issue times (`board=...;exp=...;sub=...` only).
    static func legacyToken(_ payload: String) -> [UInt8] {
        let bytes = Array(payload.utf8)
        return Array([TokenAuthority.prefix, Base64URL.encode(bytes), Base64URL.encode(HMAC.sha256(key: secret, message: bytes))].joined(separator: ".").utf8)
    }

    @Test func tokensMintedBeforeTokenIDsStillVerify() throws {
        let authority = try TokenAuthority(secret: Self.secret)
        let old = Self.legacyToken("board=plans;role=write;exp=never;sub=old")
        #expect(authority.verify(old, board: "plans", now: 4e9) == .success(AccessGrant(board: "plans", role: .write, expires: nil, subject: "old")))
        // Only its subject revokes it (it has no id), whenever that revocation was made.
        var revocations = Revocations()
        revocations.tokenIDs = ["old"]
        #expect(!revocations.revokes(try authority.verify(old, board: "plans", now: 0).get()))
        revocations.subjects = ["old": 1]
        #expect(revocations.revokes(try authority.verify(old, board: "plans", now: 0).get()))
    }

    /// Swift's `String ==` is canonical equivalence: KELVIN SIGN (U+212A) + "x" equals "Kx".
    @Test func boardNamesCompareAsBytesAndAreCheckedBeforeTheToken() throws {
        let authority = try TokenAuthority(secret: Self.secret)
        let kelvin = "\u{212A}x"
        #expect(kelvin == "Kx", "the premise: String equality is canonical equivalence")
        let token = Array(try authority.mint(board: "Kx", role: .write, expires: nil, subject: "ann").utf8)
        #expect(authority.verify(token, board: kelvin, now: 0) == .failure(.invalidBoardName))
        #expect(authority.verify([], board: kelvin, now: 0) == .failure(.invalidBoardName), "the name is refused before the token is looked at")
        #expect((try? authority.verify(token, board: "Kx", now: 0).get())?.board == "Kx")
    }

    @Test func revocationLinesRoundTripAndIgnoreWhatTheyCannotRead() {
        let text = "# revoked\nsubject ann 1764608400123\n\ntoken 3f9c2a71d04b8e65\nsubject bob notatime\nfrobnicate x\nsubject a;b 5\n"
        let revocations = Revocations(parsing: text)
        #expect(revocations.subjects == ["ann": 1_764_608_400.123])
        #expect(revocations.tokenIDs == ["3f9c2a71d04b8e65"])
        #expect(revocations.ignoredLines == 3)
        #expect(Revocations(parsing: revocations.lines.joined(separator: "\n")).lines == revocations.lines)
        #expect(Revocations.line(subject: "ann", at: 1_764_608_400.123) == "subject ann 1764608400123")
        // A subject's revocation covers its tokens minted up to it, not those minted after.
        let at = 1_764_608_400.123
        func grant(issued: Double?) -> AccessGrant { AccessGrant(board: "b", role: .write, expires: nil, subject: "ann", tokenID: "x", issued: issued) }
        #expect(revocations.revokes(grant(issued: at - 60)))
        #expect(revocations.revokes(grant(issued: at)))
        #expect(!revocations.revokes(grant(issued: at + 0.001)))
        #expect(revocations.revokes(grant(issued: nil)))
    }

    @Test func forgedTamperedAndMalformedTokensAreRefused() throws {
        let authority = try TokenAuthority(secret: Self.secret)
        let other = try TokenAuthority(secret: Array("another secret, sixteen+ bytes".utf8))
        let forged = Array(try other.mint(board: "plans", role: .write, expires: nil, subject: "eve").utf8)
        #expect(authority.verify(forged, board: "plans", now: 0) == .failure(.badSignature))
        // A read token with its payload rewritten to say write keeps the old signature.
        let read = try authority.mint(board: "plans", role: .read, expires: nil, subject: "ann")
        let parts = read.split(separator: ".").map(String.init)
        let payload = String(decoding: Base64URL.decode(Array(parts[1].utf8))!, as: UTF8.self)
        let rewritten = Base64URL.encode(Array(payload.replacingOccurrences(of: "role=read", with: "role=write").utf8))
        let tampered = Array([parts[0], rewritten, parts[2]].joined(separator: ".").utf8)
        #expect(authority.verify(tampered, board: "plans", now: 0) == .failure(.badSignature))
        for bad in ["", "bst1", "bst1..", "bst2.a.b", "bst1.!!!.???", "bst1.YQ.YQ.YQ", String(repeating: "x", count: 5000)] {
            let result = authority.verify(Array(bad.utf8), board: "plans", now: 0)
            #expect(result == .failure(bad.isEmpty ? .missing : .malformed) || result == .failure(.badSignature), "\(bad.prefix(20)): \(result)")
        }
        #expect(throws: AccessSetupError.self) { try TokenAuthority(secret: Array("short".utf8)) }
        #expect(throws: AccessSetupError.self) { try authority.mint(board: "../x", role: .read, expires: nil, subject: "a") }
        #expect(throws: AccessSetupError.self) { try authority.mint(board: "plans", role: .read, expires: nil, subject: "a;role=write") }
    }

    @Test func durations() {
        #expect(TokenAuthority.parseDuration("90s") == 90)
        #expect(TokenAuthority.parseDuration("15m") == 900)
        #expect(TokenAuthority.parseDuration("12h") == 43_200)
        #expect(TokenAuthority.parseDuration("30d") == 2_592_000)
        for bad in ["", "s", "10", "10y", "-5m", "0h", "infd"] { #expect(TokenAuthority.parseDuration(bad) == nil, "\(bad)") }
    }
}

/// A server endpoint with access control, driven over `VirtualNet`.
@Suite struct AccessEndpointTests {
    static let authority = try! TokenAuthority(secret: AccessTokenTests.secret)

    static func server(clock: Double = 1_000) throws -> (MemoryFileSystem, VirtualNet, server: Int, log: LogLines) {
        let log = LogLines()
        var options = SyncEndpoint.Options()
        options.access = SyncEndpoint.AccessControl(authority: authority, wallClock: { clock })
        options.log = { log.append($0) }
        let (fs, net, server) = try EndpointTests.serverOnSimulatedDisk(options: options)
        return (fs, net, server, log)
    }

    final class LogLines: @unchecked Sendable {  // the test's thread only
        var lines: [String] = []
        func append(_ line: String) { lines.append(line) }
    }

    static func peer(_ net: VirtualNet, board: String, token: String?, id: UInt64, edits: (inout Replica) throws -> Void = { _ in }) throws -> (Int, MemoryReplicaStore) {
        var replica = Replica(id: ReplicaID(id))
        try edits(&replica)
        let store = MemoryReplicaStore(replica: replica)
        var options = SyncEndpoint.Options()
        options.credentials = token.map { Array($0.utf8) } ?? []
        return (net.add(SyncEndpoint(board: board, store: store, options: options, now: net.now)), store)
    }

    @Test func withoutAValidTokenOneErrorAndNoHintWhetherTheBoardExists() throws {
        let (fs, net, server, log) = try Self.server()
        // "plans" exists (a writer made it); "secret" does not.
        let writer = try Self.authority.mint(board: "plans", role: .write, expires: nil, subject: "ann")
        let (owner, _) = try Self.peer(net, board: "plans", token: writer, id: 0xA, edits: { _ = try $0.setCanvasSize(CodableSize(width: 5, height: 5)) })
        net.connect(owner, to: server)
        net.deliver()
        #expect(fs.isDirectory("/data/plans.boardpkg"))
        var replies: [String: String] = [:]
        let expired = try Self.authority.mint(board: "plans", role: .write, expires: 999, subject: "ann")
        let forged = try TokenAuthority(secret: Array("not the server's secret at all".utf8)).mint(board: "plans", role: .write, expires: nil, subject: "eve")
        let otherBoard = try Self.authority.mint(board: "notes", role: .write, expires: nil, subject: "ann")
        // An expired token (signed, for this board) is told so, that its holder may get a fresh one.
        let (late, _) = try Self.peer(net, board: "plans", token: expired, id: 0xB)
        net.connect(late, to: server)
        net.deliver()
        #expect(net.endpoints[late].lastCloseReason?.code == .tokenExpired && net.endpoints[late].lastCloseReason?.remote == true,
                "\(String(describing: net.endpoints[late].lastCloseReason))")
        for (label, board, token) in [("none", "plans", nil), ("forged", "plans", forged),
                                      ("other board", "plans", otherBoard), ("missing board", "secret", nil),
                                      ("missing board, other token", "secret", writer)] as [(String, String, String?)] {
            let (peer, store) = try Self.peer(net, board: board, token: token, id: 0xB, edits: { _ = try $0.setCanvasSize(CodableSize(width: 9, height: 9)) })
            let link = net.connect(peer, to: server)
            net.deliver()
            let reason = net.endpoints[peer].lastCloseReason
            #expect(reason?.code == .unauthorized && reason?.remote == true, "\(label): \(String(describing: reason))")
            replies[label] = reason?.message
            #expect(!net.links[link].up, "\(label): the connection is closed")
            #expect(store.replica.snapshot().canvasSize != CodableSize(width: 5, height: 5), "\(label): nothing of the board was sent")
        }
        #expect(Set(replies.values) == ["access denied"], "the same words whatever the reason: \(replies)")
        #expect(!fs.isDirectory("/data/secret.boardpkg"), "no board is created for someone without access")
        #expect(!fs.isDirectory("/data/notes.boardpkg"))
        let plans = try #require(net.endpoints[server].boards["plans"]?.store.replica)
        #expect(plans.snapshot().canvasSize == CodableSize(width: 5, height: 5), "nothing a refused peer sent was merged")
        // The operator's log says why.
        #expect(log.lines.contains { $0.contains("expired") } && log.lines.contains { $0.contains("not signed with this server's secret") }
                && log.lines.contains { $0.contains("another board ('notes')") } && log.lines.contains { $0.contains("no token") })
    }

    @Test func aReadOnlySessionReceivesEverythingAndItsWritesAreRefusedNeverRelayed() throws {
        let (_, net, server, _) = try Self.server()
        let writer = try Self.authority.mint(board: "plans", role: .write, expires: nil, subject: "ann")
        let reader = try Self.authority.mint(board: "plans", role: .read, expires: 2_000, subject: "rob")
        let (owner, ownerStore) = try Self.peer(net, board: "plans", token: writer, id: 0xA)
        net.connect(owner, to: server)
        net.deliver()
        try net.endpoints[owner].edit("plans", now: net.now) { try $0.setCanvasSize(CodableSize(width: 7, height: 7)) }
        net.deliver()
        // A mirror with nothing of its own receives everything and stays connected.
        let (mirror, mirrorStore) = try Self.peer(net, board: "plans", token: reader, id: 0xC)
        let mirrorLink = net.connect(mirror, to: server)
        net.deliver()
        #expect(mirrorStore.replica.snapshot().canvasSize == CodableSize(width: 7, height: 7))
        #expect(net.links[mirrorLink].up)
        // Edits the writer makes later stream to the reader live.
        try net.endpoints[owner].edit("plans", now: net.now) { try $0.setCanvasSize(CodableSize(width: 8, height: 8)) }
        net.deliver()
        #expect(mirrorStore.replica.snapshot().canvasSize == CodableSize(width: 8, height: 8))
        // The reader edits: refused with readOnly, never applied, never relayed.
        try net.endpoints[mirror].edit("plans", now: net.now) { try $0.setCanvasSize(CodableSize(width: 66, height: 66)) }
        net.deliver()
        #expect(net.endpoints[mirror].lastCloseReason?.code == .readOnly, "\(String(describing: net.endpoints[mirror].lastCloseReason))")
        #expect(!net.links[mirrorLink].up)
        #expect(net.endpoints[server].boards["plans"]?.store.replica.snapshot().canvasSize == CodableSize(width: 8, height: 8))
        #expect(ownerStore.replica.snapshot().canvasSize == CodableSize(width: 8, height: 8))
        // A reader that arrives holding edits of its own is refused the same way.
        let (other, _) = try Self.peer(net, board: "plans", token: reader, id: 0xD, edits: { _ = try $0.setCanvasSize(CodableSize(width: 99, height: 99)) })
        net.connect(other, to: server)
        net.deliver()
        #expect(net.endpoints[other].lastCloseReason?.code == .readOnly)
        #expect(net.endpoints[server].boards["plans"]?.store.replica.snapshot().canvasSize == CodableSize(width: 8, height: 8))
    }

    @Test func aReaderIsNeverAskedForImagesAndCannotUploadThem() throws {
        let (_, net, server, _) = try Self.server()
        let reader = try Self.authority.mint(board: "pics", role: .read, expires: nil, subject: "rob")
        let png = Data(PNGEncoder.solid(width: 2, height: 2, red: 1, green: 2, blue: 3))
        // The reader holds a sticker and its image; the server has neither and must not take them.
        let (peer, _) = try Self.peer(net, board: "pics", token: reader, id: 0xE, edits: { _ = try $0.addSticker(imagePNG: png, at: CodablePoint(x: 1, y: 1)) })
        net.connect(peer, to: server)
        net.deliver()
        let replica = try #require(net.endpoints[server].boards["pics"]?.store.replica)
        #expect(replica.itemIDs.isEmpty)
        #expect(replica.assets.data(for: AssetHash.of(png)) == nil)
        #expect(net.endpoints[peer].lastCloseReason?.code == .readOnly)
    }
}

/// Authorship: a write token's subject authors only replica ids it owns (bound at a replica's
/// first operation, recorded in the board's package); operations of other replicas come only
/// through peer tokens (trusted relays): a writer's are dropped, never applied.
@Suite struct AuthorshipTests {
    static let authority = AccessEndpointTests.authority

    static func token(_ subject: String, _ role: AccessRole = .write) throws -> String {
        try authority.mint(board: "plans", role: role, expires: nil, subject: subject)
    }

    static func canvas(_ replica: Replica) -> CodableSize { replica.snapshot().canvasSize }

    /// A server with access control and ann (replica 0xA, write token) connected, her canvas 5x5.
    static func annOnline() throws -> (MemoryFileSystem, VirtualNet, server: Int, log: AccessEndpointTests.LogLines) {
        let (fs, net, server, log) = try AccessEndpointTests.server()
        let (ann, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("ann"), id: 0xA,
                                                     edits: { _ = try $0.setCanvasSize(CodableSize(width: 5, height: 5)) })
        net.connect(ann, to: server)
        net.deliver()
        return (fs, net, server, log)
    }

    @Test func aSubjectCannotSayHelloAsAnotherSubjectsReplicaEvenAfterARestart() throws {
        let (fs, net, server, log) = try Self.annOnline()
        #expect(try fs.readFile("/data/plans.boardpkg/sync/authors") == Array("a ann\n".utf8))
        // Eve, with a valid write token of her own, claims ann's replica id.
        let (eve, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("eve"), id: 0xA,
                                                     edits: { _ = try $0.setCanvasSize(CodableSize(width: 66, height: 66)) })
        net.connect(eve, to: server)
        net.deliver()
        #expect(net.endpoints[eve].lastCloseReason?.code == .notAuthor, "\(String(describing: net.endpoints[eve].lastCloseReason))")
        #expect(Self.canvas(try #require(net.endpoints[server].boards["plans"]?.store.replica)) == CodableSize(width: 5, height: 5))
        #expect(log.lines.contains { $0.contains("subject 'eve' tried to author as replica") })
        // The binding is in the package: a restarted server remembers it.
        var options = SyncEndpoint.Options()
        options.access = SyncEndpoint.AccessControl(authority: Self.authority, wallClock: { 1_000 })
        let restarted = net.add(EndpointTests.serverEndpoint(fs, ids: EndpointTests.SeededIDs(), options: options))
        net.endpoints[server].shutdown(save: true, now: net.now)
        for board in net.endpoints[server].boards.values { board.store.closeStore() }
        let (eveAgain, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("eve"), id: 0xA,
                                                          edits: { _ = try $0.setCanvasSize(CodableSize(width: 66, height: 66)) })
        net.connect(eveAgain, to: restarted)
        net.deliver()
        #expect(net.endpoints[eveAgain].lastCloseReason?.code == .notAuthor)
        // Ann herself is welcome, and her own edits still go through.
        let (annAgain, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("ann"), id: 0xA,
                                                          edits: { _ = try $0.setCanvasSize(CodableSize(width: 5, height: 5)) })
        let link = net.connect(annAgain, to: restarted)
        net.deliver()
        #expect(net.links[link].up)
        try net.endpoints[annAgain].edit("plans", now: net.now) { try $0.setCanvasSize(CodableSize(width: 6, height: 6)) }
        net.deliver()
        #expect(Self.canvas(try #require(net.endpoints[restarted].boards["plans"]?.store.replica)) == CodableSize(width: 6, height: 6))
    }

    @Test func aDamagedAuthorsFileRefusesWritersClearlyAndReadersStillRead() throws {
        let (fs, net, server, log) = try Self.annOnline()
        try fs.writeFile("/data/plans.boardpkg/sync/authors", Array("garbage\n".utf8))
        // A fresh server endpoint reads the damaged file when the first writer arrives.
        let restarted = Self.restart(fs, net, stopping: server, log: log)
        let (writer, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("ann"), id: 0xA)
        net.connect(writer, to: restarted)
        net.deliver()
        let reason = net.endpoints[writer].lastCloseReason
        #expect(reason?.code == .internalError && reason?.message.contains("record of authors") == true, "\(String(describing: reason))")
        // The client is told nothing of the server's files; the operator's log names the file.
        #expect(reason?.message.contains("/data") == false && reason?.message.contains("sync/authors") == false, "\(String(describing: reason))")
        let (reader, readerStore) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("rob", .read), id: 0xC)
        let link = net.connect(reader, to: restarted)
        net.deliver()
        #expect(net.links[link].up)
        #expect(Self.canvas(readerStore.replica) == CodableSize(width: 5, height: 5), "nothing saved was lost")
        #expect(log.lines.contains { $0.contains("/data/plans.boardpkg/sync/authors") }, "\(log.lines)")
    }

    /// A server endpoint with access control on `fs` (as after a restart).
    static func restart(_ fs: MemoryFileSystem, _ net: VirtualNet, stopping server: Int, log: AccessEndpointTests.LogLines? = nil) -> Int {
        net.endpoints[server].shutdown(save: true, now: net.now)
        for board in net.endpoints[server].boards.values { board.store.closeStore() }
        var options = SyncEndpoint.Options()
        options.access = SyncEndpoint.AccessControl(authority: Self.authority, wallClock: { 1_000 })
        if let log { options.log = { log.append($0) } }
        return net.add(EndpointTests.serverEndpoint(fs, ids: EndpointTests.SeededIDs(), options: options))
    }

    /// Replica ids are public (the high word of every item id). One whose operations reached the
    /// board through a peer token, or from before access control, belongs to nobody: a write
    /// token cannot take it over by saying HELLO under it, then author as it.
    @Test func aReplicaIdTheBoardHasOperationsOfCannotBeTakenOverByAWriter() throws {
        let (fs, net, server, log) = try Self.annOnline()
        // Carol's edits arrive through a relay (a peer token); carol never connects herself.
        var carol = Replica(id: ReplicaID(0xC))
        _ = try carol.setCanvasSize(CodableSize(width: 9, height: 9))
        let carolOps = carol.fullState().operations
        let (relay, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("hub-2", .peer), id: 0xD, edits: { try $0.apply(carolOps) })
        net.connect(relay, to: server)
        net.deliver()
        #expect(Self.canvas(try #require(net.endpoints[server].boards["plans"]?.store.replica)) == CodableSize(width: 9, height: 9))
        // Mallory, with a write token of her own, says HELLO as carol and edits as her.
        // (Her first edit is carol's own, operation for operation: the board holds it already.)
        let (mallory, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("mallory"), id: 0xC, edits: {
            _ = try $0.setCanvasSize(CodableSize(width: 9, height: 9))
            _ = try $0.setCanvasSize(CodableSize(width: 66, height: 66))
        })
        net.connect(mallory, to: server)
        net.deliver()
        #expect(net.endpoints[mallory].lastCloseReason?.code == .notAuthor, "\(String(describing: net.endpoints[mallory].lastCloseReason))")
        #expect(Self.canvas(try #require(net.endpoints[server].boards["plans"]?.store.replica)) == CodableSize(width: 9, height: 9))
        #expect(log.lines.contains { $0.contains("whose operations the board already holds unbound") }, "\(log.lines)")
        #expect(try fs.readFile("/data/plans.boardpkg/sync/authors") == Array("a ann\n".utf8), "nothing was bound to mallory")

        // A board from before access control: bob edited it when the server had no secret.
        let open = MemoryFileSystem()
        try open.createDirectory("/data")
        let plain = VirtualNet()
        let before = plain.add(EndpointTests.serverEndpoint(open, ids: EndpointTests.SeededIDs()))
        let (bob, _) = try AccessEndpointTests.peer(plain, board: "plans", token: nil, id: 0xB, edits: { _ = try $0.setCanvasSize(CodableSize(width: 3, height: 3)) })
        plain.connect(bob, to: before)
        plain.deliver()
        let guarded = Self.restart(open, plain, stopping: before)
        let (eve, _) = try AccessEndpointTests.peer(plain, board: "plans", token: try Self.token("eve"), id: 0xB, edits: {
            _ = try $0.setCanvasSize(CodableSize(width: 3, height: 3))
            _ = try $0.setCanvasSize(CodableSize(width: 77, height: 77))
        })
        plain.connect(eve, to: guarded)
        plain.deliver()
        #expect(plain.endpoints[eve].lastCloseReason?.code == .notAuthor, "\(String(describing: plain.endpoints[eve].lastCloseReason))")
        #expect(Self.canvas(try #require(plain.endpoints[guarded].boards["plans"]?.store.replica)) == CodableSize(width: 3, height: 3))
        #expect(!open.exists("/data/plans.boardpkg/sync/authors"))
    }

    /// `sync/authors` grows only by a replica's first operation: tabs that only look (read-only
    /// or idle, however many a write token opens) bind nothing.
    @Test func onlyAReplicasFirstOperationBindsIt() throws {
        let (fs, net, server, log) = try Self.annOnline()
        let mallory = try Self.token("mallory")
        for index in 0..<300 {
            let (tab, _) = try AccessEndpointTests.peer(net, board: "plans", token: mallory, id: 0x1_0000 + UInt64(index))
            let link = net.connect(tab, to: server)
            net.deliver()
            #expect(net.links[link].up)
            net.cut(link)
        }
        #expect(try fs.readFile("/data/plans.boardpkg/sync/authors") == Array("a ann\n".utf8), "idle tabs bind nothing")
        let (tab, _) = try AccessEndpointTests.peer(net, board: "plans", token: mallory, id: 0x2_0000)
        let link = net.connect(tab, to: server)
        net.deliver()
        try net.endpoints[tab].edit("plans", now: net.now) { try $0.setCanvasSize(CodableSize(width: 9, height: 9)) }
        net.deliver()
        #expect(net.links[link].up)
        #expect(try fs.readFile("/data/plans.boardpkg/sync/authors") == Array("a ann\n20000 mallory\n".utf8))
        #expect(log.lines.contains { $0.contains("replica 0000000000020000 bound to subject 'mallory' at its first operation") }, "\(log.lines)")
    }

    /// Each subject owns at most `maxReplicasPerSubject` replica ids of a board (1,024) and the
    /// board at most `maxAuthorsPerBoard` bindings (65,536, whose file stays far below the 8 MiB
    /// that loads): one write token opening editing tab after tab cannot make the table
    /// unreadable (which refused every writer of the board) or crowd the others out.
    @Test func replicaIdsAreBoundedPerSubjectAndPerBoardAndTheBoardKeepsWorking() throws {
        #expect(BoardHub.defaultMaxReplicasPerSubject == 1_024 && BoardHub.defaultMaxAuthorsPerBoard == 65_536)
        #expect(BoardHub.defaultMaxAuthorsPerBoard * (16 + 1 + 64 + 1) < BoardPackage.maxAuthorsFileBytes)
        let (fs, net, server, log) = try Self.annOnline()
        let hub = try #require(net.endpoints[server].boards["plans"]?.hub)
        hub.maxReplicasPerSubject = 4
        hub.maxAuthorsPerBoard = 7
        func editingTab(_ subject: String, _ id: UInt64) throws -> (Int, Int) {
            let (tab, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token(subject), id: id, edits: {
                _ = try $0.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 2, points: [CodablePoint(x: 1, y: 1), CodablePoint(x: 2, y: 2)])
            })
            let link = net.connect(tab, to: server)
            net.deliver()
            return (tab, link)
        }
        var codes: [SessionError.Code?] = []
        for index in 0..<6 {
            let (tab, link) = try editingTab("mallory", 0x2_0000 + UInt64(index))
            codes.append(net.links[link].up ? nil : net.endpoints[tab].lastCloseReason?.code)
        }
        #expect(codes == [nil, nil, nil, nil, .limitReached, .limitReached], "the subject's fifth replica id and later are refused")
        #expect(log.lines.contains { $0.contains("owns its limit of 4 replica ids") })
        // Other subjects still bind (ann, mallory's four, bob, carol: seven), then the board is full.
        for (subject, id) in [("bob", UInt64(0xB)), ("carol", 0xC)] {
            let (tab, link) = try editingTab(subject, id)
            #expect(net.links[link].up, "\(subject): \(String(describing: net.endpoints[tab].lastCloseReason))")
        }
        let (dave, daveLink) = try editingTab("dave", 0xDA)
        #expect(!net.links[daveLink].up && net.endpoints[dave].lastCloseReason?.code == .limitReached)
        let held = try #require(net.endpoints[server].boards["plans"]?.store.replica)
        #expect(held.versionVector[ReplicaID(0xC)] > 0 && held.versionVector[ReplicaID(0xDA)] == 0 && held.versionVector[ReplicaID(0x2_0004)] == 0)
        let lines = try fs.readFile("/data/plans.boardpkg/sync/authors").split(separator: UInt8(ascii: "\n"))
        #expect(lines.count == 7)
        // Replicas already bound keep writing, and a restarted server reads the table back.
        let restarted = Self.restart(fs, net, stopping: server)
        let (annAgain, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("ann"), id: 0xA,
                                                          edits: { _ = try $0.setCanvasSize(CodableSize(width: 5, height: 5)) })
        let annLink = net.connect(annAgain, to: restarted)
        net.deliver()
        try net.endpoints[annAgain].edit("plans", now: net.now) { try $0.setCanvasSize(CodableSize(width: 8, height: 8)) }
        net.deliver()
        #expect(net.links[annLink].up)
        #expect(Self.canvas(try #require(net.endpoints[restarted].boards["plans"]?.store.replica)) == CodableSize(width: 8, height: 8))
    }

    /// A binding torn by a crash mid-append never took effect, and the next binding after it is
    /// read back as written (not glued onto the torn bytes).
    @Test func aTornBindingIsCutOffBeforeTheNextOne() throws {
        let (fs, net, server, _) = try Self.annOnline()
        let restarted = Self.restart(fs, net, stopping: server)
        try fs.appendFile("/data/plans.boardpkg/sync/authors", Array("b".utf8))  // "b bob\n", torn
        let (carol, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("carol"), id: 0xC,
                                                       edits: { _ = try $0.setCanvasSize(CodableSize(width: 4, height: 4)) })
        net.connect(carol, to: restarted)
        net.deliver()
        #expect(try fs.readFile("/data/plans.boardpkg/sync/authors") == Array("a ann\nc carol\n".utf8))
        // Another restart: carol's binding holds (eve cannot author as replica c).
        let again = Self.restart(fs, net, stopping: restarted)
        let (eve, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("eve"), id: 0xC, edits: {
            _ = try $0.setCanvasSize(CodableSize(width: 4, height: 4))
            _ = try $0.setCanvasSize(CodableSize(width: 66, height: 66))
        })
        net.connect(eve, to: again)
        net.deliver()
        #expect(net.endpoints[eve].lastCloseReason?.code == .notAuthor, "\(String(describing: net.endpoints[eve].lastCloseReason))")
        #expect(Self.canvas(try #require(net.endpoints[again].boards["plans"]?.store.replica)) == CodableSize(width: 4, height: 4))
    }

    @Test func operationsOfAnotherReplicaComeOnlyThroughAPeerToken() throws {
        let (_, net, server, log) = try Self.annOnline()
        // Eve forges operations under ann's id (sequence numbers ann has not used yet) and
        // carries them in her own replica, which she owns.
        var forger = Replica(id: ReplicaID(0xA))
        for size in 1...4 { _ = try forger.setCanvasSize(CodableSize(width: Double(size), height: 77)) }
        let forged = forger.fullState().operations.filter { $0.id.seq > 2 }
        let (eve, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("eve"), id: 0xE, edits: {
            try $0.apply(forged)
            _ = try $0.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 2, points: [CodablePoint(x: 1, y: 1), CodablePoint(x: 2, y: 2)])
        })
        net.connect(eve, to: server)
        net.deliver()
        let held = try #require(net.endpoints[server].boards["plans"]?.store.replica)
        #expect(Self.canvas(held) == CodableSize(width: 5, height: 5), "nothing forged was applied")
        #expect(held.versionVector[ReplicaID(0xA)] == 1)
        #expect(held.versionVector[ReplicaID(0xE)] > 0, "eve's own operation was (the forged ones were dropped)")
        #expect(log.lines.contains { $0.contains("operations of replica 000000000000000a, which belongs to 'ann', sent by subject 'eve'") }, "\(log.lines)")
        // Carol edits offline; a write token may not carry her operations for her...
        let (carolPeer, _) = try AccessEndpointTests.peer(net, board: "plans", token: nil, id: 0xC,
                                                           edits: { _ = try $0.setCanvasSize(CodableSize(width: 9, height: 9)) })
        let carolOps = try #require(net.endpoints[carolPeer].boards["plans"]?.store.replica.fullState().operations)
        let (bob, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("bob"), id: 0xB, edits: { try $0.apply(carolOps) })
        net.connect(bob, to: server)
        net.deliver()
        #expect(try #require(net.endpoints[server].boards["plans"]?.store.replica).versionVector[ReplicaID(0xC)] == 0)
        #expect(log.lines.contains { $0.contains("operations of replica 000000000000000c, which no subject owns, sent by subject 'bob'") })
        // ...a peer token (a trusted relay) may.
        let (relay, _) = try AccessEndpointTests.peer(net, board: "plans", token: try Self.token("hub-2", .peer), id: 0xD, edits: { try $0.apply(carolOps) })
        let link = net.connect(relay, to: server)
        net.deliver()
        #expect(net.links[link].up)
        #expect(Self.canvas(try #require(net.endpoints[server].boards["plans"]?.store.replica)) == CodableSize(width: 9, height: 9))
    }
}

/// Per-connection and per-board limits of a server endpoint (docs/PROTOCOL.md, Limits).
@Suite struct LimitTests {
    @Test func aConnectionMustSayHelloInTime() throws {
        let (_, net, server) = try EndpointTests.serverOnSimulatedDisk()
        net.endpoints[server].accept(99, now: 0)
        // A trickle of keep-alive-sized bytes does not extend the handshake deadline.
        for second in 1...9 {
            net.now = Double(second)
            net.endpoints[server].handleTimers(now: net.now)
            // A frame header announcing 100 bytes, then one byte a second.
            net.endpoints[server].receive(99, second == 1 ? [100, 0, 0, 0] : [1], now: net.now)
            #expect(!net.endpoints[server].isFinished(99), "second \(second)")
        }
        net.now = 10
        net.endpoints[server].handleTimers(now: net.now)
        _ = net.endpoints[server].output(for: 99, now: net.now)
        #expect(net.endpoints[server].isFinished(99))
        #expect(net.endpoints[server].session(99)?.closeReason?.message == "no HELLO within 10 s")
    }

    @Test func aConnectionSendingTooFastIsClosedWhileASteadyOneIsNot() throws {
        var options = SyncEndpoint.Options()
        options.maxOperationsPerSecond = 100
        let (_, net, server) = try EndpointTests.serverOnSimulatedDisk(options: options)
        let (fast, _) = try AccessEndpointTests.peer(net, board: "b", token: nil, id: 0xF)
        let (steady, _) = try AccessEndpointTests.peer(net, board: "b", token: nil, id: 0x5)
        let fastLink = net.connect(fast, to: server)
        let steadyLink = net.connect(steady, to: server)
        net.deliver()
        for second in 1...8 {
            net.now = Double(second)
            for step in 0..<80 {
                try net.endpoints[steady].edit("b", now: net.now) { try $0.setCanvasSize(CodableSize(width: Double(second * 100 + step), height: 1)) }
            }
            if second == 2 {
                // 600 operations at once: more than the 500-operation burst.
                for step in 0..<600 {
                    try net.endpoints[fast].edit("b", now: net.now) { try $0.setCanvasSize(CodableSize(width: Double(step + 1), height: 2)) }
                }
            }
            net.deliver()
        }
        #expect(net.endpoints[fast].lastCloseReason?.code == .tooFast, "\(String(describing: net.endpoints[fast].lastCloseReason))")
        #expect(!net.links[fastLink].up)
        #expect(net.links[steadyLink].up, "80 operations a second stay under 100")
        let held = try #require(net.endpoints[server].boards["b"]?.store.replica)
        #expect(held.versionVector[ReplicaID(0x5)] == 640)
        #expect(held.versionVector[ReplicaID(0xF)] == 0, "the burst that broke the limit was not merged")
    }

    @Test func aBoardRefusesImagesBeyondItsLimit() throws {
        var options = SyncEndpoint.Options()
        options.maxAssetsPerBoard = 1
        let (_, net, server) = try EndpointTests.serverOnSimulatedDisk(options: options)
        let red = Data(PNGEncoder.solid(width: 2, height: 2, red: 200, green: 0, blue: 0))
        let blue = Data(PNGEncoder.solid(width: 2, height: 2, red: 0, green: 0, blue: 200))
        let (peer, _) = try AccessEndpointTests.peer(net, board: "b", token: nil, id: 0x1, edits: {
            _ = try $0.addSticker(imagePNG: red, at: CodablePoint(x: 1, y: 1))
            _ = try $0.addSticker(imagePNG: blue, at: CodablePoint(x: 2, y: 2))
        })
        net.connect(peer, to: server)
        net.deliver()
        #expect(net.endpoints[peer].lastCloseReason?.code == .limitReached, "\(String(describing: net.endpoints[peer].lastCloseReason))")
        let held = try #require(net.endpoints[server].boards["b"]?.store.replica)
        #expect(held.assets.count == 1)
    }
}

/// A peer that accepts connections checks tokens like a server when it has a secret.
@Suite struct PeerAccessTests {
    @Test func aListeningPeerWithASecretRefusesConnectionsWithoutAToken() throws {
        let net = VirtualNet()
        var options = SyncEndpoint.Options()
        options.access = SyncEndpoint.AccessControl(authority: AccessEndpointTests.authority, wallClock: { 1_000 })
        var held = Replica(id: ReplicaID(0x1))
        _ = try held.setCanvasSize(CodableSize(width: 4, height: 4))
        let listening = net.add(SyncEndpoint(board: "plans", store: MemoryReplicaStore(replica: held), options: options, now: 0))
        let (stranger, strangerStore) = try AccessEndpointTests.peer(net, board: "plans", token: nil, id: 0x2)
        net.connect(stranger, to: listening)
        net.deliver()
        #expect(net.endpoints[stranger].lastCloseReason?.code == .unauthorized)
        #expect(strangerStore.replica.snapshot().canvasSize != CodableSize(width: 4, height: 4), "nothing was sent to a stranger")
        let token = try AccessEndpointTests.authority.mint(board: "plans", role: .write, expires: nil, subject: "friend")
        let (friend, friendStore) = try AccessEndpointTests.peer(net, board: "plans", token: token, id: 0x3)
        let link = net.connect(friend, to: listening)
        net.deliver()
        #expect(net.links[link].up)
        #expect(friendStore.replica.snapshot().canvasSize == CodableSize(width: 4, height: 4))
    }
}

/// A token's authority ends when it expires or is revoked, on open sessions too.
@Suite struct TokenLifetimeTests {
    static let authority = AccessEndpointTests.authority

    /// A server whose wall clock is 1,000 s ahead of the virtual clock, and its revocations.
    static func server() throws -> (VirtualNet, server: Int, RevocationList, AccessEndpointTests.LogLines) {
        let log = AccessEndpointTests.LogLines()
        let revocations = RevocationList()
        let net = VirtualNet()
        var options = SyncEndpoint.Options()
        options.access = SyncEndpoint.AccessControl(authority: authority, wallClock: { [unowned net] in 1_000 + net.now }, revocations: revocations)
        options.log = { log.append($0) }
        let fs = MemoryFileSystem()
        try fs.createDirectory("/data")
        let server = net.add(EndpointTests.serverEndpoint(fs, ids: EndpointTests.SeededIDs(), options: options))
        return (net, server, revocations, log)
    }

    static func online(_ net: VirtualNet, _ server: Int, token: String, id: UInt64) throws -> (peer: Int, link: Int) {
        let (peer, _) = try AccessEndpointTests.peer(net, board: "plans", token: token, id: id)
        let link = net.connect(peer, to: server)
        net.deliver()
        #expect(net.endpoints[peer].session(net.links[link].sessions.0)?.isOpen == true, "the session opened")
        return (peer, link)
    }

    @Test func anOpenSessionClosesWhenItsTokenExpiresAndTheDeadlineSaysWhen() throws {
        let (net, server, _, log) = try Self.server()
        // Expires 3 s from now on the wall clock; keep-alives keep the link busy meanwhile.
        let short = try Self.authority.mint(board: "plans", role: .write, expires: 1_003, subject: "ann")
        let long = try Self.authority.mint(board: "plans", role: .write, expires: 1_000 + 3_600, subject: "bob")
        let (ann, annLink) = try Self.online(net, server, token: short, id: 0xA)
        let (_, bobLink) = try Self.online(net, server, token: long, id: 0xB)
        let deadline = try #require(net.endpoints[server].nextDeadline)
        #expect(deadline <= 3, "the expiry is a deadline of the server: \(deadline)")
        net.advance(until: 2.9)
        #expect(net.links[annLink].up, "open until the token expires")
        net.advance(until: 3.5)
        #expect(!net.links[annLink].up, "closed once the token expired")
        let reason = try #require(net.endpoints[ann].lastCloseReason)
        #expect(reason.code == .tokenExpired && reason.remote, "\(reason)")
        #expect(net.links[bobLink].up, "a session whose token is still valid stays open")
        #expect(log.lines.contains { $0.contains("token expired") }, "\(log.lines)")
        // Dialing again with the same token is refused with the same code.
        let (again, _) = try AccessEndpointTests.peer(net, board: "plans", token: short, id: 0xA)
        net.connect(again, to: server)
        net.deliver()
        #expect(net.endpoints[again].lastCloseReason?.code == .tokenExpired)
    }

    @Test func aWallClockSteppedPastTheExpiryClosesTheSessionAtTheNextTimer() throws {
        let wall = WallClock(1_000)
        let net = VirtualNet()
        var options = SyncEndpoint.Options()
        options.access = SyncEndpoint.AccessControl(authority: Self.authority, wallClock: { wall.now })
        let fs = MemoryFileSystem()
        try fs.createDirectory("/data")
        let server = net.add(EndpointTests.serverEndpoint(fs, ids: EndpointTests.SeededIDs(), options: options))
        let token = try Self.authority.mint(board: "plans", role: .write, expires: 1_600, subject: "ann")
        let (ann, link) = try Self.online(net, server, token: token, id: 0xA)
        wall.now = 2_000  // the host clock moved 0 s; the wall clock 1,000 s
        net.advance(until: 6)  // the next keep-alive
        #expect(!net.links[link].up)
        #expect(net.endpoints[ann].lastCloseReason?.code == .tokenExpired)
    }

    final class WallClock: @unchecked Sendable {  // the test's thread only
        var now: Double
        init(_ now: Double) { self.now = now }
    }

    @Test func revokingATokenOrASubjectClosesItsOpenSessionsAndRefusesIt() throws {
        let (net, server, revocations, log) = try Self.server()
        let annToken = try Self.authority.mint(board: "plans", role: .write, expires: nil, subject: "ann", tokenID: "ann-1", issued: 1_000)
        let bobToken = try Self.authority.mint(board: "plans", role: .read, expires: nil, subject: "bob", tokenID: "bob-1", issued: 1_000)
        let (ann, annLink) = try Self.online(net, server, token: annToken, id: 0xA)
        let (bob, bobLink) = try Self.online(net, server, token: bobToken, id: 0xB)
        // One token, by id: its session closes at once (no timer needed), the other stays.
        revocations.set(Revocations(line: "token ann-1")!, from: "test")
        net.deliver()
        #expect(!net.links[annLink].up, "the revoked token's session is closed")
        #expect(net.endpoints[ann].lastCloseReason == SessionError(.unauthorized, "access revoked", remote: true))
        #expect(net.links[bobLink].up)
        #expect(log.lines.contains { $0.contains("subject 'ann'") && $0.contains("revoked") }, "\(log.lines)")
        let (again, _) = try AccessEndpointTests.peer(net, board: "plans", token: annToken, id: 0xA)
        net.connect(again, to: server)
        net.deliver()
        #expect(net.endpoints[again].lastCloseReason == SessionError(.unauthorized, "access denied", remote: true), "refused at HELLO too")
        // A subject: every token of bob's minted until now; one minted afterwards works.
        var both = Revocations(line: "token ann-1")!
        both.merge(Revocations(line: Revocations.line(subject: "bob", at: 1_000 + net.now))!)
        revocations.set(both, from: "test")
        net.deliver()
        #expect(!net.links[bobLink].up)
        #expect(net.endpoints[bob].lastCloseReason?.code == .unauthorized)
        let fresh = try Self.authority.mint(board: "plans", role: .read, expires: nil, subject: "bob", issued: 1_000 + net.now + 1)
        _ = try Self.online(net, server, token: fresh, id: 0xB)
        // The access control answers the same questions for other hosts (a web view).
        let access = try #require(net.endpoints[server].options.access)
        #expect(access.check(Array(annToken.utf8), board: "plans") == .failure(.revoked))
        let freshGrant = try access.check(Array(fresh.utf8), board: "plans").get()
        #expect(access.recheck(freshGrant) == nil && access.secondsLeft(freshGrant) == nil)
        let expiring = try access.check(Array(try Self.authority.mint(board: "plans", role: .read, expires: 1_060, subject: "c").utf8), board: "plans").get()
        #expect(access.secondsLeft(expiring) == 1_060 - (1_000 + net.now))
    }

    /// `boards` is keyed by `String`: a canonically equivalent name must not find another board.
    @Test func aViewerOfACanonicallyEquivalentNameDoesNotOpenTheBoard() throws {
        let (net, server, _, _) = try Self.server()
        let token = try Self.authority.mint(board: "plans", role: .write, expires: nil, subject: "ann")
        _ = try Self.online(net, server, token: token, id: 0xA)
        #expect(net.endpoints[server].addViewer(board: "plans", now: net.now))
        // "Kx" open; KELVIN SIGN + "x" must not reach it.
        let kx = try Self.authority.mint(board: "Kx", role: .write, expires: nil, subject: "ann")
        let (peer, _) = try AccessEndpointTests.peer(net, board: "Kx", token: kx, id: 0xA)
        net.connect(peer, to: server)
        net.deliver()
        #expect(net.endpoints[server].boards["Kx"] != nil)
        #expect(!net.endpoints[server].addViewer(board: "\u{212A}x", now: net.now), "another name than 'Kx', and not a plain one")
    }
}
