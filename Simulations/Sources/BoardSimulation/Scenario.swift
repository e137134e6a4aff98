import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Foundation
import Synchronization

/// A conflict scenario a person can write and run (`board-sim run FILE`): peers around a sync
/// server, their edits, partitions, crashes and heals, and what the final board must show. The
/// peers and the server run the real endpoints and packages over simulated links and disks.
/// docs/SIMULATION.md documents the format; `Simulations/Scenarios/` holds examples.
public struct Scenario: Sendable {
    public struct Line: Sendable {
        public var number: Int
        public var text: String
    }

    public let name: String
    public let lines: [Line]

    /// Parses the text (lines starting with `#` are comments; blank lines are ignored).
    public init(name: String, text: String) {
        self.name = name
        var lines: [Line] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = raw.trimmingCharacters(in: .whitespaces)
            if !trimmed.isEmpty, !trimmed.hasPrefix("#") { lines.append(Line(number: index + 1, text: trimmed)) }
        }
        self.lines = lines
    }

    public struct Outcome: Sendable {
        /// The timeline: each line as run, with what it did or found.
        public var transcript: [String] = []
        /// Each replica's final board, as text.
        public var boards: [String] = []
        /// Each replica's final board (server first in world scenarios), for pictures.
        public var snapshots: [(host: String, board: BoardSnapshot)] = []
        public var failures: [String] = []
        public var passed: Bool { failures.isEmpty }
    }

    public struct ScenarioError: Error, CustomStringConvertible {
        public var line: Int
        public var message: String
        public var description: String { "line \(line): \(message)" }
    }

    /// Runs the scenario; a malformed line throws, a failed expectation is reported.
    public func run() throws -> Outcome {
        if lines.first?.text.hasPrefix("world ") == true { return try runWorld() }
        var runner = try ScenarioRunner(lines)
        return try runner.run()
    }

    /// Whether this is a world scenario (a `Plan`: timed edits and faults, checked by the oracles).
    public var isWorld: Bool { lines.first?.text.hasPrefix("world ") == true }

    /// A world scenario: the plan runs in the simulator and every oracle checks the result.
    private func runWorld() throws -> Outcome {
        let plan: Plan
        do {
            plan = try Plan(text: lines.map(\.text).joined(separator: "\n"))
        } catch let error as Plan.ParseError {
            // The plan counts lines without comments; name the line of the file.
            let number = error.line - 1 < lines.count ? lines[error.line - 1].number : error.line
            throw ScenarioError(line: number, message: error.message)
        }
        let transcript = Mutex<[String]>([])
        let world = try World(plan, log: { line in
            if line.contains("EVENT") || line.contains("HEAL") || line.contains("FAILED") {
                transcript.withLock { $0.append(line.trimmingCharacters(in: .whitespaces)) }
            }
        })
        let report = world.run()
        var outcome = Outcome()
        outcome.transcript = transcript.withLock { $0 }
        outcome.transcript.append("faults hit: " + report.faultsHit.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        outcome.transcript.append(report.convergedAfter.map { String(format: "converged %.2f s after the heal", $0) } ?? "did not converge")
        for (host, board) in world.finalBoards {
            outcome.boards.append("\(host):\n" + (board.map { ScenarioRunner.describe($0, labels: [:]) } ?? "  (down)"))
            if let board { outcome.snapshots.append((host, board)) }
        }
        outcome.failures = report.failures
        return outcome
    }
}

/// The machinery behind `Scenario.run` (its expectations in Scenario+Expectations.swift).
struct ScenarioRunner {
    final class Peer {
        let name: String
        let fs = MemoryFileSystem()
        var package: BoardPackage
        var endpoint: SyncEndpoint
        var online = true
        var link: (peer: SessionID, server: SessionID)?
        /// The next bytes this peer sends get one byte flipped.
        var corruptNext = false

        init(name: String, id: ReplicaID) throws {
            self.name = name
            try fs.createDirectory("/p")
            package = try BoardPackage.create(at: "/p/board.boardpkg", fileSystem: fs, replicaID: id)
            endpoint = SyncEndpoint(board: "scenario", store: package, now: 0)
        }
    }

