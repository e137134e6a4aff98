import BoardCRDT
import BoardModel
import BoardNet
import BoardRedis
import BoardRender
import BoardStore
import BoardSync
import Foundation

/// The fuzz targets: every parser a peer or a file can reach, fed arbitrary bytes. Each returns
/// normally for any input (errors are fine; they are what bad input should get) and traps only
/// when a property breaks: a crash, a hang, or a decoded value that does not survive its own
/// encoder. `bin/fuzz TARGET` runs one under libFuzzer; `FuzzRegressionTests` replays every
/// input in `Fuzz/Corpus/<target>/` (seeds and every crash ever found) in the normal test run.
public enum FuzzTargets {
    public static let names = ["frame", "operations", "linked", "session", "oplog", "manifest", "png", "http", "websocket", "webmessage", "resp", "redislog"]

    /// Runs target `name` on `bytes`. Unknown names trap (a usage error of the harness).
    public static func run(_ name: String, _ bytes: [UInt8]) {
        switch name {
        case "frame": frame(bytes)
        case "operations": operations(bytes)
        case "linked": linked(bytes)
        case "session": session(bytes)
        case "oplog": opLog(bytes)
        case "manifest": manifest(bytes)
        case "png": png(bytes)
        case "http": http(bytes)
        case "websocket": websocket(bytes)
        case "webmessage": webMessage(bytes)
        case "resp": resp(bytes)
        case "redislog": redisLog(bytes)
        default: preconditionFailure("unknown fuzz target '\(name)' (one of \(names.joined(separator: ", ")))")
        }
    }

    static let limits = SessionLimits()
    /// The HELLO every `session` input follows (encoded once, not per input).
    static let helloFrame = Message.hello(Hello(board: "fuzz", replica: ReplicaID(0xC1), credentials: [], capabilities: 0, version: .empty)).frame().encoded()

    /// Whether `bytes` are an input the target reads as valid (for checking seeds): a frame
    /// stream with a message, a batch, an op log with a record, a manifest.
    public static func accepts(_ name: String, _ bytes: [UInt8]) -> Bool {
        switch name {
        case "frame":
            var decoder = FrameDecoder(maxFrame: 1 << 16)
            decoder.append(bytes)
            guard let frame = try? decoder.next() else { return false }
            return (try? Message(frame: frame, limits: limits)) != nil
        case "operations":
            return (try? OperationBatch(decoding: bytes)) != nil
        case "linked":
            let batches = linkedBatches(bytes)
            var link = BatchLink()
            return !batches.isEmpty && batches.allSatisfy { (try? OperationBatch(decoding: $0, link: &link)) != nil }
        case "session":
            var decoder = FrameDecoder(maxFrame: 1 << 20)
            decoder.append(bytes)
            var link = BatchLink(), found = false
            while let frame = try? decoder.next() {
                guard let message = try? Message(frame: frame, limits: limits) else { return false }
                if case .operations(let payload) = message {
                    guard (try? OperationBatch(decoding: payload, link: &link)) != nil else { return false }
                    found = true
                }
            }
            return found
        case "oplog":
            let fileSystem = MemoryFileSystem()
            guard (try? fileSystem.writeFile("/log", bytes)) != nil,
                  let opened = try? OpLog.open("/log", fileSystem: fileSystem) else { return false }
            return !opened.batches.isEmpty
        case "png":
            return (try? PNGDecoder.decode(bytes)) != nil
        case "http":
            var parser = HTTPRequestParser()
            var next: HTTPRequest?
            do { next = try parser.append(bytes) } catch { return false }
            guard next != nil else { return false }
            while next != nil {
                do { next = try parser.next() } catch { return false }
            }
            return parser.remaining.isEmpty
        case "websocket":
            var connection = WebSocketConnection(maxMessage: 1 << 16)
            return connection.receive(bytes).contains { if case .failed = $0 { return false } else { return true } }
        case "webmessage":
            return (try? WebMessage.parse(String(decoding: bytes, as: UTF8.self), maxImageSide: 8192).get()) != nil
        case "resp":
            var decoder = RESPDecoder()
            decoder.append(bytes)
            var count = 0
            do {
                while try decoder.next() != nil { count += 1 }
            } catch { return false }
            return count > 0 && decoder.bufferedCount == 0
        case "manifest":
            let fileSystem = MemoryFileSystem()
            guard (try? fileSystem.createDirectories("/p.boardpkg")) != nil,
                  (try? fileSystem.writeFile("/p.boardpkg/manifest.json", bytes)) != nil else { return false }
            return (try? PackageReader(fileSystem: fileSystem).read("/p.boardpkg")) != nil
        default:
            return false
        }
    }

