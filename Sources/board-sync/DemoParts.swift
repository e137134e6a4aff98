import BoardClient
import BoardCRDT
import BoardModel
import BoardNet
import BoardRedis
import BoardRedisNet
import BoardStore
import BoardSync
import Dispatch
import Foundation
import Synchronization

/// The demo's sync servers: one `SyncHost` (or several sharing Redis) on an event loop thread of
/// their own, asked things from the demo's tasks through `onLoop`.
final class DemoServers: @unchecked Sendable {  // hosts, clusters and the log are touched on the loop thread only
    let loop: EventLoop
    let addresses: [SocketAddress]
    private let servers: [SyncHost]
    private let clusters: [RedisCluster]
    /// What the servers logged (loop thread).
    private final class Lines { var lines: [String] = [] }
    private let log = Lines()
    private var serverLog: [String] { log.lines }
    private let redis: SocketAddress?
    private let done = DispatchSemaphore(value: 0)
    private let stopped = Mutex(false)

    init(count: Int, out: String, redis: SocketAddress?, trace: @escaping (String, String) -> Void) throws {
        loop = try EventLoop()
        self.redis = redis
        var options = SyncHost.Options()
        var servers: [SyncHost] = [], clusters: [RedisCluster] = []
        let log = self.log
        let loopback = SocketAddress(host: "127.0.0.1", port: 0)
        if let redis {
            for index in 1...count {
                options.log = { [index] in log.lines.append($0); trace("server \(index)", $0) }
                let host = try SyncHost(serverDataDirectory: "\(out)/server-\(index)", listen: loopback, loop: loop, options: options)
                var redisOptions = RedisBoardLog.Options(node: "demo-server-\(index)")
                redisOptions.log = { [index] in log.lines.append($0); trace("server \(index) redis", $0) }
                let cluster = RedisCluster(address: redis, options: redisOptions, loop: loop)
                cluster.attach(to: host)
                servers.append(host)
                clusters.append(cluster)
            }
        } else {
            options.log = { log.lines.append($0); trace("server", $0) }
            servers.append(try SyncHost(serverDataDirectory: out + "/server", listen: loopback, loop: loop, options: options))
        }
        self.servers = servers
        self.clusters = clusters
        addresses = servers.map { $0.listenAddress! }
        let loop = self.loop, done = self.done
        let thread = Thread {
            loop.run()
            done.signal()
        }
        thread.name = "demo servers"
        thread.start()
    }

    /// Runs `body` on the loop thread and returns what it returned.
    private func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in loop.execute { continuation.resume(returning: body()) } }
    }

    /// With Redis: waits until every server reaches it (the demo's own redis-server may take a
    /// moment to listen); one that names its trouble for 3 s (10 s for the demo's own) ends the
    /// demo with that reason.
    func waitForStorage(redisStarted: Bool) async throws {
        guard let redis else { return }
        let start = EventLoop.now()
        var troubleSince: Double?
        while true {
            let (ready, trouble) = await onLoop { [self] in
                (clusters.allSatisfy { $0.isConnected && $0.boardLog.storageTrouble == nil }, clusters.lazy.compactMap(\.boardLog.storageTrouble).first)
            }
            if ready { return }
            if let trouble {
                troubleSince = troubleSince ?? EventLoop.now()
                if EventLoop.now() - troubleSince! > (redisStarted ? 10 : 3) {
                    throw Failure("the demo's servers cannot use Redis: \(trouble)"
                                  + (redisStarted ? "" : " (is redis-server running there? Leave out --redis and the demo starts its own)"))
                }
            } else {
                troubleSince = nil
            }
            if EventLoop.now() - start > 10 { throw Failure("the demo's servers could not reach Redis at \(redis) within 10 s") }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    /// Every server holds exactly `vector`, every image, and has nothing left to send or store.
    func hold(_ vector: VersionVector) async -> Bool {
        await onLoop { [self] in
            servers.allSatisfy { server in
                guard let hub = server.boards["demo"]?.hub else { return false }
                return hub.store.replica.versionVector == vector && hub.store.replica.missingAssets.isEmpty && server.isQuiet("demo")
            } && clusters.allSatisfy { $0.boardLog.unconfirmedAppends == 0 }
        }
    }

    /// The servers' state, for a failure message.
    func describe() async -> String {
        await onLoop { [self] in
            var state = ""
            for (index, server) in servers.enumerated() {
                if let hub = server.boards["demo"]?.hub {
                    state += "\n  server \(index + 1): \(hub.store.replica.versionVector) missing \(hub.store.replica.missingAssets.count) sessions \(hub.sessionCount)"
                }
            }
            let notes = serverLog.filter { $0.contains("refused") || $0.contains("skipped") || $0.contains("Redis") }
            if !notes.isEmpty { state += "\n  server log: " + notes.suffix(8).joined(separator: "\n    ") }
            return state
        }
    }

    /// Each server's board, then every server says goodbye, saves and stops.
    func shutdownAndSnapshot() async -> [BoardSnapshot] {
        let boards = await onLoop { [self] in
            let boards = servers.map { $0.boards["demo"]?.hub.store.replica.snapshot() ?? BoardSnapshot(paintOrder: []) }
            for server in servers { server.shutdown() }
            return boards
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.execute { [self] in
                _ = loop.schedule(after: 0.05) { [self] in
                    for cluster in clusters { cluster.stop() }
                    continuation.resume()
                }
            }
        }
        return boards
    }

    /// Stops the loop thread (once; returns when it has stopped).
    func stop() {
        guard stopped.withLock({ was in defer { was = true }; return !was }) else { return }
        loop.execute { [loop] in loop.stop() }
        done.wait()
    }
}

/// What each peer saw of the others (their `peers` rosters): names, roster updates, departures.
actor PresenceWatch {
    private var seen: [String: Set<String>] = [:]
    private var updates = 0
    private var departures: [String] = []
    private var stopped = false

    /// Follows `peer`'s roster until its board closes. A roster emptied because this peer's own
    /// link was cut (`isCut`) is not others leaving.
    func follow(_ peer: LiveBoard, as name: String, isCut: @escaping @Sendable () -> Bool = { false }) async {
        var previous: [ReplicaID: String] = [:]
        for await roster in peer.peers {
            let now = Dictionary(roster.map { ($0.replica, $0.name) }, uniquingKeysWith: { $1 })
            if !stopped {
                updates += 1
                seen[name, default: []].formUnion(now.values)
                if !isCut() {
                    for (replica, left) in previous.sorted(by: { $0.key < $1.key }) where now[replica] == nil {
                        departures.append("\(name) saw \(left) leave")
                    }
                }
            }
            previous = now
        }
    }

    func stop() { stopped = true }

    func results(_ names: [String]) -> (seen: [[String]], updates: Int, departures: [String]) {
        (names.map { (seen[$0] ?? []).sorted() }, updates, departures)
    }
}