    let lines: [Scenario.Line]
    var peers: [Peer] = []
    let serverFS = MemoryFileSystem()
    var server: SyncEndpoint
    var items: [String: ItemID] = [:]
    var now = 0.0
    var nextID: SessionID = 0
    var outcome = Scenario.Outcome()
    static let images: [String: Data] = {
        var images: [String: Data] = [:]
        for (index, name) in ["red", "green", "blue"].enumerated() {
            let rgb: [UInt8] = [index == 0 ? 220 : 20, index == 1 ? 200 : 20, index == 2 ? 220 : 20]
            images[name] = Data(PNGEncoder.solid(width: 4, height: 4, red: rgb[0], green: rgb[1], blue: rgb[2]))
        }
        return images
    }()

    init(_ lines: [Scenario.Line]) throws {
        self.lines = lines
        try serverFS.createDirectory("/data")
        server = ScenarioRunner.makeServer(serverFS)
    }

    static func makeServer(_ fs: MemoryFileSystem) -> SyncEndpoint {
        SyncEndpoint(opener: { name in
            let path = "/data/\(name).boardpkg"
            return fs.isDirectory(path)
                ? try BoardPackage.open(at: path, fileSystem: fs, newReplicaID: { ReplicaID(0x5E) })
                : try BoardPackage.create(at: path, fileSystem: fs, replicaID: ReplicaID(0x5E))
        }, now: 0)
    }

    mutating func run() throws -> Scenario.Outcome {
        for line in lines {
            do {
                try perform(line)
            } catch let error as Scenario.ScenarioError {
                throw error
            } catch {
                throw Scenario.ScenarioError(line: line.number, message: "\(error)")
            }
        }
        for peer in peers {
            let board = peer.package.replica.snapshot()
            outcome.boards.append("\(peer.name):\n" + ScenarioRunner.describe(board, labels: items))
            outcome.snapshots.append((peer.name, board))
        }
        if let replica = server.boards["scenario"]?.store.replica {
            let board = replica.snapshot()
            outcome.boards.append("server:\n" + ScenarioRunner.describe(board, labels: items))
            outcome.snapshots.append(("server", board))
        }
        return outcome
    }

    // MARK: Lines

    mutating func perform(_ line: Scenario.Line) throws {
        func fail(_ message: String) -> Scenario.ScenarioError { Scenario.ScenarioError(line: line.number, message: message) }
        var words = line.text.split(separator: " ").map(String.init)
        let head = words.removeFirst()
        switch head {
        case "peers":
            guard peers.isEmpty, !words.isEmpty else { throw fail("`peers NAME...` comes once, first") }
            for (index, name) in words.enumerated() {
                peers.append(try Peer(name: name, id: ReplicaID(UInt64(index + 1) << 8)))
            }
            outcome.transcript.append("\(line.number): peers \(words.joined(separator: ", ")) around a sync server")
            sync()
        case "sync":
            sync()
            outcome.transcript.append("\(line.number): sync — every online peer exchanges everything through the server")
        case "partition", "offline":
            for name in words { try peer(name, line).online = false }
            for peer in peers where !peer.online { disconnect(peer) }
            outcome.transcript.append("\(line.number): \(words.joined(separator: ", ")) offline (their edits stay local)")
        case "heal", "online":
            for peer in peers where words.isEmpty || words.contains(peer.name) { peer.online = true }
            sync()
            outcome.transcript.append("\(line.number): \(words.isEmpty ? "everyone" : words.joined(separator: ", ")) back online, synced")
        case "crash":
            guard let name = words.first else { throw fail("`crash server` or `crash PEER`") }
            try crash(name, line)
            outcome.transcript.append("\(line.number): \(name) crashes (power loss) and restarts from its disk")
        case "cut":
            // cut NAME...: drop these peers' links (they reconnect at the next sync)
            for name in words { disconnect(try peer(name, line)) }
            outcome.transcript.append("\(line.number): \(words.joined(separator: ", ")) lose their connection")
        case "corrupt":
            // corrupt NAME: a byte of the next bytes NAME sends is flipped on the way
            for name in words { try peer(name, line).corruptNext = true }
            outcome.transcript.append("\(line.number): the next bytes from \(words.joined(separator: ", ")) get corrupted")
        case "disk":
            // disk full server | disk ok server
            guard words.count == 2, words[1] == "server", ["full", "ok"].contains(words[0]) else { throw fail("`disk full server` or `disk ok server`") }
            serverFS.setCapacity(words[0] == "full" ? 0 : nil)
            if words[0] == "ok" { sync() }
            outcome.transcript.append("\(line.number): the server's disk is \(words[0] == "full" ? "full" : "fine again")")
        case "expect":
            try expect(words, line)
        default:
            guard head.hasSuffix(":") else { throw fail("unknown line `\(line.text)`") }
            let peer = try peer(String(head.dropLast()), line)
            let made = try edit(peer, words, line)
            outcome.transcript.append("\(line.number): \(peer.name) \(words.joined(separator: " "))\(made)")
        }
    }