    /// The frame decoder and message decoder, the stream split at a point the input chooses:
    /// every message that decodes encodes back to a frame that decodes to the same message.
    static func frame(_ bytes: [UInt8]) {
        var decoder = FrameDecoder(maxFrame: 1 << 16)
        let split = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
        var frames = 0
        func drain() -> Bool {
            while true {
                let next: Frame?
                do { next = try decoder.next() } catch { return false }
                guard let frame = next else { return true }
                frames += 1
                precondition(frames <= bytes.count, "more frames than input bytes")
                guard let message = try? Message(frame: frame, limits: limits) else { continue }
                let again: Message
                do { again = try Message(frame: message.frame(), limits: limits) } catch {
                    preconditionFailure("a decoded message does not decode after encoding: \(error)")
                }
                precondition(again == message, "a message changed through encode and decode")
            }
        }
        decoder.append(bytes[..<split])
        guard drain() else { return }
        decoder.append(bytes[split...])
        _ = drain()
    }

    /// The operation batch decoder, then admission and apply on a fresh replica (what a server
    /// does with a peer's batch): a batch that decodes round-trips through the encoder, and one
    /// that is admitted applies without a trap and snapshots.
    static func operations(_ bytes: [UInt8]) {
        guard let batch = try? OperationBatch(decoding: bytes) else { return }
        let again: OperationBatch
        do { again = try OperationBatch(decoding: batch.encoded()) } catch {
            preconditionFailure("a decoded batch does not decode after encoding: \(error)")
        }
        precondition(again == batch, "a batch changed through encode and decode")
        var replica = Replica(id: ReplicaID(0xF022))
        guard (try? replica.admit(batch)) != nil else { return }
        guard (try? replica.apply(batch)) != nil else { return }
        _ = replica.snapshot()
        // Applying the same batch again changes nothing (idempotence).
        let version = replica.versionVector
        _ = try? replica.apply(batch)
        precondition(replica.versionVector == version, "re-applying a batch changed the version")
    }

    /// The input as a stream of batches, each a 16-bit little-endian length and its bytes.
    static func linkedBatches(_ bytes: [UInt8]) -> [[UInt8]] {
        var batches: [[UInt8]] = []
        var offset = 0
        while offset + 2 <= bytes.count {
            let length = Int(bytes[offset]) | Int(bytes[offset + 1]) << 8
            offset += 2
            let end = min(bytes.count, offset + length)
            batches.append(Array(bytes[offset..<end]))
            offset = end
        }
        return batches
    }

    /// Linked batches (format 3) as a hostile peer's stream on one link: each decodes to valid
    /// operations or is refused, after which the link reads nothing more. Every accepted
    /// sequence, encoded again through a fresh pair of links, comes back the same (the two ends
    /// of a link stay mirrored whatever was carried).
    static func linked(_ bytes: [UInt8]) {
        var receiver = BatchLink()
        var accepted: [OperationBatch] = []
        for batch in linkedBatches(bytes) {
            guard let decoded = try? OperationBatch(decoding: batch, link: &receiver) else {
                precondition(receiver.isBroken, "a refused linked batch left the link usable")
                precondition((try? OperationBatch(decoding: [BatchLink.format, 14, 2, 2, 1, 1], link: &receiver)) == nil,
                             "a broken link decoded a batch")
                break
            }
            for op in decoded.operations { precondition((try? op.validate()) != nil, "a decoded operation is invalid") }
            accepted.append(decoded)
        }
        var sender = BatchLink(), mirror = BatchLink()
        for batch in accepted {
            let again: OperationBatch
            do { again = try OperationBatch(decoding: batch.encoded(linkedTo: &sender), link: &mirror) } catch {
                preconditionFailure("an accepted batch does not decode after linked encoding: \(error)")
            }
            precondition(again == batch, "a batch changed through a fresh link")
        }
    }

