import BoardCRDT
import BoardModel
import BoardSync
import Foundation
import Testing

/// An image a server asked of its shared log (Redis) because the session that had it went
/// away mid-transfer: the same uploader reconnecting is asked again at once, not only after
/// the log gives up. (The three-server demo lost an image this way when its uploader went
/// offline between the WANT and the chunks.)
@Suite struct SharedLogAssetTests {
    /// Moves bytes between a client hub's session and a server hub's session until quiet.
    static func exchange(_ client: BoardHub, _ clientID: SessionID, _ server: BoardHub, _ serverID: SessionID,
                         rounds: Int = 50, now: Double) {
        for _ in 0..<rounds {
            let up = client.output(for: clientID, now: now)
            if !up.isEmpty { _ = server.receive(serverID, up, now: now) }
            let down = server.output(for: serverID, now: now)
            if !down.isEmpty { _ = client.receive(clientID, down, now: now) }
            if up.isEmpty && down.isEmpty { return }
        }
    }

    /// An uploader's hub (replica 0xC) holding a sticker of an 8×8 image of `red`, and an
    /// empty server hub (replica 1), both on board "team".
    static func uploaderAndServer(red: UInt8) throws -> (image: Data, hash: AssetHash, uploader: BoardHub, server: BoardHub) {
        let image = Data(PNGEncoder.solid(width: 8, height: 8, red: red, green: 170, blue: 80))
        let uploaderStore = MemoryReplicaStore(replica: Replica(id: ReplicaID(0xC)))
        _ = try uploaderStore.edit { try $0.addSticker(imagePNG: image, at: CodablePoint(x: 5, y: 5), scale: 1) }
        let uploader = BoardHub(board: "team", store: uploaderStore)
        let server = BoardHub(board: "team", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(1))))
        return (image, AssetHash.of(image), uploader, server)
    }

    /// The images a hub asked its shared log for since the last call (its `.fetchAsset` events).
    static func fetchesAsked(_ hub: BoardHub) -> [AssetHash] {
        var asked: [AssetHash] = []
        while let event = hub.pollEvent() {
            if case .sharedLog(.fetchAsset(let hash)) = event { asked.append(hash) }
        }
        return asked
    }

    @Test func aReconnectingUploaderIsAskedForAnImageTheLogIsStillLookingFor() throws {
        let (image, hash, uploader, server) = try Self.uploaderAndServer(red: 40)
        server.sharedLog = true
        var askedOfLog: [AssetHash] = []

        // First session: the operations arrive, the server WANTs the image, and the link drops
        // before a chunk is sent (the uploader went offline).
        uploader.addDialer(1, SyncSession(role: .dialer, localReplica: ReplicaID(0xC)), now: 0)
        server.addAcceptor(1, SyncSession(role: .acceptor, localReplica: ReplicaID(1)), now: 0)
        for _ in 0..<10 where server.store.replica.missingAssets.isEmpty {
            _ = server.receive(1, uploader.output(for: 1, now: 0), now: 0)
            guard server.store.replica.missingAssets.isEmpty else { break }
            _ = uploader.receive(1, server.output(for: 1, now: 0), now: 0)
        }
        #expect(server.store.replica.missingAssets == [hash], "the operations arrived, the image did not")
        _ = server.output(for: 1, now: 0)  // the WANT, lost with the link
        uploader.remove(1)
        server.remove(1)
        askedOfLog += Self.fetchesAsked(server)
        #expect(askedOfLog == [hash], "nobody connected has it: the shared log is asked")

        // The uploader is back: asked for the image although the log has not answered yet.
        uploader.addDialer(2, SyncSession(role: .dialer, localReplica: ReplicaID(0xC)), now: 1)
        server.addAcceptor(2, SyncSession(role: .acceptor, localReplica: ReplicaID(1)), now: 1)
        Self.exchange(uploader, 2, server, 2, now: 1)
        #expect(server.store.replica.assets.data(for: hash) == image, "the uploader sent it")
        #expect(server.store.replica.missingAssets.isEmpty)
        askedOfLog += Self.fetchesAsked(server)
        #expect(askedOfLog == [hash], "the log is not asked twice")

        // The log's late answer (not found) changes nothing and tells nobody the image is gone.
        server.assetFetched(hash, nil)
        #expect(server.store.replica.assets.data(for: hash) == image)
    }

    /// A reader waiting for an image the log is looking for while a session is sending it
    /// hears no NOASSET when the log gives up: it gets the image from the session.
    @Test func aWaiterGetsTheImageFromASessionWhenTheLogGivesUp() throws {
        let (image, hash, uploader, server) = try Self.uploaderAndServer(red: 200)
        server.sharedLog = true
        // The sticker's operations reach the server through the log, so it asks the log.
        try server.mergeReplicated(uploader.store.replica.operations(since: .empty), now: 0)
        #expect(server.store.replica.missingAssets == [hash])
        // A reader joins and asks for the image; then the uploader joins.
        let reader = BoardHub(board: "team", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(0xD))))
        reader.addDialer(1, SyncSession(role: .dialer, localReplica: ReplicaID(0xD)), now: 0)
        server.addAcceptor(1, SyncSession(role: .acceptor, localReplica: ReplicaID(1)), now: 0)
        Self.exchange(reader, 1, server, 1, now: 0)
        uploader.addDialer(2, SyncSession(role: .dialer, localReplica: ReplicaID(0xC)), now: 0)
        server.addAcceptor(2, SyncSession(role: .acceptor, localReplica: ReplicaID(1)), now: 0)
        // Only the HELLOs: the server WANTs from the uploader; the log then gives up.
        _ = server.receive(2, uploader.output(for: 2, now: 0), now: 0)
        _ = uploader.receive(2, server.output(for: 2, now: 0), now: 0)
        #expect(server.store.replica.missingAssets == [hash])
        server.assetFetched(hash, nil)
        Self.exchange(uploader, 2, server, 2, now: 0)
        Self.exchange(reader, 1, server, 1, now: 0)
        #expect(reader.store.replica.assets.data(for: hash) == image, "the reader got the uploader's image, not a NOASSET")
    }
}
