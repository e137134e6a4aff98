import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Issue 7, finding 9: what a hostile peer can make a real `board-sync serve` process hold. Each
/// test triggers one limit and reads the server's resident size (VmRSS) before and after; the
/// bounds are the documented limits (docs/PROTOCOL.md, "Limits") plus a margin, never timings.
@Suite(.serialized) struct ServerMemoryTests {
    /// A server process whose log goes to a file (a pipe nobody drains would stall it).
    final class Server {
        let process = Process()
        let logPath: String
        var port: UInt16 = 0

        /// `openFiles` runs the server under `ulimit -n`.
        init(data: String, in directory: String, openFiles: Int? = nil) throws {
            logPath = directory + "/server-\(UUID().uuidString).log"
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            if let openFiles {
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = ["-c", "ulimit -n \(openFiles) && exec \"$0\" serve --data \"$1\" --listen 127.0.0.1:0", CLI.binary, data]
            } else {
                process.executableURL = URL(fileURLWithPath: CLI.binary)
                process.arguments = ["serve", "--data", data, "--listen", "127.0.0.1:0"]
            }
            process.currentDirectoryURL = URL(fileURLWithPath: directory)
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline, port == 0 {
                if let text = try? String(contentsOfFile: logPath, encoding: .utf8),
                   let line = text.split(separator: "\n").first(where: { $0.contains("listening on ") }),
                   let value = line.split(separator: ":").last.flatMap({ UInt16($0) }) {
                    port = value
                }
                usleep(20_000)
            }
        }

        var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