    /// A server-side session after a valid HELLO, fed the input as the rest of the stream (in
    /// two reads split where the input says); operations are admitted and applied to a replica,
    /// image chunks assembled, as the hub does. The session never traps and always ends closed
    /// or open, with bounded output.
    static func session(_ bytes: [UInt8]) {
        var session = SyncSession(role: .acceptor, localReplica: ReplicaID(0x5E55))
        session.listen(now: 0)
        var replica = Replica(id: ReplicaID(0x5E55))
        var assets = AssetAssembler(maxPartialBytes: 1 << 20)
        func handle(_ events: [SessionEvent]) {
            for event in events {
                switch event {
                case .hello: session.accept(version: replica.versionVector)
                case .operations(let batch):
                    if (try? replica.admit(batch)) != nil { _ = try? replica.apply(batch) }
                case .assetChunk(let chunk):
                    _ = try? assets.add(chunk)
                default: break
                }
            }
        }
        handle(session.receive(helloFrame, now: 0))
        let split = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
        handle(session.receive(Array(bytes[..<split]), now: 1))
        handle(session.receive(Array(bytes[split...]), now: 2))
        handle(session.handleTimer(now: 3))
        let output = session.takeOutput(maxBytes: 1 << 22, now: 3)
        precondition(output.count <= 1 << 22, "output over its budget")
    }

    /// The op log reader: `open` either refuses the file as damaged (and `isDamaged` agrees),
    /// or reads it (cutting a torn tail), after which reopening reads the same batches with
    /// nothing to cut. `salvage` never traps. An input starting with a zero byte gets a valid
    /// header in its place, so mutations reach the records rather than the magic.
    static func opLog(_ bytes: [UInt8]) {
        let fileSystem = MemoryFileSystem()
        let path = "/log"
        let content = bytes.first == 0 ? OpLog.magic + bytes.dropFirst() : bytes
        guard (try? fileSystem.writeFile(path, content)) != nil else { return }
        _ = OpLog.salvage(content)
        let first: [OperationBatch]
        do {
            first = try OpLog.open(path, fileSystem: fileSystem).batches
        } catch let error as StoreError where error.code == .damagedLog {
            precondition(OpLog.isDamaged(content), "open refused a log isDamaged calls sound")
            return
        } catch {
            preconditionFailure("open failed without naming damage: \(error)")
        }
        precondition(!OpLog.isDamaged(content), "open read a log isDamaged calls damaged")
        do {
            let (_, again, recovery) = try OpLog.open(path, fileSystem: fileSystem)
            precondition(again == first, "reopening read different batches")
            precondition(recovery.truncatedReason == nil && !recovery.upgraded || content.starts(with: Array("BSOPLOG1".utf8)),
                         "reopening cut again")
        } catch {
            preconditionFailure("a log that opened once does not open again: \(error)")
        }
    }

    /// The PNG decoder (stickers and backgrounds, decoded by exports): an image or an error;
    /// an image it returns survives our encoder and decodes to the same pixels.
    static func png(_ bytes: [UInt8]) {
        guard let image = try? PNGDecoder.decode(bytes) else { return }
        precondition(image.pixels.count == image.width * image.height * 4)
        guard image.width * image.height <= 1 << 16 else { return }  // keep each run quick
        let again: RGBAImage
        do { again = try PNGDecoder.decode(PNGWriter.encode(image)) } catch {
            preconditionFailure("a decoded image does not decode after encoding: \(error)")
        }
        precondition(again == image, "an image changed through encode and decode")
    }

