import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A blocking loopback client speaking HTTP/1.1 and, after an upgrade, WebSocket frames.
final class WebClient {
    let fd: Int32
    private var buffer: [UInt8] = []
    /// Added to every target that carries no token of its own (a view's run token).
    var token: String?

    init(_ address: SocketAddress, token: String? = nil) throws {
        self.token = token
        guard let fd = connectedSocket(address, receiveTimeout: timeval(tv_sec: 0, tv_usec: 200_000)) else {
            throw HTTPError(0, "cannot connect to \(address)")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// TLS over the socket once `startTLS` ran (HTTPS pages, wss:// sockets).
    private var tls: TLSStream?

    func send(_ bytes: [UInt8]) {
        var out = bytes
        if let tls {
            if !bytes.isEmpty { try? tls.send(bytes) }
            out = tls.takeOutput()
        }
        _ = out.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Speaks TLS from now on, verifying the server against `context`; true once the handshake
    /// is done.
    func startTLS(_ context: TLSContext) throws -> Bool {
        let stream = try context.stream(host: "127.0.0.1")
        tls = stream
        try stream.start()
        send([])
        let deadline = Date().addingTimeInterval(5)
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while !stream.isHandshakeDone, Date() < deadline {
            let got = recv(fd, &chunk, chunk.count, 0)
            if got > 0 {
                buffer += try stream.receive(Array(chunk[0..<got])).plaintext
                send([])
            } else if got == 0 { return false }
        }
        return stream.isHandshakeDone
    }

    /// Reads until `done(buffer)` says how many bytes make the answer, or `seconds` pass.
    private func read(seconds: Double, _ done: ([UInt8]) -> Int?) -> [UInt8]? {
        let deadline = Date().addingTimeInterval(seconds)
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            if let count = done(buffer) {
                defer { buffer.removeFirst(count) }
                return Array(buffer[..<count])
            }
            guard Date() < deadline else { return nil }
            let got = recv(fd, &chunk, chunk.count, 0)
            if got > 0 {
                if let tls {
                    guard let plain = try? tls.receive(Array(chunk[0..<got])) else { return nil }
                    buffer += plain.plaintext
                } else {
                    buffer += chunk[0..<got]
                }
            } else if got == 0 { return done(buffer).map { Array(buffer[..<$0]) } }
        }
    }

    /// One whole HTTP response (head, then the body by Content-Length, or until the close).
    func response(seconds: Double = 5) -> (status: Int, head: String, body: [UInt8])? {
        guard let head = read(seconds: seconds, { bytes in
            (0..<max(0, bytes.count - 3)).first { bytes[$0] == 13 && bytes[$0 + 1] == 10 && bytes[$0 + 2] == 13 && bytes[$0 + 3] == 10 }.map { $0 + 4 }
        }) else { return nil }
        let text = String(decoding: head, as: UTF8.self)
        let status = Int(text.split(separator: " ")[1]) ?? 0
        let length = text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        let body = read(seconds: seconds) { $0.count >= length ? length : nil } ?? []
        return (status, text, body)
    }

    func get(_ target: String, headers: String = "") -> (status: Int, head: String, body: [UInt8])? {
        send(Array("GET \(withToken(target)) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(headers)\r\n".utf8))
        return response()
    }

    func withToken(_ target: String) -> String {
        guard let token, !target.contains("token=") else { return target }
        return target + (target.contains("?") ? "&" : "?") + "token=" + token
    }

    /// The next server frame's opcode and payload (server frames are unmasked).
    func frame(seconds: Double = 10) -> (opcode: UInt8, payload: [UInt8])? {
        guard let bytes = read(seconds: seconds, { b in
            guard b.count >= 2 else { return nil }
            var length = Int(b[1] & 0x7F), header = 2
            if length == 126 {
                guard b.count >= 4 else { return nil }
                length = Int(b[2]) << 8 | Int(b[3]); header = 4
            } else if length == 127 {
                guard b.count >= 10 else { return nil }
                length = (2..<10).reduce(0) { $0 << 8 | Int(b[$1]) }; header = 10
            }
            return b.count >= header + length ? header + length : nil
        }) else { return nil }
        let header = bytes[1] & 0x7F == 126 ? 4 : bytes[1] & 0x7F == 127 ? 10 : 2
        return (bytes[0] & 0x0F, Array(bytes[header...]))
    }

    /// The next text message that is JSON with `type`, skipping others.
    func message(type: String, seconds: Double = 10, where accept: ([String: Any]) -> Bool = { _ in true }) -> [String: Any]? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard let frame = frame(seconds: deadline.timeIntervalSinceNow), frame.opcode == 1 else { continue }
            if let object = try? JSONSerialization.jsonObject(with: Data(frame.payload)) as? [String: Any],
               object["type"] as? String == type, accept(object) { return object }
        }
        return nil
    }
}