        /// Resident set size in MB.
        var residentMB: Double {
            guard let text = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
                  let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
                  let kb = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) }) else { return .nan }
            return kb / 1024
        }

        /// CPU seconds the process has used (user + system).
        var cpuSeconds: Double {
            guard let text = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
                  let close = text.lastIndex(of: ")") else { return .nan }
            let fields = text[text.index(after: close)...].split(separator: " ")
            guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
            return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        }

        func stop() {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// A blocking loopback socket speaking through a real `SyncSession`.
    final class Client {
        let fd: Int32
        var session: SyncSession

        init(port: UInt16, board: String, replica: ReplicaID, version: VersionVector = .empty, handshake: Bool = true) throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.fd = fd
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = port.bigEndian
            _ = inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr)
            let connected = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { throw CLI.Failure("cannot connect to 127.0.0.1:\(port)") }
            var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            session = SyncSession(role: .dialer, localReplica: replica)
            if handshake {
                session.start(board: board, version: version, now: 0)
                send(session.takeOutput())
            }
        }

        /// Sends everything (false when the server closed the connection).
        @discardableResult
        func send(_ bytes: [UInt8]) -> Bool {
            var offset = 0
            while offset < bytes.count {
                let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent <= 0 { return false }
                offset += sent
            }
            return true
        }

        /// Reads and answers until `done` says so or `seconds` pass; returns every event.
        func pump(seconds: Double, until done: ([SessionEvent]) -> Bool = { _ in false }) -> [SessionEvent] {
            var events: [SessionEvent] = []
            let deadline = Date().addingTimeInterval(seconds)
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while Date() < deadline, !done(events) {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count == 0 { break }
                if count > 0 { events += session.receive(Array(buffer[0..<count]), now: 0) }
                let out = session.takeOutput()
                if !out.isEmpty { send(out) }
            }
            return events
        }

        /// Reads until the server's SYNCED (the end of the handshake delta) arrives.
        func waitForSynced(seconds: Double) {
            _ = pump(seconds: seconds) { $0.contains { if case .synced = $0 { return true } else { return false } } }
        }

        func close() { _ = Glibc.close(fd) }
    }

    static func settle() { usleep(300_000) }

    /// A client synced on `board` (which opens it), then a pause: the server's resident size
    /// after that is the baseline an attack is measured against.
    static func warmUp(_ server: Server, board: String, seconds: Double = 5) throws -> (client: Client, residentMB: Double) {
        let client = try Client(port: server.port, board: board, replica: ReplicaID(1))
        client.waitForSynced(seconds: seconds)
        settle()
        return (client, server.residentMB)
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        let handle = FileHandle(forReadingAtPath: "/dev/urandom")!
        defer { try? handle.close() }
        return [UInt8](handle.readData(ofLength: count))
    }

    @Test func aPingFloodThatNeverReadsCostsOnePendingPong() throws {
        let workspace = try Workspace()
        let server = try Server(data: workspace.path + "/data", in: workspace.path)
        defer { server.stop() }
        let client = try Client(port: server.port, board: "flood", replica: ReplicaID(7))
        client.waitForSynced(seconds: 2)
        Self.settle()
        let before = server.residentMB
        // 4 million PINGs (about 70 MB), never reading a byte back.
        var pings: [UInt8] = []
        for nonce in 0..<100_000 { pings += Message.ping(UInt64(nonce)).frame().encoded() }
        for _ in 0..<40 { if !client.send(pings) { break } }
        Self.settle()
        let after = server.residentMB
        client.close()
        #expect(after - before < 24, "server grew \(after - before) MB (from \(before) MB) under a PING flood")
    }

    @Test func handshakesOnALargeBoardAreBoundedByTheOutputBudget() throws {
        let workspace = try Workspace()
        let data = workspace.path + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        // A board whose full state is about 6 MB (long strokes): more than loopback socket
        // buffers take, so undelivered deltas sit in the server.
        let package = try BoardPackage.create(at: data + "/big.boardpkg", fileSystem: PosixFileSystem(), replicaID: ReplicaID(0xB16))
        for stroke in 0..<12 {
            let points = (0..<250_000).map { CodablePoint(x: Double($0 % 997) * 1.5, y: Double(stroke * 100 + $0 % 89)) }
            try package.commit { replica in
                let edit = try replica.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 0), width: 1, points: points)
                replica.finishStroke()
                return edit
            }
        }
        let stateBytes = package.replica.fullState().encoded().count
        package.close()
        let server = try Server(data: data, in: workspace.path)
        defer { server.stop() }
        let first = try Client(port: server.port, board: "big", replica: ReplicaID(1))
        first.waitForSynced(seconds: 10)
        first.close()
        Self.settle()
        let before = server.residentMB
        // 60 handshakes that never read their delta (10 would fill the 64 MiB budget).
        var clients: [Client] = []
        for index in 0..<60 { clients.append(try Client(port: server.port, board: "big", replica: ReplicaID(UInt64(100 + index)))) }
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline {
            let log = server.log
            let answered = log.components(separatedBy: " joined board").count - 1 + log.components(separatedBy: "turned away").count - 1
            if answered >= 61 { break }
            usleep(100_000)
        }
        Self.settle()
        let after = server.residentMB
        let busy = server.log.components(separatedBy: "turned away").count - 1
        for client in clients { client.close() }
        #expect(stateBytes > 4 << 20, "the board's state is \(stateBytes) bytes")
        #expect(busy > 30, "handshakes beyond the budget were turned away as busy (\(busy))")
        // The budget is 64 MiB of queued output for a board; socket buffers are the kernel's.
        #expect(after - before < 64 + 48, "server grew \(after - before) MB for 60 handshakes of a \(stateBytes)-byte board")
    }

    @Test func manyPeersWantingOneLargeImageShareItsBytes() throws {
        let workspace = try Workspace()
        let data = workspace.path + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let image = PNGEncoder.solid(width: 2, height: 2, red: 1, green: 2, blue: 3) + Self.randomBytes(16 << 20)
        let hash = AssetHash.of(image)
        let package = try BoardPackage.create(at: data + "/pics.boardpkg", fileSystem: PosixFileSystem(), replicaID: ReplicaID(0xB17))
        try package.commit { try $0.addSticker(imagePNG: Data(image), at: CodablePoint(x: 1, y: 1)) }
        package.close()
        let server = try Server(data: data, in: workspace.path)
        defer { server.stop() }
        let (first, before) = try Self.warmUp(server, board: "pics", seconds: 10)
        var clients: [Client] = []
        for index in 0..<20 {
            let client = try Client(port: server.port, board: "pics", replica: ReplicaID(UInt64(200 + index)))
            client.waitForSynced(seconds: 5)
            client.session.want([AssetRequest(hash: hash)])
            client.send(client.session.takeOutput())
            clients.append(client)  // and never read the image
        }
        usleep(1_000_000)
        let after = server.residentMB
        for client in clients { client.close() }
        first.close()
        // One shared 16 MB copy is already resident; twenty more copies would be 320 MB.
        #expect(after - before < 40, "server grew \(after - before) MB for 20 peers wanting a 16 MB image")
    }

    @Test func unfinishedUploadsAreReleasedWhenTheUploaderLeaves() throws {
        let workspace = try Workspace()
        let server = try Server(data: workspace.path + "/data", in: workspace.path)
        defer { server.stop() }
        let (warm, before) = try Self.warmUp(server, board: "up")
        for index in 0..<8 {
            // Announce a 12 MB sticker, answer the server's WANT with half of it, then leave.
            let size = 12 << 20
            let bytes = Self.randomBytes(size)
            let hash = AssetHash.of(bytes)
            let replicaID = ReplicaID(UInt64(300 + index))
            let client = try Client(port: server.port, board: "up", replica: replicaID)
            client.waitForSynced(seconds: 5)
            var replica = Replica(id: replicaID)
            let edit = try replica.addSticker(asset: hash, at: CodablePoint(x: 1, y: 1))
            client.session.send(OperationBatch(operations: edit.operations))
            client.send(client.session.takeOutput())
            let events = client.pump(seconds: 5) { $0.contains { if case .assetsWanted = $0 { return true } else { return false } } }
            #expect(events.contains { if case .assetsWanted = $0 { return true } else { return false } }, "the server asked for the image")
            let chunk = 256 << 10
            for offset in stride(from: 0, to: size / 2, by: chunk) {
                let piece = AssetChunk(hash: hash, totalSize: UInt64(size), offset: UInt64(offset), bytes: Array(bytes[offset..<offset + chunk]))
                client.send(Message.assetChunk(piece).frame().encoded())
            }
            usleep(200_000)
            client.close()
        }
        usleep(1_000_000)
        let after = server.residentMB
        warm.close()
        // 8 half uploads are 48 MB if kept; released on close (and never over the 128 MiB budget).
        #expect(after - before < 20, "server holds \(after - before) MB after 8 uploaders left half-way")
    }

    @Test func oversizedHandshakesAreRefusedBeforeTheyAreBuffered() throws {
        let workspace = try Workspace()
        let server = try Server(data: workspace.path + "/data", in: workspace.path)
        defer { server.stop() }
        let (warm, before) = try Self.warmUp(server, board: "x")
        // Frame headers claiming 16 MiB before any HELLO, with most of the body sent (the old
        // limit let each of these connections hold 16 MiB): refused at once.
        var refusals = 0
        for index in 0..<20 {
            let claim = try Client(port: server.port, board: "x", replica: ReplicaID(UInt64(index + 1)), handshake: false)
            claim.send([0xFF, 0xFF, 0xFF, 0x00] + [UInt8](repeating: 1, count: 2 << 20))
            let events = claim.pump(seconds: 3) { $0.contains { if case .closed = $0 { return true } else { return false } } }
            if events.contains(where: { if case .closed(let error?) = $0 { return error.code == .frameTooLarge } else { return false } }) {
                refusals += 1
            }
            claim.close()
        }
        #expect(refusals == 20)
        // HELLOs whose version vector has 70,000 entries: refused, not stored.
        var entries: [ReplicaID: UInt64] = [:]
        for index in 0..<70_000 { entries[ReplicaID(UInt64(index + 1))] = 1 }
        let hello = Message.hello(Hello(board: "x", replica: ReplicaID(2), version: VersionVector(entries))).frame().encoded()
        for _ in 0..<10 {
            let big = try Client(port: server.port, board: "x", replica: ReplicaID(2), handshake: false)
            big.send(hello)
            let answer = big.pump(seconds: 3) { $0.contains { if case .closed = $0 { return true } else { return false } } }
            #expect(answer.contains { if case .closed(.some) = $0 { return true } else { return false } }, "\(answer)")
            big.close()
        }
        // Edits of items that never exist: held up to 10,000, then refused.
        let attacker = ReplicaID(0xBAD)
        var seq: UInt64 = 0
        var refusedWaiting = false
        let client = try Client(port: server.port, board: "x", replica: attacker)
        client.waitForSynced(seconds: 5)
        for _ in 0..<8 where !refusedWaiting {
            let batch = OperationBatch(operations: (0..<2_000).map { _ in
                seq += 1
                return Op(id: OpID(replica: attacker, seq: seq), lamport: seq,
                          payload: .setItem(ItemID(high: 0xFFFF, low: seq), .position(GridPoint(x: 1, y: 1))))
            })
            client.session.send(batch)
            client.send(client.session.takeOutput())
            let events = client.pump(seconds: 20) { $0.contains { event in
                if case .acknowledged = event { return true }
                if case .closed = event { return true }
                return false
            } }
            refusedWaiting = events.contains { if case .closed(let error?) = $0 { return error.message.contains("never created") } else { return false } }
        }
        client.close()
        #expect(refusedWaiting, "the sixth batch of edits of items never created was refused")
        #expect(seq == 12_000)
        Self.settle()
        let after = server.residentMB
        warm.close()
        // What remains is the 10,000 waiting operations the limit allows (about 17 MB here;
        // 200,000 took 300 MB before the limit).
        #expect(after - before < 40, "server grew \(after - before) MB")
    }

    @Test func runningOutOfDescriptorsPausesAcceptingInsteadOfSpinning() throws {
        let workspace = try Workspace()
        let server = try Server(data: workspace.path + "/data", in: workspace.path, openFiles: 40)
        defer { server.stop() }
        #expect(server.port != 0, "\(server.log)")
        var clients: [Client] = []
        for index in 0..<60 {
            if let client = try? Client(port: server.port, board: "fd\(index % 3)", replica: ReplicaID(UInt64(index + 1))) {
                clients.append(client)
            }
        }
        usleep(500_000)
        let cpuBefore = server.cpuSeconds
        usleep(1_000_000)
        let cpuUsed = server.cpuSeconds - cpuBefore
        #expect(server.log.contains("not accepting"), "the log says why: \(server.log.suffix(500))")
        // A spinning accept loop burns a whole core; a paused one retries ten times a second.
        #expect(cpuUsed < 0.5, "the server used \(cpuUsed) s of CPU in 1 s while out of descriptors")
        for client in clients { client.close() }
        usleep(300_000)
        // Descriptors back: it serves again.
        try workspace.cli.run("new", "A.boardpkg")
        let sync = try workspace.cli.run("sync", "A.boardpkg", "--server", "127.0.0.1:\(server.port)", "--board", "after", "--timeout", "20")
        #expect(sync.status == 0, "\(sync.stderr)")
    }

    @Test func aServerWhoseDiskFillsUpReopensWithEveryAcknowledgedOperation() throws {
        let workspace = try Workspace()
        guard let disk = HostileFileTests.mountSmallDisk(workspace, kilobytes: 1024) else { return }
        defer { HostileFileTests.system(["umount", disk]) }
        var server = try Server(data: disk + "/data", in: workspace.path)
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        func ids(_ package: String) throws -> Set<String> {
            let log = try cli.run("log", package, "--json")
            let entries = try JSONSerialization.jsonObject(with: Data(log.stdout.utf8)) as? [[String: Any]] ?? []
            return Set(entries.map { "\($0["replica"] ?? "")#\($0["seq"] ?? "")" })
        }
        var acknowledged = Set<String>()
        var failures = 0
        var succeededAfterFailure = false
        for round in 0..<16 {
            if round == 4 {
                // The disk fills up (another tenant, a log file): to the last byte.
                HostileFileTests.system(["dd", "if=/dev/zero", "of=\(disk)/filler", "bs=4096"])
                HostileFileTests.system(["dd", "if=/dev/zero", "of=\(disk)/filler2", "bs=1"])
            }
            if round < 4 {
                let image = PNGEncoder.solid(width: 2, height: 2, red: 9, green: 9, blue: 9) + Self.randomBytes(48 << 10)
                try Data(image).write(to: URL(fileURLWithPath: workspace.path + "/img.png"))
                try cli.run("sticker", "A.boardpkg", "--image", "img.png", "--at", "\(round),\(round)")
            }
            try cli.run("stroke", "A.boardpkg", "--points", (0..<400).map { "\($0),\(round)" }.joined(separator: " "))
            let sync = try cli.run("sync", "A.boardpkg", "--server", "127.0.0.1:\(server.port)", "--board", "full", "--timeout", "10")
            if sync.status == 0 {
                acknowledged = try ids("A.boardpkg")
                succeededAfterFailure = succeededAfterFailure || failures > 0
            } else {
                failures += 1
                // Some room comes back (a file is removed): appends succeed again, and before
                // the fix they landed behind a torn record.
                if let filler = FileHandle(forUpdatingAtPath: disk + "/filler") {
                    try filler.truncate(atOffset: max(0, try filler.seekToEnd() - (64 << 10)))
                    try filler.close()
                }
            }
        }
        #expect(succeededAfterFailure, "the server acknowledged again once there was room")
        #expect(failures > 0, "the disk filled up: \(server.log.suffix(400))")
        #expect(!acknowledged.isEmpty)
        // kill -9, restart on the still-full disk: the board opens with everything acknowledged.
        server.stop()
        server = try Server(data: disk + "/data", in: workspace.path)
        defer { server.stop() }
        try cli.run("new", "B.boardpkg")
        let fresh = try cli.run("sync", "B.boardpkg", "--server", "127.0.0.1:\(server.port)", "--board", "full", "--timeout", "20")
        #expect(fresh.status == 0, "\(fresh.stderr) \(server.log.suffix(600))")
        #expect(!server.log.contains("damaged"), "\(server.log.suffix(600))")
        let received = try ids("B.boardpkg")
        #expect(acknowledged.isSubset(of: received), "lost \(acknowledged.subtracting(received).count) acknowledged operations")
    }
}