    /// The HTTP request parser (`serve --web`), the stream split where the input says: each head
    /// it returns is well-formed, and the WebSocket handshake and error responses over it never
    /// trap. At most as many requests as input bytes.
    static func http(_ bytes: [UInt8]) {
        var parser = HTTPRequestParser(limits: HTTPLimits())
        let split = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
        var requests = 0
        for part in [Array(bytes[..<split]), Array(bytes[split...])] {
            var next: HTTPRequest?
            do { next = try parser.append(part) } catch {
                _ = HTTPResponse.error(error).encoded()
                return
            }
            while let request = next {
                requests += 1
                precondition(requests <= bytes.count, "more requests than input bytes")
                precondition(request.target.hasPrefix("/") && !request.method.isEmpty, "a malformed head was returned")
                _ = (request.path, request.query)
                switch WebSocket.handshake(request) {
                case .success(let response): _ = response.encoded()
                case .failure(let error): _ = HTTPResponse.error(error).encoded()
                }
                do { next = try parser.next() } catch { return }
            }
        }
        precondition(parser.remaining.count <= bytes.count)
    }

    /// A WebSocket connection fed the input as client frames in two reads: messages come out
    /// whole and within the limit, output stays bounded, and nothing is read after a failure
    /// or a close.
    static func websocket(_ bytes: [UInt8]) {
        let limit = 1 << 16
        var connection = WebSocketConnection(maxMessage: limit)
        let split = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
        var ended = false
        for part in [Array(bytes[..<split]), Array(bytes[split...])] {
            let events = connection.receive(part)
            precondition(!ended || events.isEmpty, "events after the connection ended")
            for event in events {
                switch event {
                case .text(let text): precondition(text.utf8.count <= limit)
                case .binary(let data): precondition(data.count <= limit)
                case .closed, .failed: ended = true
                }
            }
        }
        connection.send(text: "x")
        precondition(connection.takeOutput().count <= 2 * bytes.count + 256, "output grew past the input")
    }

    /// A web page's JSON message (`serve --web`): parsed, and what is accepted applied as the
    /// page's edit to a replica holding a small board (its items named by the input's ids when
    /// they match). Never traps; a refusal is an answer; an edit that throws changes nothing.
    static func webMessage(_ bytes: [UInt8]) {
        guard bytes.count <= 1 << 20 else { return }
        let text = String(decoding: bytes, as: UTF8.self)
        guard case .success(let message) = WebMessage.parse(text, maxImageSide: 8192), let body = message.edit else { return }
        var replica = webReplica()
        let before = replica
        do {
            _ = try body(&replica)
        } catch {
            precondition(replica.versionVector == before.versionVector, "a refused page edit changed the replica")
            return
        }
        _ = replica.snapshot()
    }

