import BoardCRDT
import BoardModel
import BoardSync
import Foundation
import Testing

/// What a session may still send once it is closed: the goodbye, and live operations the host
/// sent before it. Nothing the open link had queued (an image half served, presence, a PONG).
@Suite struct SessionCloseTests {
    /// A dialer and an acceptor with the handshake done, the acceptor's output empty.
    static func openPair(limits: SessionLimits = SessionLimits()) -> (dialer: SyncSession, acceptor: SyncSession) {
        var dialer = SyncSession(role: .dialer, localReplica: ReplicaID(1), limits: limits)
        var acceptor = SyncSession(role: .acceptor, localReplica: ReplicaID(2), limits: limits)
        acceptor.listen(now: 0)
        dialer.start(board: "b", version: VersionVector(), now: 0)
        _ = acceptor.receive(dialer.takeOutput(), now: 0)
        acceptor.accept(version: VersionVector())
        _ = dialer.receive(acceptor.takeOutput(), now: 0)
        #expect(dialer.isOpen && acceptor.isOpen)
        return (dialer, acceptor)
    }

    /// The kinds of the frames in `bytes`, in order.
    static func kinds(_ bytes: [UInt8]) throws -> [Message.Kind] {
        var decoder = FrameDecoder(maxFrame: 64 << 20)
        decoder.append(bytes)
        var kinds: [Message.Kind] = []
        while let frame = try decoder.next() {
            kinds.append(try Message(frame: frame, limits: SessionLimits()).kind)
        }
        #expect(decoder.bufferedCount == 0, "a frame was cut short")
        return kinds
    }

    /// The acceptor serving a 1 MiB image in 64 KiB chunks, with a presence and a PING's PONG
    /// pending, and one chunk already taken.
    static func servingAnImage() throws -> SyncSession {
        var limits = SessionLimits()
        limits.assetChunk = 64 << 10
        var (dialer, acceptor) = openPair(limits: limits)
        let image = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let hash = AssetHash.of(image)
        dialer.want([AssetRequest(hash: hash)])
        let events = acceptor.receive(dialer.takeOutput(), now: 1)
        #expect(events == [.assetsWanted([AssetRequest(hash: hash)])])
        acceptor.queueAsset(hash, image)
        let first = acceptor.takeOutput(maxBytes: 64 << 10, now: 1)
        #expect(try kinds(first).first == .assetChunk)
        #expect(acceptor.pendingOutputCount > 512 << 10, "most of the image is still queued")
        _ = dialer.handleTimer(now: 6)  // keep-alive: the dialer PINGs
        _ = acceptor.receive(dialer.takeOutput(), now: 6)
        acceptor.sendPresence(Presence(replica: ReplicaID(9), name: "ann", color: Color8(red: 255, green: 0, blue: 0, alpha: 255)))
        return acceptor
    }

    @Test func anErrorIsTheLastThingASessionSends() throws {
        var acceptor = try Self.servingAnImage()
        acceptor.close(SessionError(.tooFast, "too many operations per second"))
        #expect(acceptor.pendingOutputCount < 1024, "the rest of the image was dropped with the link")
        #expect(try Self.kinds(acceptor.takeOutput(now: 7)) == [.error])
        #expect(acceptor.takeOutput(now: 8).isEmpty)
        acceptor.sendPresence(Presence(replica: ReplicaID(9), name: "ann", color: Color8(red: 0, green: 0, blue: 0, alpha: 255)))
        acceptor.queueAsset(AssetHash.of(Data([1, 2, 3])), Data([1, 2, 3]))
        #expect(acceptor.takeOutput(now: 9).isEmpty, "a closed session takes nothing new")
    }

    @Test func aGoodbyeFollowsOperationsAlreadySentAndNothingElse() throws {
        var acceptor = try Self.servingAnImage()
        var replica = Replica(id: ReplicaID(2))
        let edit = try replica.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 0), width: 2,
                                           points: [CodablePoint(x: 0, y: 0), CodablePoint(x: 10, y: 10)])
        acceptor.send(OperationBatch(operations: edit.operations))
        acceptor.close()
        #expect(try Self.kinds(acceptor.takeOutput(now: 7)) == [.operations, .pong, .bye],
                "operations sent and the PING's answer go before the goodbye; the image and the presence do not")
    }

    @Test func aRemoteErrorDropsWhatWasQueued() throws {
        var acceptor = try Self.servingAnImage()
        let error = Message.error(code: SessionError.Code.internalError.rawValue, message: "bye now").frame().encoded()
        let events = acceptor.receive(error, now: 7)
        #expect(events.count == 1 && acceptor.isClosed)
        #expect(acceptor.takeOutput(now: 7).isEmpty, "nothing answers a peer's ERROR")
    }
}
