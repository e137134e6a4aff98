import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation
import Testing

/// Real TCP on loopback, real packages in temp directories.
@Suite(.serialized) struct ServerTests {
    /// Issue 23, finding 7: what one sync says it sent is what a fresh copy then says it
    /// received, and a sync with nothing new says 0 both ways (probes and compaction aside).
    @Test func syncCountsAddUp() throws {
        let temp = TempDirectory()
        let server = try ServerFixture(data: temp.path + "/data")
        defer { server.stop() }
        var a = try makePackage(temp.path + "/A.boardpkg", id: 0xA)
        defer { a.close() }
        let sticker = try a.commit { try $0.addSticker(imagePNG: pngA, at: pt(1, 1)) }.item!
        try a.addAsset(pngA)
        for step in 0..<20 { try a.commit { try $0.move(sticker, to: pt(Double(step), 2)) } }  // most are overwritten
        try a.commit { try $0.setCanvasSize(CodableSize(width: 640, height: 480)) }
        let first = try syncOnce(&a, board: "team", server: server.address, timeout: 20)
        #expect(first.operationsSent == 22 && first.operationsReceived == 0, "\(first)")
        let again = try syncOnce(&a, board: "team", server: server.address, timeout: 20)
        #expect(again.operationsSent == 0 && again.operationsReceived == 0, "\(again)")
        var fresh = try makePackage(temp.path + "/B.boardpkg", id: 0xB)
        defer { fresh.close() }
        let copy = try syncOnce(&fresh, board: "team", server: server.address, timeout: 20)
        #expect(copy.operationsReceived == first.operationsSent && copy.operationsSent == 0, "\(copy)")
    }

    @Test func offlineReplicasSyncThroughTheServerAndALateJoinerGetsEverything() throws {
        let temp = TempDirectory()
        let server = try ServerFixture(data: temp.path + "/data")
        defer { server.stop() }
        // Two replicas diverge offline: stickers with different images, strokes, a move.
        var a = try makePackage(temp.path + "/A.boardpkg", id: 0xA)
        var b = try makePackage(temp.path + "/B.boardpkg", id: 0xB)
        let sticker = try a.commit { try $0.addSticker(imagePNG: pngA, at: pt(10, 10)) }.item!
        try a.addAsset(pngA)
        try a.commit { replica in
            let edit = try replica.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 2, points: [pt(0, 0), pt(9, 9)])
            replica.finishStroke()
            return edit
        }
        try b.addAsset(pngB)
        try b.commit { try $0.addSticker(imagePNG: pngB, at: pt(50, 50)) }
        try b.commit { try $0.setBackground(imagePNG: pngB) }

        try syncOnce(&a, board: "team", server: server.address, timeout: 20)
        let reportB = try syncOnce(&b, board: "team", server: server.address, timeout: 20)
        #expect(reportB.operationsReceived == 2)
        try syncOnce(&a, board: "team", server: server.address, timeout: 20)
        #expect(a.replica.missingAssets.isEmpty)
        #expect(b.replica.missingAssets.isEmpty)
        #expect(try canonical(a) == canonical(b), "byte-identical, assets included")
        #expect(a.replica.snapshot().stickers.contains { $0.id == sticker.uuid && $0.imagePNG == pngA })
        #expect(b.replica.snapshot().backgroundPNG == pngB)

        // A third replica joining later gets everything, assets included, and its package is saved.
        var c = try makePackage(temp.path + "/C.boardpkg", id: 0xC)
        try syncOnce(&c, board: "team", server: server.address, timeout: 20)
        #expect(try canonical(c) == canonical(a))
        c.close()
        let reopened = try openPackage(temp.path + "/C.boardpkg")
        #expect(try canonical(reopened) == canonical(a))
        let view = try PackageReader(fileSystem: PosixFileSystem()).read(temp.path + "/C.boardpkg")
        #expect(view.stickers.count == 2)
        #expect(view.backgroundPNG == pngB)
    }

    @Test func aRestartedServerServesEveryAcknowledgedOperation() throws {
        let temp = TempDirectory()
        let data = temp.path + "/data"
        var a = try makePackage(temp.path + "/A.boardpkg", id: 0xA)
        for x in 0..<20 { try a.commit { try $0.addSticker(imagePNG: pngA, at: pt(Double(x), 0)) } }
        var server = try ServerFixture(data: data)
        try syncOnce(&a, board: "keep", server: server.address, timeout: 20)
        // sync returned, so the server acknowledged: the operations are on its disk.
        server.stop()
        server = try ServerFixture(data: data)
        defer { server.stop() }
        var fresh = try makePackage(temp.path + "/Fresh.boardpkg", id: 0xF)
        try syncOnce(&fresh, board: "keep", server: server.address, timeout: 20)
        #expect(fresh.replica.versionVector == a.replica.versionVector)
        #expect(try canonical(fresh) == canonical(a))
    }

    @Test func badClientsGetAnErrorAndAClosedConnectionWhileOthersAreServed() throws {
        let temp = TempDirectory()
        let server = try ServerFixture(data: temp.path + "/data")
        defer { server.stop() }
        var badVersion = Message.hello(Hello(board: "team", replica: ReplicaID(5), version: .empty)).frame()
        badVersion.payload[4] = 9
        let truncated = Array(Message.hello(Hello(board: "team", replica: ReplicaID(5), version: .empty)).frame().encoded().dropLast(3))
        let cases: [(String, [UInt8], SessionError.Code?)] = [
            ("garbage", Array("GET / HTTP/1.1\r\n\r\n".utf8), .frameTooLarge),
            ("oversized length", [0xFF, 0xFF, 0xFF, 0x7F, 0], .frameTooLarge),
            ("wrong protocol version", badVersion.encoded(), .unsupportedVersion),
            ("unknown message type", Frame(type: 0x55, payload: [1]).encoded(), .unknownMessage),
            ("board name escaping the data folder", Message.hello(Hello(board: "../../etc", replica: ReplicaID(5), version: .empty)).frame().encoded(), .badBoardName),
            ("truncated frame, then the client hangs up", truncated, nil),
        ]
        for (name, bytes, code) in cases {
            let reply = rawExchange(server.address, bytes, closeWrite: code == nil)
            if let code {
                #expect(errorCode(in: reply) == code.rawValue, "\(name): reply \(reply.prefix(16))")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: temp.path + "/etc.boardpkg"))
        // The server still serves well-behaved replicas.
        var good = try makePackage(temp.path + "/Good.boardpkg", id: 0x600D)
        try good.commit { try $0.setBackground(asset: nil) }
        let report = try syncOnce(&good, board: "team", server: server.address, timeout: 20)
        #expect(report.operationsSent == 1, "the good client's one edit reached the server")
        let boards = try FileManager.default.contentsOfDirectory(atPath: temp.path + "/data")
        #expect(boards == ["team.boardpkg"])
    }

    @Test func syncingWithNoServerFailsClearly() throws {
        let temp = TempDirectory()
        var a = try makePackage(temp.path + "/A.boardpkg", id: 0xA)
        // A port nothing listens on: bind one, learn it, close it.
        let probe = try ServerFixture(data: temp.path + "/probe")
        let address = probe.address
        probe.stop()
        defer { a.close() }
        let error = syncOnceError("a sync with nothing listening") {
            try syncOnce(&a, board: "team", server: address, timeout: 5)
        }
        #expect(unreachable(error) != nil && "\(error!)".hasPrefix("cannot reach the server: "), "\(String(describing: error))")
    }
}