    /// The board a `webmessage` input edits: a sticker and a stroke with fixed ids (made per
    /// input: a replica kept in a global reads as a leak to LeakSanitizer).
    static func webReplica() -> Replica {
        var replica = Replica(id: ReplicaID(0x3EB))
        _ = try? replica.addSticker(imagePNG: Data(PNGEncoder.solid(width: 2, height: 2, red: 1, green: 2, blue: 3)), at: CodablePoint(x: 5, y: 5))
        if let stroke = try? replica.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 0), width: 2, points: [CodablePoint(x: 1, y: 1)]).item {
            replica.finishStroke(stroke)
        }
        return replica
    }

    /// The RESP decoder (what a Redis server, or whoever answers on its port, sends), the stream
    /// split where the input says: every value it returns encodes to bytes that decode to the
    /// same value, and it never returns more values than bytes.
    /// A hostile Redis (or whatever answers on its port) replying to a server's board log: the
    /// input after two bytes is what the commands link reads (as many bytes as the first byte
    /// says), then the tail link, then the presence link (as many as the second byte says). The log and its hub never trap, the board stays readable, and what
    /// the log keeps waiting on stays bounded.
    static func redisLog(_ bytes: [UInt8]) {
        let store = MemoryReplicaStore(replica: Replica(id: ReplicaID(0x5E)))
        let hub = BoardHub(board: "fuzz", store: store)
        hub.groupCommit = true
        var options = RedisBoardLog.Options(node: "fuzz")
        options.checkpointEvery = 2
        let log = RedisBoardLog(options: options)
        for link in RedisBoardLog.Link.allCases { log.linkUp(link, now: 0) }
        log.attach("fuzz", hub: hub, now: 0)
        let body = Array(bytes.dropFirst(min(2, bytes.count)))
        let first = bytes.isEmpty ? 0 : Int(bytes[0]) % (body.count + 1)
        let second = body.count - (bytes.count < 2 ? 0 : Int(bytes[1]) % (body.count - first + 1))
        let parts: [(RedisBoardLog.Link, ArraySlice<UInt8>)] = [(.commands, body[..<first]), (.tail, body[first..<second]), (.presence, body[second...])]
        var now = 0.0
        for (link, part) in parts {
            _ = log.takeOutput(link)
            do { try log.receive(link, Array(part), now: now) } catch { log.linkDown(link, now: now, reason: "fuzz") }
            now += 1
            _ = log.handleTimers(now: now)
            _ = hub.handleTimers(now: now)
        }
        _ = store.replica.snapshot()
        precondition(log.unconfirmedAppends <= bytes.count + 1, "appends without bound")
    }

    static func resp(_ bytes: [UInt8]) {
        var limits = RESPLimits()
        limits.maxBulk = 1 << 16
        limits.maxElements = 1 << 12
        var decoder = RESPDecoder(limits: limits)
        let split = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
        var values = 0
        for part in [Array(bytes[..<split]), Array(bytes[split...])] {
            decoder.append(part)
            while true {
                let next: RESPValue?
                do { next = try decoder.next() } catch { return }
                guard let value = next else { break }
                values += 1
                precondition(values <= bytes.count, "more values than input bytes")
                var again = RESPDecoder(limits: limits)
                again.append(value.encoded())
                let decoded: RESPValue?
                do { decoded = try again.next() } catch { preconditionFailure("a decoded value does not decode after encoding: \(error)") }
                precondition(decoded == value, "a value changed through encode and decode")
            }
        }
    }

    /// The manifest reader (a package's view), given the input as manifest.json: a snapshot or
    /// an error, never a trap; a snapshot it returns encodes to canonical JSON.
    static func manifest(_ bytes: [UInt8]) {
        let fileSystem = MemoryFileSystem()
        guard (try? fileSystem.createDirectories("/p.boardpkg/stickers")) != nil,
              (try? fileSystem.writeFile("/p.boardpkg/manifest.json", bytes)) != nil else { return }
        guard let snapshot = try? PackageReader(fileSystem: fileSystem).read("/p.boardpkg") else { return }
        _ = try? snapshot.canonicalJSON()
    }
}

