import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation
import Testing

/// Issue 7 findings 1, 3 and 4 over real TCP: a hostile client's crafted operations are refused
/// with an ERROR before they are stored or relayed, and a missing image never blocks a sync.
@Suite(.serialized) struct HostilePeerTests {
    /// HELLO as `replica` on `board`, then one OPS frame.
    func attack(_ server: ServerFixture, board: String, as replica: ReplicaID, _ batch: OperationBatch) -> [UInt8] {
        let hello = Message.hello(Hello(board: board, replica: replica, version: .empty)).frame().encoded()
        let ops = Message.operations(batch.encoded()).frame().encoded()
        return rawExchange(server.address, hello + ops, closeWrite: true)
    }

    func serverVersion(_ server: ServerFixture, _ board: String) throws -> VersionVector {
        let host = server.host
        return try server.thread.onLoop { host.boards[board]?.hub.store.replica.versionVector ?? .empty }
    }

    /// A server, and a victim replica with one sticker that has synced with it on board "team".
    func victimOnAServer() throws -> (TempDirectory, ServerFixture, BoardPackage, ItemID) {
        let temp = TempDirectory()
        let server = try ServerFixture(data: temp.path + "/data")
        var victim = try makePackage(temp.path + "/V.boardpkg", id: 0xA)
        let sticker = try victim.commit { try $0.addSticker(imagePNG: pngA, at: pt(0, 0)) }.item!
        try syncOnce(&victim, board: "team", server: server.address, timeout: 20)
        return (temp, server, victim, sticker)
    }

