import BoardClient
import BoardCRDT
import BoardModel
import BoardNet
import BoardSimulation
import BoardStore
import BoardSync
import Foundation

/// Loopback figures: throughput through the server, edit-to-everyone latency with 8 clients, and
/// an offline replica catching up on the whole workload board. Hosts share one event loop on
/// this thread unless noted, so the figures include every hop's processing, serialized.
enum SyncBench {
    struct Figures {
        var opsPerSecond = 0.0
        var latencyMedianMS = 0.0
        var latencyP99MS = 0.0
        var offlineSyncSeconds = 0.0
        var offlineSyncBytes = 0
        var offlineSyncAssetBytes = 0
    }

    static func memoryHost(_ id: UInt64, _ loop: EventLoop, connectTo address: SocketAddress) throws -> (SyncHost, MemoryReplicaStore) {
        let store = MemoryReplicaStore(replica: Replica(id: ReplicaID(id)))
        let host = try SyncHost(board: "bench", store: store, listen: nil, loop: loop)
        host.connect(to: address)
        return (host, store)
    }

    /// Runs the loop until `condition` holds (checked every millisecond) or `timeout` passes.
    static func run(_ loop: EventLoop, timeout: Double, until condition: @escaping () -> Bool) -> Bool {
        var met = false
        let deadline = EventLoop.now() + timeout
        func check() {
            if condition() { met = true; loop.stop(); return }
            if EventLoop.now() > deadline { loop.stop(); return }
            loop.schedule(after: 0.001) { check() }
        }
        loop.schedule(after: 0.001) { check() }
        loop.run()
        return met
    }

    static func throughput(scratch: String, count: Int) throws -> Double {
        let loop = try EventLoop()
        let server = try SyncHost(serverDataDirectory: scratch + "/tp", listen: SocketAddress(host: "127.0.0.1", port: 0), loop: loop)
        let (sender, senderStore) = try memoryHost(1, loop, connectTo: server.listenAddress!)
        let (receiver, receiverStore) = try memoryHost(2, loop, connectTo: server.listenAddress!)
        let sticker = try sender.edit { try $0.addSticker(asset: AssetHash.of([1, 2, 3]), at: CodablePoint(x: 0, y: 0)) }.item!
        guard run(loop, timeout: 10, until: { receiverStore.replica.versionVector[ReplicaID(1)] == 1 }) else {
            throw BenchError.stalled("throughput setup")
        }
        let target = senderStore.replica.lastSeq + UInt64(count)
        var made = 0
        let start = EventLoop.now()
        func produce() {
            for _ in 0..<min(5000, count - made) {
                _ = try? sender.edit { try $0.move(sticker, to: CodablePoint(x: Double(made % 1000), y: 1)) }
                made += 1
            }
            if made < count { loop.schedule(after: 0) { produce() } }
        }
        loop.schedule(after: 0) { produce() }
        guard run(loop, timeout: 30, until: { receiverStore.replica.versionVector[ReplicaID(1)] >= target }) else {
            throw BenchError.stalled("throughput: receiver at \(receiverStore.replica.versionVector[ReplicaID(1)]) of \(target), server \(server.boards["bench"].map { $0.hub.store.replica.versionVector.description } ?? "-"), sender made \(made), links \(sender.connectionCount)/\(receiver.connectionCount)/\(server.connectionCount)")
        }
        let seconds = EventLoop.now() - start
        for host in [sender, receiver, server] { host.shutdown() }
        return Double(count) / seconds
    }

    static func latency(scratch: String, clients: Int, rounds: Int) throws -> (median: Double, p99: Double) {
        let loop = try EventLoop()
        let server = try SyncHost(serverDataDirectory: scratch + "/lat", listen: SocketAddress(host: "127.0.0.1", port: 0), loop: loop)
        var hosts: [SyncHost] = []
        var stores: [MemoryReplicaStore] = []
        for index in 0..<clients {
            let (host, store) = try memoryHost(UInt64(100 + index), loop, connectTo: server.listenAddress!)
            hosts.append(host)
            stores.append(store)
        }
        guard run(loop, timeout: 10, until: { hosts.allSatisfy { $0.boards["bench"]!.hub.hasOpenSession } }) else {
            throw BenchError.stalled("latency setup")
        }
        var samples: [Double] = []
        var round = 0
        var pending: (op: OpID, start: Double, author: Int)?
        func arrived() -> Bool {
            guard let current = pending else { return false }
            return stores.indices.allSatisfy { $0 == current.author || stores[$0].replica.hasIntegrated(current.op) }
        }
        func next() {
            if let current = pending, arrived() {
                samples.append(EventLoop.now() - current.start)
                pending = nil
                round += 1
            }
            if pending == nil {
                if round == rounds { loop.stop(); return }
                let author = round % clients
                let start = EventLoop.now()
                if let op = try? hosts[author].edit(nil, { try $0.setBackground(asset: nil) }).operations.first {
                    pending = (op.id, start, author)
                }
            }
            loop.schedule(after: 0) { next() }
        }
        for host in hosts + [server] { host.onProgress = { if arrived() { next() } } }
        loop.schedule(after: 0) { next() }
        loop.run()
        for host in hosts + [server] { host.shutdown() }
        let sorted = samples.sorted()
        guard !sorted.isEmpty else { throw BenchError.stalled("latency") }
        return (sorted[sorted.count / 2] * 1000, sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.99))] * 1000)
    }

    static func offlineSync(scratch: String, workload: Workload.Result) async throws -> (seconds: Double, bytes: Int, assetBytes: Int) {
        let data = scratch + "/offline"
        let disk = PosixFileSystem()
        try disk.createDirectories(data)
        let seeded = try BoardPackage.create(at: data + "/workload.boardpkg", fileSystem: disk, replicaID: ReplicaID(0x5EED))
        for (_, asset) in workload.assets { try seeded.addAsset(asset) }
        try seeded.merge(workload.replica.fullState())
        try seeded.save()
        seeded.close()
        let serverLoop = try EventLoop()
        let server = try SyncHost(serverDataDirectory: data, listen: SocketAddress(host: "127.0.0.1", port: 0), loop: serverLoop)
        let address = server.listenAddress!
        // A server hosting a board has it open; opening it (0.1-0.3 s) is not part of a sync.
        server.preload(board: "workload")
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            serverLoop.run()
            done.signal()
        }
        thread.start()
        // `board-sync sync`: a new package meets the server once; the time counts from the dial
        // to the board closed, its view saved (the first save of the whole board).
        let client = try LiveBoard.open(storage: .package(path: scratch + "/offline-client.boardpkg"),
                                        sync: LiveBoard.Sync(server: "\(address)", board: "workload"),
                                        identity: LiveBoard.Identity(replicaID: ReplicaID(0xC11E)))
        let start = EventLoop.now()
        let report = try await client.syncOnce(within: 60)
        _ = await client.close()
        let seconds = EventLoop.now() - start
        serverLoop.stop()
        done.wait()
        withExtendedLifetime(server) {}
        guard report.imagesMissing == 0 else { throw BenchError.stalled("offline sync: \(report.imagesMissing) images missing") }
        let assetBytes = workload.assets.values.reduce(0) { $0 + $1.count }
        return (seconds, report.bytesReceived + report.bytesSent, assetBytes)
    }

    enum BenchError: Error { case stalled(String) }
}