extension WebClient {
    /// Upgrades to a WebSocket on `target`; the 101 response.
    func upgrade(_ target: String, host: String = "127.0.0.1", origin: String? = nil) -> (status: Int, head: String, body: [UInt8])? {
        send(Array(("GET \(withToken(target)) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + (origin.map { "Origin: \($0)\r\n" } ?? "")
                    + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8))
        return response()
    }

    /// Sends a JSON text message, masked as a browser would.
    func say(_ json: String) {
        send(WebSocket.frame(.text, Array(json.utf8), mask: [0x11, 0x22, 0x33, 0x44]))
    }
}

/// A sync server on its own loop thread with a web view beside it, on free loopback ports.
final class WebFixture: @unchecked Sendable {  // the view is touched on the loop thread only
    let temp = TempDirectory()
    let server: ServerFixture
    let web: WebView
    var host: SyncHost { server.host }

    init(serverOptions: SyncHost.Options = SyncHost.Options(), webOptions: WebView.Options = WebView.Options()) throws {
        server = try ServerFixture(data: temp.path + "/data", options: serverOptions)
        let (host, data, loop) = (server.host, temp.path + "/data", server.thread.loop)
        web = try server.thread.onLoop { try WebView(listen: SocketAddress(host: "127.0.0.1", port: 0), host: host, dataDirectory: data, loop: loop, options: webOptions) }
    }

    /// A client that presents the view's run token (none with access control).
    func page() throws -> WebClient { try WebClient(web.listenAddress, token: web.runToken) }

    func stop() {
        let web = self.web
        _ = try? server.thread.onLoop { web.close() }
        server.stop()
    }
}

/// `serve --web`'s view over real TCP: pages, images by hash, the live WebSocket and presence.
@Suite(.serialized) struct WebViewTests {
    static func sticker(_ temp: TempDirectory, _ server: ServerFixture) throws -> (BoardPackage, ItemID) {
        var a = try makePackage(temp.path + "/A.boardpkg", id: 0xA)
        let sticker = try a.commit { try $0.addSticker(imagePNG: pngA, at: pt(40, 30)) }.item!
        try a.addAsset(pngA)
        try syncOnce(&a, board: "team", server: server.address, timeout: 20)
        return (a, sticker)
    }