    func peer(_ name: String, _ line: Scenario.Line) throws -> Peer {
        guard let peer = peers.first(where: { $0.name == name }) else {
            throw Scenario.ScenarioError(line: line.number, message: "no peer named \(name) (peers: \(peers.map(\.name).joined(separator: ", ")))")
        }
        return peer
    }

    func item(_ label: String, _ line: Scenario.Line) throws -> ItemID {
        guard let item = items[label] else { throw Scenario.ScenarioError(line: line.number, message: "no item labelled \(label) yet") }
        return item
    }

    static func point(_ text: String, _ line: Scenario.Line) throws -> CodablePoint {
        let parts = text.split(separator: ",").compactMap { Double($0) }
        guard parts.count == 2 else { throw Scenario.ScenarioError(line: line.number, message: "`\(text)` is not a point X,Y") }
        return CodablePoint(x: parts[0], y: parts[1])
    }

    static func number(_ text: String?, _ line: Scenario.Line) throws -> Double {
        guard let text, let value = Double(text) else {
            throw Scenario.ScenarioError(line: line.number, message: "`\(text ?? "")` is not a number")
        }
        return value
    }

    static func color(_ text: String, _ line: Scenario.Line) throws -> RGBAColor {
        var hex = text.hasPrefix("#") ? String(text.dropFirst()) : text
        if hex.count == 6 { hex += "FF" }
        guard hex.count == 8, let value = UInt32(hex, radix: 16) else {
            throw Scenario.ScenarioError(line: line.number, message: "`\(text)` is not a colour #RRGGBB[AA]")
        }
        func channel(_ shift: UInt32) -> Double { Double((value >> shift) & 0xFF) / 255 }
        return RGBAColor(red: channel(24), green: channel(16), blue: channel(8), alpha: channel(0))
    }