extension FuzzTargets {
    /// Valid inputs for each target, made by the real code (a small board with every kind of
    /// edit): libFuzzer starts from these (bin/fuzz writes them into its corpus), and the
    /// regression test checks that each passes its own target.
    public static func seeds(_ name: String) -> [[UInt8]] {
        let board = try! SeedBoard()
        switch name {
        case "frame":
            return board.messages.map { $0.frame().encoded() } + [board.messages.flatMap { $0.frame().encoded() }]
        case "operations":
            // Both batch formats: 2 (packed points) and 1 (op logs and peers from before it).
            return [board.batch.encoded(), board.batch.encoded(format: 1)] + board.edits.map { OperationBatch(operations: $0).encoded() }
        case "linked":
            // The board's edits as a peer sends them live, one linked batch each, with a
            // self-contained batch between.
            var link = BatchLink()
            var stream: [UInt8] = []
            for (index, edit) in board.edits.enumerated() {
                let bytes = index == 2 ? OperationBatch(operations: edit).encoded() : OperationBatch(operations: edit).encoded(linkedTo: &link)
                stream += [UInt8(bytes.count & 0xFF), UInt8(bytes.count >> 8)] + bytes
            }
            return [stream]
        case "session":
            // Everything after the HELLO, in one stream; then the edits as linked batches.
            var link = BatchLink()
            let live = board.edits.flatMap { Message.operations(OperationBatch(operations: $0).encoded(linkedTo: &link)).frame().encoded() }
            return [board.messages.dropFirst().flatMap { $0.frame().encoded() }, live]
        case "oplog":
            return [board.opLog, [0] + board.opLog.dropFirst(OpLog.magic.count)]
        case "manifest":
            return [board.manifest]
        case "png":
            return board.images
        case "http":
            return [Array(("GET /ws/seed?token=bst1.x.y HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8),
                    Array("GET /b/seed HTTP/1.1\r\nHost: a\r\n\r\nGET /b/seed/asset/00ff HTTP/1.0\r\n\r\n".utf8)]
        case "resp":
            return [Array("+OK\r\n:1700000000000\r\n$15\r\n1700000000000-0\r\n*-1\r\n".utf8),
                    Array("*1\r\n*2\r\n$12\r\nbs:plans:log\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nb\r\n$3\r\nabc\r\n".utf8),
                    Array("%2\r\n+server\r\n$5\r\nredis\r\n+proto\r\n:3\r\n>3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nx\r\n_\r\n#t\r\n,1.5\r\n(123\r\n=7\r\ntxt:abc\r\n~1\r\n:1\r\n-ERR x\r\n!3\r\nbad\r\n".utf8)]
        case "redislog":
            // Replies as Redis gives them: no checkpoint, an empty stream, the recheck; the
            // tail's client id and one read with an entry; a presence message.
            func entry(_ id: String, _ node: String, _ bytes: [UInt8]) -> RESPValue {
                .array([.bulkString(Array(id.utf8)), .array([.bulkString(Array("n".utf8)), .bulkString(Array(node.utf8)),
                                                             .bulkString(Array("o".utf8)), .bulkString(bytes)])])
            }
            let commands = [RESPValue.array([]), .array([]), .bulkString(nil), .array([.bulkString(Array("0-0".utf8)), .bulkString(nil)]),
                            .integer(3)].flatMap { $0.encoded() }
            let tail = [RESPValue.integer(7), .array([.array([.bulkString(Array("bs:{fuzz}:log".utf8)),
                                                              .array([entry("5-0", "other", board.batch.encoded()), entry("6-0", "other", board.batch.encoded(format: 1))])])])]
                .flatMap { $0.encoded() }
            var payload = ByteWriter()
            payload.write(lengthPrefixed: Array("other".utf8))
            payload.write(bytes: board.messages.compactMap { if case .presence = $0 { return $0.frame().encoded() } else { return nil } }.first ?? [])
            let presence = RESPValue.array([.bulkString(Array("message".utf8)), .bulkString(Array("bs:{fuzz}:presence".utf8)),
                                            .bulkString(payload.bytes)]).encoded()
            func seed(_ parts: [[UInt8]]) -> [UInt8] {
                precondition(parts[0].count < 256 && parts[2].count < 256, "a redislog seed's commands and presence parts fit a byte")
                return [UInt8(parts[0].count), UInt8(parts[2].count)] + parts.flatMap { $0 }
            }
            return [seed([commands, tail, presence]), seed([commands, [], []])]
        case "webmessage":
            let sticker = ItemID(high: 0x3EB, low: 1).uuid.uuidString
            let png = Data(PNGEncoder.solid(width: 3, height: 2, red: 9, green: 9, blue: 9)).base64EncodedString()
            return [Array("{\"type\":\"pointer\",\"x\":12.5,\"y\":7,\"name\":\"ann\",\"ink\":[1,2,3,4],\"color\":\"#ff0000\",\"width\":4}".utf8),
                    Array("{\"type\":\"stroke\",\"points\":[1,2,30,40,55.5,60],\"color\":\"#ff000080\",\"width\":5}".utf8),
                    Array("{\"type\":\"sticker\",\"png\":\"\(png)\",\"x\":100,\"y\":80,\"scale\":2}".utf8),
                    Array("{\"type\":\"move\",\"id\":\"\(sticker)\",\"x\":50,\"y\":50}".utf8),
                    Array("{\"type\":\"transform\",\"id\":\"\(sticker)\",\"scale\":2,\"rotation\":0.5}".utf8),
                    Array("{\"type\":\"front\",\"id\":\"\(sticker)\"}".utf8), Array("{\"type\":\"undo\"}".utf8)]
        case "websocket":
            let mask: [UInt8] = [1, 2, 3, 4]
            return [WebSocket.frame(.text, Array("{\"type\":\"move\"}".utf8), mask: mask),
                    WebSocket.frame(.binary, [9, 8, 7], fin: false, mask: mask) + WebSocket.frame(.ping, [1], mask: mask)
                        + WebSocket.frame(.continuation, [6], mask: mask) + WebSocket.frame(.close, [3, 232, 65], mask: mask),
                    WebSocket.frame(.binary, [UInt8](repeating: 5, count: 300), mask: mask)]
        default:
            preconditionFailure("unknown fuzz target '\(name)'")
        }
    }
}

/// A small board made through a package on a memory file system: its operations, the messages
/// a session would exchange about it, its op log file and its manifest.
struct SeedBoard {
    var edits: [[Op]] = []
    var batch: OperationBatch
    var messages: [Message]
    var opLog: [UInt8]
    var manifest: [UInt8]
    /// PNGs of several kinds: our stored-deflate encoder's, the export encoder's (filtered,
    /// zlib), one with a palette and transparency, one interlaced.
    var images: [[UInt8]]

    init() throws {
        let fileSystem = MemoryFileSystem()
        let path = "/seed.boardpkg"
        let package = try BoardPackage.create(at: path, fileSystem: fileSystem, replicaID: ReplicaID(0xA11CE))
        let png = Data(PNGEncoder.solid(width: 3, height: 2, red: 200, green: 10, blue: 10))
        let hash = try package.addAsset(png)
        var edits: [[Op]] = []
        func commit(_ body: (inout Replica) throws -> LocalEdit) throws -> ItemID? {
            let edit = try package.commit(body)
            edits.append(edit.operations)
            return edit.item
        }
        let stroke = try commit { replica in
            let edit = try replica.beginStroke(color: RGBAColor(red: 0.2, green: 0.4, blue: 0.9), width: 3,
                                               points: [CodablePoint(x: 1, y: 2), CodablePoint(x: 30.5, y: 40.25)])
            return edit
        }!
        _ = try commit { try $0.appendPoints([CodablePoint(x: 50, y: 60), CodablePoint(x: -7, y: 8)]) }
        try package.commit { replica in replica.finishStroke(); return LocalEdit() }
        let sticker = try commit { try $0.addSticker(asset: hash, at: CodablePoint(x: 100, y: 80), scale: 1.5, rotation: 0.3) }!
        _ = try commit { try $0.move(sticker, to: CodablePoint(x: 120, y: 90)) }
        _ = try commit { try $0.setColor(stroke, to: RGBAColor(red: 1, green: 0, blue: 0, alpha: 0.5)) }
        _ = try commit { try $0.setWidth(stroke, to: 5) }
        _ = try commit { try $0.bringToFront(stroke) }
        _ = try commit { try $0.delete(sticker) }
        _ = try commit { try $0.restore(sticker) }
        _ = try commit { try $0.setBackground(asset: hash) }
        _ = try commit { try $0.setCanvasSize(CodableSize(width: 800, height: 600)) }
        // A named version (operation kind 15), then its rename.
        var label: LabelID?
        try package.commit { replica in
            let edit = try replica.setLabel(text: "seed ✏️ label", version: replica.versionVector, time: 1_700_000_000_000)
            edits.append(edit.operations)
            if case .setLabel(let id, _)? = edit.operations.first?.payload { label = id }
            return edit
        }
        if let label { _ = try commit { try $0.renameLabel(label, to: "renamed", time: 1_700_000_000_500) } }
        try package.save()
        self.edits = edits
        batch = OperationBatch(operations: edits.flatMap { $0 })
        let version = package.replica.versionVector
        messages = [
            .hello(Hello(board: "seed", replica: ReplicaID(0xA11CE), credentials: Array("bst1.x.y".utf8), version: version)),
            .operations(batch.encoded()),
            .ack(version),
            .synced(version),
            .want([AssetRequest(hash: hash, offset: 0)]),
            .assetChunk(AssetChunk(hash: hash, totalSize: UInt64(png.count), offset: 0, bytes: Array(png))),
            .noAsset(hash),
            .ping(7),
            .pong(7),
            .error(code: 4, message: "seed error"),
            .presence(Presence(replica: ReplicaID(0xA11CE), name: "seed ✏️", color: .black, pointer: GridPoint(x: 16, y: -32),
                               selection: [ItemID(high: 0xA11CE, low: 1)],
                               stroke: InkPreview(item: ItemID(high: 0xA11CE, low: 2), color: .black, width: 32,
                                                  points: [GridPoint(x: 1, y: 2), GridPoint(x: 5, y: 9)]),
                               ttl: 10, clock: 3)),
            // History on demand (message types 14 and 15): requests of each kind, answers with
            // versions, with records, and a refusal.
            .historyRequest(HistoryRequest(id: 1, what: .versions, from: 1, to: 5)),
            .historyRequest(HistoryRequest(id: 2, what: .records, from: 0, to: 3, maxBytes: 65_536)),
            .historyRequest(HistoryRequest(id: 3, what: .operations, from: 3, to: 9)),
            .history(HistoryAnswer(id: 1, what: .versions, total: 14, first: 1, next: 2,
                                   versions: [HistoryVersionInfo(number: 1, time: 1_700_000_000_000, operationCount: 2,
                                                                 authors: [ReplicaID(0xA11CE)], vector: version)])),
            .history(HistoryAnswer(id: 2, what: .records, total: 14, first: 1,
                                   records: [HistoryRecord(number: 0, time: nil, batch: batch.encoded()),
                                             HistoryRecord(number: 1, time: 1_700_000_000_000, batch: OperationBatch(operations: edits[0]).encoded())])),
            .history(HistoryAnswer(id: 3, status: .busy, message: "seed: ask again later", what: .operations)),
            .bye,
        ]
        let gradient = RGBAImage(width: 9, height: 7, pixels: (0..<(9 * 7 * 4)).map { UInt8(truncatingIfNeeded: $0 * 37) })
        images = [Array(png), PNGWriter.encode(gradient), SeedBoard.palettePNG, SeedBoard.interlacedPNG]
        opLog = try fileSystem.readFile(Path.join(path, PackageLayout.opLog))
        manifest = try fileSystem.readFile(Path.join(path, PackageLayout.manifest))
        package.close()
    }
}

extension FuzzTargets {
    /// Writes the target's seeds into `directory` (a libFuzzer corpus) as `seed-N`.
    public static func writeSeeds(_ name: String, to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (index, seed) in seeds(name).enumerated() {
            try Data(seed).write(to: URL(fileURLWithPath: directory).appendingPathComponent("seed-\(index)"))
        }
    }
}

extension SeedBoard {
    static let chunk = PNGWriter.chunk
    static let signature = PNGWriter.signature

    /// 4×2, 2-bit palette of three colours, the second half transparent.
    static let palettePNG: [UInt8] = {
        let rows: [UInt8] = [0, 0b0001_1000, 0, 0b1001_0000]  // filter 0, four 2-bit indices per row
        return signature + chunk("IHDR", [0, 0, 0, 4, 0, 0, 0, 2, 2, 3, 0, 0, 0])
            + chunk("PLTE", [255, 0, 0, 0, 255, 0, 0, 0, 255]) + chunk("tRNS", [255, 128])
            + chunk("IDAT", Zlib.compress(rows)) + chunk("IEND", [])
    }()

    /// 3×3 gray 8-bit, Adam7-interlaced: passes 2 and 3 are empty at this size (they start
    /// at x = 4 and y = 4); the other five hold the pixels listed below.
    static let interlacedPNG: [UInt8] = {
        let raw: [UInt8] = [0, 10,          // pass 1: (0,0)
                            0, 20,          // pass 4: (2,0)
                            0, 30, 40,      // pass 5: (0,2), (2,2)
                            0, 50, 0, 60,   // pass 6: (1,0), (1,2)
                            0, 70, 80, 90]  // pass 7: row 1
        return signature + chunk("IHDR", [0, 0, 0, 3, 0, 0, 0, 3, 8, 0, 0, 0, 1])
            + chunk("IDAT", Zlib.compress(raw)) + chunk("IEND", [])
    }()
}