    @Test func pagesImagesAndRefusals() throws {
        let fixture = try WebFixture()
        defer { fixture.stop() }
        let (temp, server) = (fixture.temp, fixture.server)
        let (a, _) = try Self.sticker(temp, server)
        defer { a.close() }
        let index = try #require(try fixture.page().get("/"))
        #expect(index.status == 200 && String(decoding: index.body, as: UTF8.self).contains("href=\"/b/team?token="))
        let page = try #require(try fixture.page().get("/b/team"))
        #expect(page.status == 200 && page.head.contains("text/html"))
        let html = String(decoding: page.body, as: UTF8.self)
        #expect(html.contains("<svg") && html.contains("new WebSocket"))
        // The page's script parses (node, when this machine has it).
        if let node = ["/usr/bin/node", "/usr/local/bin/node"].first(where: FileManager.default.isExecutableFile) {
            let script = try #require(html.components(separatedBy: "<script>").last?.components(separatedBy: "</script>").first)
            try script.write(toFile: temp.path + "/page.js", atomically: true, encoding: .utf8)
            let check = Process()
            check.executableURL = URL(fileURLWithPath: node)
            check.arguments = ["--check", temp.path + "/page.js"]
            try check.run()
            check.waitUntilExit()
            #expect(check.terminationStatus == 0, "the page's script does not parse")
        } else {
            print("WebViewTests: SKIPPED the page-script syntax check: no node on this machine")
        }
        let image = try #require(try fixture.page().get("/b/team/asset/\(AssetHash.of(pngA).hex)"))
        #expect(image.status == 200 && Data(image.body) == pngA)
        #expect(image.head.contains("immutable"))
        #expect(try fixture.page().get("/b/team/asset/\(AssetHash.of(pngB).hex)")?.status == 404)
        #expect(try fixture.page().get("/b/nosuch")?.status == 404, "no board is created by looking")
        #expect(!FileManager.default.fileExists(atPath: temp.path + "/data/nosuch.boardpkg"))
        #expect(try fixture.page().get("/b/..%2F..%2Fetc")?.status == 404)
        #expect(try fixture.page().get("/elsewhere")?.status == 404)
        let post = try fixture.page()
        post.send(Array("POST /b/team HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
        #expect(post.response()?.status == 405)
        let bad = try fixture.page()
        bad.send(Array("GET / HTTP/1.1\r\nHost : a\r\n\r\n".utf8))
        #expect(bad.response()?.status == 400)
    }

    @Test func aPageWatchesTheBoardChangeLiveAndItsPointerIsAPresence() throws {
        let fixture = try WebFixture()
        defer { fixture.stop() }
        let (temp, server, host) = (fixture.temp, fixture.server, fixture.host)
        let (a, sticker) = try Self.sticker(temp, server)
        defer { a.close() }
        let page = try fixture.page()
        let upgrade = try #require(page.upgrade("/ws/team"))
        #expect(upgrade.status == 101 && upgrade.head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
        let first = try #require(page.message(type: "board"))
        let items = try #require(first["items"] as? [[String: Any]])
        #expect(items.map { $0["id"] as? String } == [sticker.uuid.uuidString])
        #expect(items.first?["asset"] as? String == AssetHash.of(pngA).hex)
        #expect(items.first?["w"] as? Int == 6, "the image's own size, for drawing")
        // Another replica draws and syncs: the page gets the board again with the stroke.
        var b = try makePackage(temp.path + "/B.boardpkg", id: 0xB)
        defer { b.close() }
        let stroke = try b.commit { replica in
            let edit = try replica.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 1), width: 3, points: [pt(1, 1), pt(20, 25)])
            replica.finishStroke()
            return edit
        }.item!
        try syncOnce(&b, board: "team", server: server.address, timeout: 20)
        // Not the whole board again: the change, as the new item and the new paint order.
        let updated = try #require(page.message(type: "changes") { changes in
            ((changes["upserts"] as? [[String: Any]]) ?? []).contains { $0["id"] as? String == stroke.uuid.uuidString }
        })
        let upserts = try #require(updated["upserts"] as? [[String: Any]])
        #expect(upserts.count == 1, "only what changed")
        let line = try #require(upserts.first)
        #expect(line["points"] as? [Double] == [1, 1, 20, 25] && line["color"] as? String == "#0000ffff")
        #expect(updated["order"] as? [String] == [sticker.uuid.uuidString, stroke.uuid.uuidString])
        #expect((updated["removals"] as? [String])?.isEmpty == true)
        // The page's pointer becomes a presence on the board (peers see it through the hub).
        let mask: [UInt8] = [9, 8, 7, 6]
        page.send(WebSocket.frame(.text, Array("{\"type\":\"pointer\",\"x\":12.5,\"y\":7}".utf8), mask: mask))
        #expect(try server.thread.wait {
            host.endpoint.boards["team"]?.hub.presences.values.contains { $0.presence.name == "web 1" && $0.presence.pointer == GridPoint(x: 200, y: 112) } ?? false
        })
        // A ping is answered; a close is answered and the page's presence goes.
        page.send(WebSocket.frame(.ping, [1, 2, 3], mask: mask))
        #expect(page.frame()?.opcode == 0xA)
        page.send(WebSocket.frame(.close, [0x03, 0xE8], mask: mask))
        #expect(page.frame()?.opcode == 0x8)
        #expect(try server.thread.wait {
            !(host.endpoint.boards["team"]?.hub.presences.values.contains { $0.presence.name == "web 1" } ?? true)
        })
    }

    /// A page edits as its own replica: a stroke, a sticker from a PNG, a drag that is one undo
    /// step, a delete; the server's board (and so every peer) has them.
    @Test func aPageEditsAsItsOwnReplica() throws {
        let fixture = try WebFixture()
        defer { fixture.stop() }
        let (temp, server, host) = (fixture.temp, fixture.server, fixture.host)
        let (a, sticker) = try Self.sticker(temp, server)
        defer { a.close() }
        let page = try fixture.page()
        #expect(page.upgrade("/ws/team")?.status == 101)
        let welcome = try #require(page.message(type: "welcome"))
        #expect(welcome["canEdit"] as? Bool == true)
        func serverReplica() throws -> Replica { try server.thread.onLoop { host.endpoint.boards["team"]!.store.replica } }
        func waitFor(_ condition: @escaping (Replica) -> Bool) throws -> Bool {
            try server.thread.wait { host.endpoint.boards["team"].map { condition($0.store.replica) } ?? false }
        }
        page.say("{\"type\":\"stroke\",\"points\":[1,2,30,40,55.5,60],\"color\":\"#ff000080\",\"width\":5}")
        #expect(try waitFor { $0.snapshot().strokes.count == 1 })
        let stroke = try #require(try serverReplica().snapshot().strokes.first)
        #expect(stroke.points == [pt(1, 2), pt(30, 40), pt(55.5, 60)] && stroke.width == 5)
        let author = ItemID(uuid: stroke.id).high
        let serverID = try serverReplica().id.rawValue
        #expect(author != 0xA && author != serverID, "made by the page's own replica")
        // The page hears of the stroke (updates are coalesced: a stroke deleted before the
        // board's next render would never show).
        #expect(page.message(type: "changes") { changes in
            ((changes["upserts"] as? [[String: Any]]) ?? []).contains { $0["id"] as? String == stroke.id.uuidString }
        } != nil, "the stroke is an upsert")
        // A sticker from a PNG the page sends; its image reaches the server.
        page.say("{\"type\":\"sticker\",\"png\":\"\(pngB.base64EncodedString())\",\"x\":100,\"y\":80}")
        #expect(try waitFor { replica in replica.snapshot().stickers.contains { $0.imagePNG == pngB } })
        // A drag is one undo step: undo puts the sticker back where it was.
        for message in ["{\"type\":\"begin-group\"}",
                        "{\"type\":\"move\",\"id\":\"\(sticker.uuid.uuidString)\",\"x\":50,\"y\":50}",
                        "{\"type\":\"move\",\"id\":\"\(sticker.uuid.uuidString)\",\"x\":70,\"y\":65}",
                        "{\"type\":\"end-group\"}"] { page.say(message) }
        #expect(try waitFor { $0.sticker(sticker)?.position == pt(70, 65) })
        page.say("{\"type\":\"undo\"}")
        #expect(try waitFor { $0.sticker(sticker)?.position == pt(40, 30) })
        page.say("{\"type\":\"transform\",\"id\":\"\(sticker.uuid.uuidString)\",\"scale\":2,\"rotation\":0.5}")
        #expect(try waitFor { $0.sticker(sticker)?.scale == 2 && $0.sticker(sticker)?.rotation == 0.5 })
        page.say("{\"type\":\"delete\",\"id\":\"\(stroke.id.uuidString)\"}")
        #expect(try waitFor { $0.snapshot().strokes.isEmpty })
        // The page hears the board as it is now, and refusals by name.
        #expect(page.message(type: "changes") { ($0["removals"] as? [String]) == [stroke.id.uuidString] } != nil, "a delete is a removal")
        page.say("{\"type\":\"fly\"}")
        #expect((page.message(type: "error")?["message"] as? String)?.contains("unknown message type") == true)
        page.say("{\"type\":\"sticker\",\"png\":\"bm90IGEgcG5n\",\"x\":1,\"y\":1}")
        #expect((page.message(type: "error")?["message"] as? String)?.contains("not a PNG") == true)
    }

    /// Pages edit under a replica id that is never announced before its first operation is on
    /// the board: not their presence's (a writer reading presences cannot claim it first), and
    /// one per token subject and board for the server's run (pages cannot mint ids without end).
    @Test func pagesEditUnderAnIdNeverAnnouncedOnePerSubject() throws {
        let fixture = try WebFixture()
        defer { fixture.stop() }
        let (temp, server, host) = (fixture.temp, fixture.server, fixture.host)
        let (a, _) = try Self.sticker(temp, server)
        defer { a.close() }
        let pages = try [fixture.page(), fixture.page()]
        for page in pages { #expect(page.upgrade("/ws/team")?.status == 101) }
        for (index, page) in pages.enumerated() {
            page.say("{\"type\":\"pointer\",\"x\":\(index),\"y\":1}")
            page.say("{\"type\":\"stroke\",\"points\":[\(index),2,30,40],\"width\":2}")
        }
        #expect(try server.thread.wait { (host.endpoint.boards["team"]?.store.replica.snapshot().strokes.count ?? 0) == 2 })
        let (authors, presences) = try server.thread.onLoop { () -> (Set<UInt64>, Set<ReplicaID>) in
            let board = host.endpoint.boards["team"]!
            let strokes = board.store.replica.snapshot().strokes
            return (Set(strokes.map { ItemID(uuid: $0.id).high }), Set(board.hub.presences.values.map(\.presence.replica)))
        }
        #expect(authors.count == 1, "both pages (one subject: the run token's) edit under one id")
        #expect(presences.count == 2, "each page has a presence of its own")
        #expect(presences.allSatisfy { !authors.contains($0.rawValue) }, "the edits' id is no presence's")
    }

    /// A board deleted while pages show it (the admin API, forced): its pages are closed with
    /// 1001 and a reason naming the board.
    @Test func pagesOfADeletedBoardAreClosedSayingSo() throws {
        let fixture = try WebFixture()
        defer { fixture.stop() }
        let (temp, server, host) = (fixture.temp, fixture.server, fixture.host)
        let (a, _) = try Self.sticker(temp, server)
        defer { a.close() }
        let page = try fixture.page()
        #expect(page.upgrade("/ws/team")?.status == 101)
        #expect(page.message(type: "board") != nil)
        let removal = try server.thread.onLoop { host.deleteOpenBoard("team", force: true) }
        guard case .ended = removal else { Issue.record("not deleted: \(removal)"); return }
        var close: (opcode: UInt8, payload: [UInt8])?
        for _ in 0..<50 {
            guard let frame = page.frame(seconds: 5) else { break }
            if frame.opcode == 8 { close = frame; break }
        }
        let payload = try #require(close?.payload, "a close frame")
        #expect(payload.count >= 2 && UInt16(payload[0]) << 8 | UInt16(payload[1]) == 1001)
        #expect(String(decoding: payload.dropFirst(2), as: UTF8.self).contains("board 'team' was deleted"))
    }

    @Test func aConnectionThatNeverSendsARequestIsClosed() throws {
        var options = WebView.Options()
        options.requestTimeout = 0.3
        let fixture = try WebFixture(webOptions: options)
        defer { fixture.stop() }
        let idle = try fixture.page()
        idle.send(Array("GET / HT".utf8))  // a trickle that never completes
        let answer = try #require(idle.response(seconds: 5))
        #expect(answer.status == 408)
        // A page that upgraded in time stays open past the timeout.
        let (a, _) = try Self.sticker(fixture.temp, fixture.server)
        defer { a.close() }
        let page = try fixture.page()
        #expect(page.upgrade("/ws/team")?.status == 101)
        usleep(600_000)
        page.send(WebSocket.frame(.ping, [7], mask: [1, 2, 3, 4]))
        var opcodes: [UInt8] = []
        while let frame = page.frame(seconds: 2) {
            opcodes.append(frame.opcode)
            if frame.opcode == 0xA { break }
        }
        #expect(opcodes.last == 0xA, "welcome and board (text), then the pong: \(opcodes)")
    }

    @Test func withTokensAPageNeedsOneForItsBoard() throws {
        let authority = try TokenAuthority(secret: Array("0123456789abcdef0123456789abcdef".utf8))
        var options = SyncHost.Options()
        options.access = SyncEndpoint.AccessControl(authority: authority, wallClock: { Date().timeIntervalSince1970 })
        var webOptions = WebView.Options()
        webOptions.access = options.access
        let fixture = try WebFixture(serverOptions: options, webOptions: webOptions)
        defer { fixture.stop() }
        let (temp, server, host, web) = (fixture.temp, fixture.server, fixture.host, fixture.web)
        var a = try makePackage(temp.path + "/A.boardpkg", id: 0xA)
        defer { a.close() }
        try a.commit { try $0.setCanvasSize(CodableSize(width: 300, height: 200)) }
        let writer = try authority.mint(board: "team", role: .write, expires: nil, subject: "ann")
        try syncOnce(&a, board: "team", server: server.address, timeout: 20, token: writer)
        let reader = try authority.mint(board: "team", role: .read, expires: nil, subject: "rob")
        let other = try authority.mint(board: "notes", role: .read, expires: nil, subject: "rob")
        #expect(try WebClient(web.listenAddress).get("/b/team")?.status == 401)
        #expect(try WebClient(web.listenAddress).get("/b/team?token=\(other)")?.status == 401)
        #expect(try WebClient(web.listenAddress).get("/b/nosuch")?.status == 401, "the same answer whether or not the board exists")
        #expect(try WebClient(web.listenAddress).get("/b/team?token=\(reader)")?.status == 200)
        // A read token's page may watch but not edit; a write token's page edits.
        let watcher = try WebClient(web.listenAddress)
        #expect(watcher.upgrade("/ws/team?token=\(reader)")?.status == 101)
        #expect(watcher.message(type: "welcome")?["canEdit"] as? Bool == false)
        watcher.say("{\"type\":\"stroke\",\"points\":[1,1,2,2]}")
        #expect((watcher.message(type: "error")?["message"] as? String)?.contains("may only read") == true)
        let editor = try WebClient(web.listenAddress)
        #expect(editor.upgrade("/ws/team?token=\(writer)")?.status == 101)
        #expect(editor.message(type: "welcome")?["canEdit"] as? Bool == true)
        editor.say("{\"type\":\"stroke\",\"points\":[1,1,2,2]}")
        #expect(try server.thread.wait { host.endpoint.boards["team"]?.store.replica.snapshot().strokes.count == 1 })
        let index = try #require(try WebClient(web.listenAddress).get("/"))
        #expect(!String(decoding: index.body, as: UTF8.self).contains("team"), "with tokens, board names are not listed")
    }
}
