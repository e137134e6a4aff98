import BoardCRDT
import BoardNet
import BoardRedis
import BoardRedisNet
import BoardSimulation
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Scale-out figures (`BENCH_ONLY=redis`): a new server catching up the workload board from a
/// real Redis — the whole history as stream entries, then from a checkpoint. Needs Debian's
/// `redis-server` (the figure is skipped, saying so, without it).
enum RedisBench {
    /// A blocking RESP connection for filling Redis (not the server's client: that one is the
    /// code under measurement).
    final class Connection {
        let fd: Int32
        var pipeline = RedisPipeline()

        init(port: UInt16) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard result == 0 else { throw SyncBench.BenchError.stalled("cannot connect to redis-server on port \(port)") }
        }

        deinit { close(fd) }

        /// Sends the commands pipelined and waits for every reply.
        func run(_ commands: [[[UInt8]]]) throws -> [RESPValue] {
            for command in commands { _ = pipeline.send(command) }
            let bytes = pipeline.takeOutput()
            var sent = 0
            while sent < bytes.count {
                let count = bytes[sent...].withUnsafeBufferPointer { send(fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { throw SyncBench.BenchError.stalled("redis send") }
                sent += count
            }
            var replies: [RESPValue] = []
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while replies.count < commands.count {
                let count = recv(fd, &buffer, buffer.count, 0)
                guard count > 0 else { throw SyncBench.BenchError.stalled("redis recv") }
                replies += try pipeline.receive(Array(buffer[0..<count])).map(\.1)
            }
            return replies
        }
    }

    static func startRedis(in directory: String) throws -> (Process, UInt16)? {
        guard let binary = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first(where: FileManager.default.isExecutableFile) else {
            return nil
        }
        let loop = try EventLoop()
        let listener = try TCPListener(address: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
        let port = listener.address.port
        listener.close()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--port", "\(port)", "--bind", "127.0.0.1", "--dir", directory, "--save", "",
                             "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<200 {
            if let connection = try? Connection(port: port), (try? connection.run([[Array("PING".utf8)]])) != nil { return (process, port) }
            usleep(20_000)
        }
        throw SyncBench.BenchError.stalled("redis-server did not start")
    }

    /// Seconds from a fresh server opening the board to its catch-up being complete.
    static func catchUp(port: UInt16, scratch: String) throws -> Double {
        let loop = try EventLoop()
        let host = try SyncHost(serverDataDirectory: scratch, listen: SocketAddress(host: "127.0.0.1", port: 0), loop: loop)
        let cluster = RedisCluster(address: SocketAddress(host: "127.0.0.1", port: port),
                                   options: RedisBoardLog.Options(node: "bench-\(UUID().uuidString.prefix(8))"), loop: loop)
        cluster.attach(to: host)
        guard SyncBench.run(loop, timeout: 10, until: { cluster.isConnected }) else { throw SyncBench.BenchError.stalled("redis links") }
        let start = EventLoop.now()
        _ = host.preload(board: "workload")
        guard SyncBench.run(loop, timeout: 60, until: { cluster.boardLog.isCaughtUp("workload") }) else { throw SyncBench.BenchError.stalled("catch-up") }
        let seconds = EventLoop.now() - start
        host.shutdown(save: false)
        cluster.stop()
        return seconds
    }

    static func measure(_ workload: Workload.Result, scratch: String) throws -> [(String, String, Double)]? {
        guard let (redis, port) = try startRedis(in: scratch + "/redis") else {
            print("redis figures: SKIPPED (no redis-server; apt-get install redis-server)")
            return nil
        }
        defer {
            redis.terminate()
            for _ in 0..<100 where redis.isRunning { usleep(10_000) }
            if redis.isRunning { kill(redis.processIdentifier, SIGKILL) }
            redis.waitUntilExit()
        }
        let connection = try Connection(port: port)
        // The workload's history as a server would have appended it: batches of 50 operations.
        let key = Array("bs:{workload}:log".utf8)
        var commands: [[[UInt8]]] = []
        var streamBytes = 0
        for start in stride(from: 0, to: workload.operations.count, by: 50) {
            let batch = OperationBatch(operations: Array(workload.operations[start..<min(start + 50, workload.operations.count)]))
            let bytes = batch.encoded()
            streamBytes += bytes.count
            commands.append([Array("XADD".utf8), key, Array("*".utf8), Array("n".utf8), Array("bench".utf8), Array("o".utf8), bytes])
        }
        var lastID = ""
        for chunk in stride(from: 0, to: commands.count, by: 200) {
            let replies = try connection.run(Array(commands[chunk..<min(chunk + 200, commands.count)]))
            lastID = replies.last?.text ?? lastID
        }
        var figures: [(String, String, Double)] = []
        figures.append(("redis_stream_entries", "count", Double(commands.count)))
        figures.append(("redis_stream_bytes", "bytes", Double(streamBytes)))
        figures.append(("redis_new_server_catch_up_stream", "s", try catchUp(port: port, scratch: scratch + "/a")))
        // Then as a compactor leaves it: the compacted state as the checkpoint, the stream trimmed.
        let state = workload.replica.operations(since: .empty).encoded()
        _ = try connection.run([[Array("HSET".utf8), Array("bs:{workload}:ckpt".utf8), Array("id".utf8), Array(lastID.utf8),
                                 Array("state".utf8), state, Array("epoch".utf8), Array("1".utf8), Array("minid".utf8), Array(lastID.utf8)],
                                [Array("XTRIM".utf8), key, Array("MINID".utf8), Array(lastID.utf8)]])
        figures.append(("redis_checkpoint_bytes", "bytes", Double(state.count)))
        figures.append(("redis_new_server_catch_up_checkpoint", "s", try catchUp(port: port, scratch: scratch + "/b")))
        return figures
    }
}