    /// `PEER: VERB ...`: one local edit. Returns a note for the transcript.
    mutating func edit(_ peer: Peer, _ words: [String], _ line: Scenario.Line) throws -> String {
        func fail(_ message: String) -> Scenario.ScenarioError { Scenario.ScenarioError(line: line.number, message: message) }
        guard let verb = words.first else { throw fail("an edit needs a verb") }
        let args = Array(words.dropFirst())
        var label: String?
        let edit = try peer.endpoint.edit("scenario", now: now) { replica -> LocalEdit in
            switch verb {
            case "stroke":
                // stroke LABEL X,Y X,Y ... [color #RRGGBB] [width W]
                guard args.count >= 2 else { throw fail("`stroke LABEL X,Y ...`") }
                label = args[0]
                var points: [CodablePoint] = []
                var color = RGBAColor(red: 0, green: 0, blue: 0)
                var width = 2.0
                var index = 1
                while index < args.count {
                    switch args[index] {
                    case "color": color = try ScenarioRunner.color(args[min(index + 1, args.count - 1)], line); index += 2
                    case "width": width = try ScenarioRunner.number(args.count > index + 1 ? args[index + 1] : nil, line); index += 2
                    default: points.append(try ScenarioRunner.point(args[index], line)); index += 1
                    }
                }
                let edit = try replica.beginStroke(color: color, width: width, points: points)
                replica.finishStroke()
                return edit
            case "draw":
                // draw LABEL X,Y ...: begins a stroke and keeps drawing it (see `append`)
                guard args.count >= 1 else { throw fail("`draw LABEL X,Y ...`") }
                label = args[0]
                return try replica.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 0), width: 2,
                                               points: try args.dropFirst().map { try ScenarioRunner.point($0, line) })
            case "append":
                // append X,Y ...: more points for the stroke this peer is drawing
                return try replica.appendPoints(try args.map { try ScenarioRunner.point($0, line) })
            case "finish":
                replica.finishStroke()
                return LocalEdit()
            case "sticker":
                // sticker LABEL at X,Y [image red|green|blue]
                guard args.count >= 3, args[1] == "at" else { throw fail("`sticker LABEL at X,Y [image red|green|blue]`") }
                label = args[0]
                let image = args.count >= 5 && args[3] == "image" ? args[4] : "red"
                guard let png = ScenarioRunner.images[image] else { throw fail("images are red, green and blue") }
                return try replica.addSticker(imagePNG: png, at: try ScenarioRunner.point(args[2], line))
            case "move": return try replica.move(try item(args.first ?? "", line), to: try ScenarioRunner.point(args.count > 1 ? args[1] : "", line))
            case "scale": return try replica.setScale(try item(args.first ?? "", line), to: try ScenarioRunner.number(args.count > 1 ? args[1] : nil, line))
            case "rotate": return try replica.setRotation(try item(args.first ?? "", line), to: try ScenarioRunner.number(args.count > 1 ? args[1] : nil, line))
            case "color": return try replica.setColor(try item(args.first ?? "", line), to: try ScenarioRunner.color(args.count > 1 ? args[1] : "", line))
            case "width": return try replica.setWidth(try item(args.first ?? "", line), to: try ScenarioRunner.number(args.count > 1 ? args[1] : nil, line))
            case "image":
                guard let png = ScenarioRunner.images[args.count > 1 ? args[1] : ""] else { throw fail("images are red, green and blue") }
                return try replica.replaceImage(try item(args.first ?? "", line), withPNG: png)
            case "delete", "erase": return try replica.delete(try item(args.first ?? "", line))
            case "restore": return try replica.restore(try item(args.first ?? "", line))
            case "front": return try replica.bringToFront(try item(args.first ?? "", line))
            case "back": return try replica.sendToBack(try item(args.first ?? "", line))
            case "between":
                guard args.count == 3 else { throw fail("`between ITEM LOWER UPPER`") }
                return try replica.put(try item(args[0], line), between: try item(args[1], line), and: try item(args[2], line))
            case "undo": return try replica.undo()
            case "redo": return try replica.redo()
            case "canvas":
                let size = (args.first ?? "").split(separator: "x").compactMap { Double($0) }
                guard size.count == 2 else { throw fail("`canvas WxH`") }
                return try replica.setCanvasSize(CodableSize(width: size[0], height: size[1]))
            default:
                throw fail("unknown edit `\(verb)`")
            }
        }
        if let label, let item = edit.item { items[label] = item }
        deliver()
        return edit.operations.isEmpty ? " (nothing to do)" : ""
    }

    // MARK: Network

    mutating func connect(_ peer: Peer) {
        guard peer.online, peer.link == nil else { return }
        nextID += 2
        peer.link = (nextID - 1, nextID)
        server.accept(nextID, now: now)
        peer.endpoint.dialed(nextID - 1, now: now)
    }

    mutating func disconnect(_ peer: Peer) {
        guard let link = peer.link else { return }
        peer.link = nil
        peer.endpoint.closed(link.peer, now: now)
        server.closed(link.server, now: now)
    }

    /// Moves bytes until every link is quiet (bounded), advancing the clock a little per round.
    mutating func deliver() {
        for _ in 0..<10_000 {
            now += 0.001
            var moved = false
            for peer in peers {
                guard let link = peer.link else { continue }
                var up = peer.endpoint.output(for: link.peer, now: now)
                if peer.corruptNext, !up.isEmpty {
                    up[up.count / 2] ^= 0x5A
                    peer.corruptNext = false
                }
                if !up.isEmpty { moved = true; server.receive(link.server, up, now: now) }
                let down = server.output(for: link.server, now: now)
                if !down.isEmpty { moved = true; peer.endpoint.receive(link.peer, down, now: now) }
            }
            // Links whose session ended (an error, a refusal) close; `sync` dials again.
            for peer in peers {
                if let link = peer.link, peer.endpoint.isFinished(link.peer) || server.isFinished(link.server) {
                    disconnect(peer)
                }
            }
            if !moved { break }
        }
        server.handleTimers(now: now)
        for peer in peers { peer.endpoint.handleTimers(now: now) }
    }

    mutating func sync() {
        for peer in peers where peer.online { connect(peer) }
        // Twice: what one peer sends reaches the others through the server in a second pass.
        deliver()
        deliver()
    }

    mutating func crash(_ name: String, _ line: Scenario.Line) throws {
        if name == "server" {
            for peer in peers { disconnect(peer) }
            serverFS.restart(.powerLoss(tornTail: true))
            server = ScenarioRunner.makeServer(serverFS)
        } else {
            let peer = try peer(name, line)
            disconnect(peer)
            peer.fs.restart(.powerLoss(tornTail: true))
            peer.package = try BoardPackage.open(at: "/p/board.boardpkg", fileSystem: peer.fs, newReplicaID: { ReplicaID(0xC0DE) })
            peer.endpoint = SyncEndpoint(board: "scenario", store: peer.package, now: now)
        }
        sync()
    }
}
