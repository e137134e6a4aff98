import BoardCRDT
import BoardRedis
import BoardSync
import Foundation

/// A node of the cluster simulation with a timer of its own (the next deadline of what it runs).
protocol TimedNode: NetworkNode {
    var index: Int { get }
    var timerAt: Double? { get set }
    var timerGeneration: Int { get set }
    var deadline: Double? { get }
}

extension ClusterSimulation {
    /// A sync server: its endpoint (client sessions) and its Redis board log (one connection
    /// per `RedisBoardLog.Link`), both nil while it is down.
    final class ServerNode: TimedNode {
        let index: Int
        unowned let sim: ClusterSimulation
        var endpoint: SyncEndpoint?
        var log: RedisBoardLog?
        /// Each Redis link's network link, and the sessions that stand for them.
        var redisLinks: [RedisBoardLog.Link: Int] = [:]
        var redisSessions: [SessionID: RedisBoardLog.Link] = [:]
        var reconnectAt: [RedisBoardLog.Link: Double] = [:]
        /// Redis links whose bytes did not parse (dropped once the delivery is over).
        var failedLinks: [(RedisBoardLog.Link, String)] = []
        var closeReason: String?
        var generation = 0
        var timerAt: Double?
        var timerGeneration = 0

        init(index: Int, sim: ClusterSimulation) {
            self.index = index
            self.sim = sim
        }

        var deadline: Double? {
            guard let endpoint, let log else { return nil }
            return ([endpoint.nextDeadline, log.nextDeadline] + reconnectAt.values.map { Optional($0) }).compactMap { $0 }.min()
        }

        func output(for session: SessionID, now: Double) -> [UInt8] {
            if let link = redisSessions[session] { return log?.takeOutput(link) ?? [] }
            return endpoint?.output(for: session, now: now) ?? []
        }

        func receive(_ session: SessionID, _ bytes: [UInt8], from: Int, now: Double) -> Int? {
            if let link = redisSessions[session] {
                guard let log else { return nil }
                do { try log.receive(link, bytes, now: now) } catch { failedLinks.append((link, "\(error)")) }
                return 0
            }
            guard let endpoint else { return nil }
            var operations = 0
            for event in endpoint.receive(session, bytes, now: now) {
                if case .operations(let batch) = event { operations += batch.operations.count }
            }
            return operations
        }

        func isFinished(_ session: SessionID) -> Bool {
            redisSessions[session] == nil && (endpoint?.isFinished(session) ?? false)
        }

        func closed(_ session: SessionID, now: Double) {
            if let link = redisSessions.removeValue(forKey: session) {
                redisLinks[link] = nil
                guard let log else { return }
                log.linkDown(link, now: now, reason: closeReason ?? "the connection closed")
                reconnectAt[link] = now + 0.05
            } else {
                endpoint?.closed(session, now: now)
            }
            sim.rescheduleTimer(self)
        }
    }

    /// A client: a single-board peer endpoint over memory.
    final class ClientNode: TimedNode {
        let index: Int
        let endpoint: SyncEndpoint
        let store: MemoryReplicaStore
        unowned let sim: ClusterSimulation
        var departed = false
        /// At departure: what this client made, every bit of it acknowledged by a server.
        var leftWith: UInt64 = 0
        var timerAt: Double?
        var timerGeneration = 0

        init(index: Int, endpoint: SyncEndpoint, store: MemoryReplicaStore, sim: ClusterSimulation) {
            self.index = index
            self.endpoint = endpoint
            self.store = store
            self.sim = sim
        }

        var deadline: Double? { departed ? nil : endpoint.nextDeadline }

        func output(for session: SessionID, now: Double) -> [UInt8] { endpoint.output(for: session, now: now) }

        func receive(_ session: SessionID, _ bytes: [UInt8], from: Int, now: Double) -> Int? {
            var operations = 0
            for event in endpoint.receive(session, bytes, now: now) {
                if case .operations(let batch) = event { operations += batch.operations.count }
            }
            return operations
        }

        func isFinished(_ session: SessionID) -> Bool { endpoint.isFinished(session) }

        func closed(_ session: SessionID, now: Double) {
            endpoint.closed(session, now: now)
            sim.rescheduleTimer(self)
        }
    }

    /// Redis: one simulated server, a connection per link.
    final class RedisNode: TimedNode {
        let index: Int
        unowned let sim: ClusterSimulation
        var connections: [SessionID: SimulatedRedis.Connection] = [:]
        var timerAt: Double?
        var timerGeneration = 0

        init(index: Int, sim: ClusterSimulation) {
            self.index = index
            self.sim = sim
        }

        var deadline: Double? { sim.redis.nextDeadline }

        func output(for session: SessionID, now: Double) -> [UInt8] {
            guard let connection = connections[session] else { return [] }
            defer { connection.output = [] }
            return connection.output
        }

        func receive(_ session: SessionID, _ bytes: [UInt8], from: Int, now: Double) -> Int? {
            guard let connection = connections[session], connection.open else { return nil }
            sim.redis.now = now
            sim.redis.receive(connection, bytes)
            // Blocked reads another connection's write can serve now are answered.
            sim.redis.tick()
            return 0
        }

        func isFinished(_ session: SessionID) -> Bool { !(connections[session]?.open ?? false) }

        func closed(_ session: SessionID, now: Double) {
            if let connection = connections.removeValue(forKey: session) { sim.redis.disconnect(connection) }
        }
    }
}