    @Test func inflatedCountersAreRefusedAndTheVictimKeepsSyncing() throws {
        let (temp, server, synced, s) = try victimOnAServer()
        var victim = synced
        defer { server.stop() }
        let before = try serverVersion(server, "team")

        let attacker = ReplicaID(0xBAD)
        let cases: [(String, OperationBatch)] = [
            ("lamport 2^62", OperationBatch(operations: [
                Op(id: OpID(replica: attacker, seq: 1), lamport: Op.maxCounter, payload: .setItem(s, .position(GridPoint(x: 1, y: 1)))),
            ])),
            ("victim's id, seq 2^62", OperationBatch(operations: [
                Op(id: OpID(replica: victim.replica.id, seq: Op.maxCounter), lamport: 5, payload: .setItem(s, .position(GridPoint(x: 1, y: 1)))),
            ])),
            ("covers the victim's future", OperationBatch(operations: [], base: .empty,
                                                         covers: VersionVector([victim.replica.id: Op.maxCounter]))),
            ("a stroke under the sticker's id", OperationBatch(operations: [
                Op(id: OpID(replica: attacker, seq: 1), lamport: 1,
                   payload: .beginStroke(s, StrokeStart(color: Color8(red: 0, green: 0, blue: 0, alpha: 255), width: 16, z: ZKey.initial, points: []))),
            ])),
        ]
        for (name, batch) in cases {
            let reply = attack(server, board: "team", as: attacker, batch)
            #expect(errorCode(in: reply) == SessionError.Code.invalidOperations.rawValue, "\(name)")
            #expect(try serverVersion(server, "team") == before, "\(name): nothing stored")
        }
        // The victim edits and syncs on; its edit reaches the server and is not a "duplicate".
        try victim.commit { try $0.move(s, to: pt(7, 7)) }
        try syncOnce(&victim, board: "team", server: server.address, timeout: 20)
        #expect(try serverVersion(server, "team") == victim.replica.versionVector)
        for op in victim.replica.fullState().operations { #expect(op.lamport < 100) }
        // Reopening the victim's package works (nothing unreadable was logged).
        victim.close()
        _ = try openPackage(temp.path + "/V.boardpkg")
    }

    @Test func operationsForgedUnderAnotherReplicaAreRefusedByThatReplicaLoudly() throws {
        let (temp, server, synced, s) = try victimOnAServer()
        var victim = synced
        defer { victim.close() }
        defer { withExtendedLifetime(temp) { server.stop() } }
        // The attacker says HELLO as itself but sends the victim's next operation.
        let forged = Op(id: OpID(replica: victim.replica.id, seq: victim.replica.lastSeq + 1), lamport: 50,
                        payload: .setItem(s, .position(GridPoint(x: 999, y: 999))))
        _ = attack(server, board: "team", as: ReplicaID(0xBAD), OperationBatch(operations: [forged]))
        // Authorship is the security issue's; what this issue guarantees is that the victim does
        // not sync on silently: its next sync fails, naming the forgery.
        try victim.commit { try $0.move(s, to: pt(3, 3)) }
        let error = syncOnceError("a sync after a forgery") {
            try syncOnce(&victim, board: "team", server: server.address, timeout: 20)
        }
        // Either side may find it first: the server refusing the victim's operation, or the
        // victim refusing the server's.
        switch error {
        case .refused(let refusal)?:
            #expect(refusal.code == .invalidOperations && (refusal.message.contains("forg") || refusal.message.contains("equivocation")), "\(refusal)")
        case .abandoned(let why)?:
            #expect(why.contains("invalid operations") && (why.contains("forg") || why.contains("equivocation")), "\(why)")
        default:
            Issue.record("\(String(describing: error))")
        }
    }

    @Test func anImageNobodyHasNeverBlocksSyncAndArrivesLater() throws {
        let temp = TempDirectory()
        let server = try ServerFixture(data: temp.path + "/data")
        defer { server.stop() }
        var a = try makePackage(temp.path + "/A.boardpkg", id: 0xA)
        var b = try makePackage(temp.path + "/B.boardpkg", id: 0xB)
        // A sticker whose image bytes A does not have (an upload cut short, say).
        let hash = AssetHash.of(pngB)
        let s = try a.commit { try $0.addSticker(asset: hash, at: pt(5, 5)) }.item!
        let first = try syncOnce(&a, board: "team", server: server.address, timeout: 15)
        #expect(first.imagesMissing == 1)
        let second = try syncOnce(&b, board: "team", server: server.address, timeout: 15)
        #expect(second.imagesMissing == 1)
        #expect(b.replica.snapshot().stickers.first { $0.id == s.uuid }?.isPending == true)
        // Later A finds the bytes; the next syncs carry them to the server and on to B.
        try a.addAsset(pngB)
        try syncOnce(&a, board: "team", server: server.address, timeout: 15)
        let third = try syncOnce(&b, board: "team", server: server.address, timeout: 15)
        #expect(third.imagesMissing == 0)
        #expect(b.replica.snapshot().stickers.first { $0.id == s.uuid }?.imagePNG == pngB)
    }

    @Test func aPingInTheSameReadAsTheHelloIsAnswered() throws {
        let temp = TempDirectory()
        let server = try ServerFixture(data: temp.path + "/data")
        defer { server.stop() }
        let hello = Message.hello(Hello(board: "team", replica: ReplicaID(0x1), version: .empty)).frame().encoded()
        let ping = Message.ping(42).frame().encoded()
        let bye = Message.bye.frame().encoded()
        let reply = rawExchange(server.address, hello + ping + bye, closeWrite: true)
        #expect(errorCode(in: reply) == nil)
        var decoder = FrameDecoder(maxFrame: 1 << 24)
        decoder.append(reply)
        var pongs: [UInt64] = []
        while let frame = try decoder.next() {
            if case .pong(let value) = try Message(frame: frame, limits: SessionLimits()) { pongs.append(value) }
        }
        #expect(pongs == [42])
    }

    @Test func aBoardTheServerCannotOpenIsReportedWithTheServersReason() throws {
        let temp = TempDirectory()
        let data = temp.path + "/data"
        let server = try ServerFixture(data: data)
        defer { server.stop() }
        // Another process holds the board's package.
        let other = try makePackage(data + "/held.boardpkg", id: 0xE)
        defer { other.close() }
        var client = try makePackage(temp.path + "/C.boardpkg", id: 0xC)
        defer { client.close() }
        let held = syncOnceError("a board another process holds") {
            try syncOnce(&client, board: "held", server: server.address, timeout: 10)
        }
        guard case .refused(let refusal)? = held else { Issue.record("\(String(describing: held))"); return }
        #expect(refusal.message.contains("cannot be opened here") && refusal.message.contains("another process"), "\(refusal)")
        #expect(!"\(refusal)".contains(data), "the kind of trouble, never the server's paths: \(refusal)")
        // A damaged package: the client hears that it is damaged, not where it lives.
        let broken = try makePackage(data + "/broken.boardpkg", id: 0xF)
        try broken.commit { try $0.setCanvasSize(CodableSize(width: 10, height: 10)) }
        broken.close()
        try Data("not an op log".utf8).write(to: URL(fileURLWithPath: data + "/broken.boardpkg/" + PackageLayout.opLog))
        let damaged = syncOnceError("a damaged board") {
            try syncOnce(&client, board: "broken", server: server.address, timeout: 10)
        }
        guard case .refused(let refusal)? = damaged else { Issue.record("\(String(describing: damaged))"); return }
        #expect(refusal.message.contains("damaged") && !"\(refusal)".contains(temp.path), "\(refusal)")
    }

    @Test func boardsNobodyUsesAreClosedSoNewNamesCostNoDescriptorForever() throws {
        let temp = TempDirectory()
        var options = SyncHost.Options()
        options.idleBoardTimeout = 0.3
        options.maxOpenBoards = 3
        let server = try ServerFixture(data: temp.path + "/data", options: options)
        defer { server.stop() }
        var client = try makePackage(temp.path + "/C.boardpkg", id: 0xC)
        try client.commit { try $0.addSticker(imagePNG: pngA, at: pt(1, 1)) }
        // Ten board names in a row, more than the limit: idle ones close as new ones open.
        for index in 0..<10 {
            try syncOnce(&client, board: "b\(index)", server: server.address, timeout: 20)
        }
        let host = server.host
        #expect(try server.thread.onLoop { host.boards.count } <= 3)
        usleep(600_000)
        #expect(try server.thread.onLoop { host.boards.count } == 0, "idle boards are closed")
        // A closed board's package is unlocked and whole: another process may open it.
        let closed = try openPackage(temp.path + "/data/b0.boardpkg")
        #expect(closed.replica.versionVector == client.replica.versionVector)
        closed.close()
        // And it reopens for the next client.
        var again = try makePackage(temp.path + "/D.boardpkg", id: 0xD)
        try syncOnce(&again, board: "b0", server: server.address, timeout: 20)
        #expect(again.replica.versionVector == client.replica.versionVector)
    }
}
