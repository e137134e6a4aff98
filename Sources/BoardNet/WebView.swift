import BoardCRDT
import BoardModel
import BoardSync
import Foundation

/// `serve --web`: a server's boards in a web browser, live and editable, on its own
/// address. `GET /` lists the boards, `GET /b/NAME` is the board page (one embedded HTML file:
/// no build step, no CDN), `GET /b/NAME/asset/HASH` serves an image by content hash (cached for
/// a year), and `GET /ws/NAME` upgrades to a WebSocket that sends the board as JSON on join and
/// again as it changes (at most ten times a second), plus the presence of everyone on it. A
/// page's pointer becomes a presence others see (peers and other pages). With access control a
/// token for the board is needed (`?token=`); the page passes its own on.
///
/// Editing: a page that edits gets its own replica (a fresh replica id, its own undo history),
/// a live peer of this server over loopback TCP presenting the page's token, so a read token
/// gives a page whose edits the server refuses, and authorship, limits and conflicts follow the
/// same rules as for any peer. Its edits reach every other page and peer through the hub.
public final class WebView {
    public struct Options {
        /// Tokens, as the sync server checks them (nil: open, for loopback development).
        public var access: SyncEndpoint.AccessControl?
        public var log: (String) -> Void = { _ in }
        public var limits = HTTPLimits()
        /// Largest message a page may send (a sticker's PNG travels in one, base64).
        public var maxMessage = 8 << 20
        /// Pages connected at once.
        public var maxPages = 256
        /// Seconds a connection has to send a whole request (a connection that sends nothing,
        /// or a trickle, must not hold one of the `maxPages` places).
        public var requestTimeout: Double = 10

        public init() {}
    }

    public let listenAddress: SocketAddress
    private let host: SyncHost
    private let dataDirectory: String
    private let options: Options
    private let loop: EventLoop
    private let listener: TCPListener
    private var clients: [ObjectIdentifier: Client] = [:]
    /// Boards with a page waiting for its next update (sent at most every 0.1 s).
    private var dirty: Set<String> = []
    private var flushScheduled = false
    private var nextTab: UInt64 = 1

    private final class Client {
        let connection: TCPConnection
        var parser: HTTPRequestParser
        var socket: WebSocketConnection?
        var board: String?
        /// The replica id this page's presence is announced under (and its edits made as).
        var tab = ReplicaID(0)
        var name = ""
        /// The token the page presented (passed on by its replica's connection).
        var token: [UInt8] = []
        /// Whether the token allows editing (no access control, or a write/peer token).
        var canEdit = true
        /// The page's own replica, a live peer of this server (made at its first edit).
        var editor: SyncHost?
        /// The board as this page last got it (the next message is what changed since).
        var sent: WebPage.Rendered?

        init(_ connection: TCPConnection, limits: HTTPLimits) {
            self.connection = connection
            parser = HTTPRequestParser(limits: limits)
        }
    }

    public init(listen: SocketAddress, host: SyncHost, dataDirectory: String, loop: EventLoop, options: Options = Options()) throws {
        self.host = host
        self.dataDirectory = dataDirectory
        self.options = options
        self.loop = loop
        listener = try TCPListener(address: listen, on: loop)
        listenAddress = listener.address
        listener.onAccept = { [weak self] connection in self?.accepted(connection) }
        let previousChange = host.endpoint.onBoardChange
        host.endpoint.onBoardChange = { [weak self] board in
            previousChange?(board)
            self?.changed(board)
        }
        let previousPresence = host.onPresence
        host.onPresence = { [weak self] board, presence in
            previousPresence?(board, presence)
            self?.relay(presence, on: board)
        }
    }

    public func close() {
        listener.close()
        for client in clients.values { client.connection.close() }
    }

    // MARK: Connections

    private func accepted(_ connection: TCPConnection) {
        guard clients.count < options.maxPages else {
            _ = connection.send(HTTPResponse.error(HTTPError(503, "too many pages are open; try again later")).encoded())
            connection.close()
            return
        }
        let client = Client(connection, limits: options.limits)
        let key = ObjectIdentifier(client)
        clients[key] = client
        connection.onData = { [weak self, weak client] bytes in
            guard let self, let client else { return }
            self.received(bytes, from: client)
        }
        connection.onClose = { [weak self, weak client] _ in
            guard let self, let client else { return }
            self.disconnected(client)
        }
        loop.schedule(after: options.requestTimeout) { [weak self, weak client] in
            guard let self, let client, self.clients[ObjectIdentifier(client)] != nil, client.socket == nil else { return }
            self.options.log("web: closed \(client.connection.remote): no whole request within \(self.options.requestTimeout) s")
            self.finish(client, HTTPResponse.error(HTTPError(408, "no whole request within \(Int(self.options.requestTimeout)) s")))
        }
    }

    private func disconnected(_ client: Client) {
        clients[ObjectIdentifier(client)] = nil
        client.editor?.shutdown(save: false)
        client.editor = nil
        if let board = client.board {
            let gone = Presence.gone(client.tab, clock: 0)  // the endpoint stamps its next clock
            host.setPresence(gone, on: board)
            relay(gone, on: board)
            host.endpoint.removeViewer(board: board, now: EventLoop.now())
        }
    }

    private func received(_ bytes: [UInt8], from client: Client) {
        if client.socket != nil {
            handleSocket(bytes, from: client)
            return
        }
        do {
            guard let request = try client.parser.append(bytes) else { return }
            respond(to: request, client: client)
        } catch {
            options.log("web: refused a request from \(client.connection.remote): \(error)")
            finish(client, HTTPResponse.error(error))
        }
    }

    private func finish(_ client: Client, _ response: HTTPResponse) {
        _ = client.connection.send(response.encoded())
        client.connection.close()
    }

    // MARK: Routes

    private func respond(to request: HTTPRequest, client: Client) {
        guard request.method == "GET" || request.method == "HEAD" else {
            return finish(client, HTTPResponse.error(HTTPError(405, "only GET is served")))
        }
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // "/" → ["", ""]; "/b/x" → ["", "b", "x"]
        switch (parts.count, parts.count > 1 ? parts[1] : "") {
        case (2, ""):
            finish(client, page(WebPage.index(boards: boardNames()), type: "text/html; charset=utf-8"))
        case (3, "b"):
            guard let board = viewable(parts[2], request, client) else { return }
            finish(client, page(WebPage.board(name: board), type: "text/html; charset=utf-8"))
        case (5, "b") where parts[3] == "asset":
            guard let board = viewable(parts[2], request, client) else { return }
            guard let hash = AssetHash(hex: parts[4]), host.endpoint.addViewer(board: board, now: EventLoop.now()) else {
                return finish(client, HTTPResponse.error(HTTPError(404, "no such image")))
            }
            defer { host.endpoint.removeViewer(board: board, now: EventLoop.now()) }
            guard let data = host.endpoint.boards[board]?.store.replica.assets.data(for: hash) else {
                return finish(client, HTTPResponse.error(HTTPError(404, "this board holds no image \(hash.hex.prefix(12))")))
            }
            finish(client, HTTPResponse(status: 200, headers: [("Content-Type", "image/png"), ("Cache-Control", "public, max-age=31536000, immutable"),
                                                                ("Connection", "close")], body: Array(data)))
        case (3, "ws"):
            guard let board = viewable(parts[2], request, client) else { return }
            upgrade(client, request, board: board)
        default:
            finish(client, HTTPResponse.error(HTTPError(404, "nothing at \(request.path.prefix(80))")))
        }
    }

    private func page(_ html: String, type: String) -> HTTPResponse {
        HTTPResponse(status: 200, headers: [("Content-Type", type), ("Cache-Control", "no-cache"), ("Connection", "close"),
                                            ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'")],
                     body: Array(html.utf8))
    }

    /// The board a request names, when it exists and the request may see it; otherwise the
    /// client got its answer (404 for names that are not boards, 401 without a valid token:
    /// the same answer whether or not the board exists).
    private func viewable(_ raw: String, _ request: HTTPRequest, _ client: Client) -> String? {
        let name = raw.removingPercentEncoding ?? raw
        if let access = options.access {
            let token = Array((request.query["token"] ?? "").utf8)
            guard case .success(let grant) = access.authority.verify(token, board: name, now: access.wallClock()) else {
                finish(client, HTTPResponse.error(HTTPError(401, "access denied: this page needs a valid token for the board (?token=...)")))
                return nil
            }
            client.token = token
            client.canEdit = grant.role != .read
        }
        guard Hello.isValidBoardName(name), FileManager.default.fileExists(atPath: dataDirectory + "/" + name + ".boardpkg") else {
            finish(client, HTTPResponse.error(HTTPError(404, "no board named '\(name.prefix(60))'")))
            return nil
        }
        return name
    }

    private func boardNames() -> [String] {
        guard options.access == nil else { return [] }  // with tokens, names are not listed
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dataDirectory)) ?? []
        return names.filter { $0.hasSuffix(".boardpkg") }.map { String($0.dropLast(".boardpkg".count)) }
            .filter(Hello.isValidBoardName).sorted()
    }

    // MARK: WebSocket

    private func upgrade(_ client: Client, _ request: HTTPRequest, board: String) {
        switch WebSocket.handshake(request) {
        case .failure(let error):
            var response = HTTPResponse.error(error)
            if error.status == 426 { response.headers.append(("Sec-WebSocket-Version", "13")) }
            finish(client, response)
        case .success(let response):
            guard host.endpoint.addViewer(board: board, now: EventLoop.now()) else {
                return finish(client, HTTPResponse.error(HTTPError(503, "the board cannot be opened now")))
            }
            _ = client.connection.send(response.encoded())
            client.socket = WebSocketConnection(maxMessage: options.maxMessage)
            client.board = board
            // A fresh replica id per page: its edits are its own replica's (its own undo history).
            client.tab = ReplicaID(UInt64.random(in: 1...UInt64.max))
            client.name = "web \(nextTab)"
            nextTab += 1
            options.log("web: page \(client.connection.remote) watches board '\(board)'")
            if var socket = client.socket {
                socket.send(text: "{\"type\":\"welcome\",\"canEdit\":\(client.canEdit),\"name\":\(WebPage.json(client.name))}")
                client.socket = socket
            }
            sendBoard(to: client)
            for presence in host.presences(on: board) { sendPresence(presence, to: client) }
            let leftover = client.parser.takeRemaining()
            if !leftover.isEmpty { handleSocket(leftover, from: client) }
        }
    }

    private func handleSocket(_ bytes: [UInt8], from client: Client) {
        guard var socket = client.socket else { return }
        let events = socket.receive(bytes)
        client.socket = socket
        for event in events {
            switch event {
            case .text(let text):
                pageSaid(text, client)
            case .binary:
                break
            case .closed, .failed:
                break
            }
        }
        flushSocket(client)
        if socket.isClosed { client.connection.close() }
    }

    /// `[x, y, x, y, ...]` from a page's JSON as board points (at most `limit` of them, the last).
    private static func points(_ value: Any?, limit: Int) -> [CodablePoint] {
        let flat = ((value as? [NSNumber]) ?? []).suffix(2 * limit).map(\.doubleValue)
        return stride(from: 0, to: flat.count - 1, by: 2).map { CodablePoint(x: flat[$0], y: flat[$0 + 1]) }
    }

    /// What a page sends: `{"type":"pointer","x":..,"y":..}` (board points, with the ink it is
    /// drawing), or an edit (`edit(_:_:_:board:)`; docs/PROTOCOL.md has the list).
    private func pageSaid(_ text: String, _ client: Client) {
        guard let board = client.board,
              let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let type = object["type"] as? String else { return }
        switch type {
        case "pointer":
            guard let x = object["x"] as? Double, let y = object["y"] as? Double,
                  let point = GridPoint(CodablePoint(x: x, y: y)) else { return }
            if let name = object["name"] as? String, !name.isEmpty { client.name = Presence.clipped(name) }
            // Ink being drawn travels with the pointer, so others see it before the stroke lands.
            let color = (object["color"] as? String).flatMap(Color8.init(hex:)) ?? Color8(red: 120, green: 60, blue: 200, alpha: 255)
            let ink = Self.points(object["ink"], limit: Presence.maxStrokePoints).compactMap(GridPoint.init)
            let width = FixedPoint.units((object["width"] as? NSNumber)?.doubleValue ?? 3) ?? 48
            let presence = Presence(replica: client.tab, name: client.name, color: color, pointer: point,
                                    stroke: ink.isEmpty ? nil : InkPreview(color: color, width: max(0, width), points: ink),
                                    ttl: Presence.defaultTTL)
            host.setPresence(presence, on: board)
            relay(presence, on: board)  // other pages (the hub tells only peers about its own)
        default:
            edit(type, object, client, board: board)
        }
    }

    /// The page's edits, made by its own replica (see the type's comment).
    private func edit(_ type: String, _ object: [String: Any], _ client: Client, board: String) {
        guard client.canEdit else { return refuse(client, "this page's token may only read board '\(board)'") }
        func item() -> ItemID? { (object["id"] as? String).flatMap(ItemID.init(uuidString:)) }
        func number(_ key: String) -> Double? { (object[key] as? NSNumber)?.doubleValue }
        func point(_ x: String = "x", _ y: String = "y") -> CodablePoint? {
            guard let x = number(x), let y = number(y) else { return nil }
            return CodablePoint(x: x, y: y)
        }
        let body: ((inout Replica) throws -> LocalEdit)?
        switch type {
        case "stroke":
            let points = Self.points(object["points"], limit: 20_001)
            let color = (object["color"] as? String).flatMap(Color8.init(hex:))?.rgba ?? RGBAColor(red: 0, green: 0, blue: 0)
            let width = number("width") ?? 3
            guard !points.isEmpty, points.count <= 20_000 else { return refuse(client, "a stroke needs 1 to 20,000 points") }
            body = { replica in
                let edit = try replica.beginStroke(color: color, width: width, points: points)
                if let stroke = edit.item { replica.finishStroke(stroke) }
                return edit
            }
        case "sticker":
            guard let text = object["png"] as? String, let png = Data(base64Encoded: text), let at = point() else {
                return refuse(client, "a sticker needs png (base64) and x, y")
            }
            guard (try? PNGHeader(validating: png)) != nil else { return refuse(client, "that file is not a PNG image") }
            body = { try $0.addSticker(imagePNG: png, at: at, scale: self.numberOrOne(object["scale"])) }
        case "move":
            guard let id = item(), let to = point() else { return refuse(client, "move needs id, x and y") }
            body = { try $0.move(id, to: to) }
        case "transform":
            guard let id = item() else { return refuse(client, "transform needs id") }
            body = { try $0.transform(id, scale: number("scale"), rotation: number("rotation")) }
        case "delete":
            guard let id = item() else { return refuse(client, "delete needs id") }
            body = { try $0.delete(id) }
        case "front", "back":
            guard let id = item() else { return refuse(client, "\(type) needs id") }
            body = { type == "front" ? try $0.bringToFront(id) : try $0.sendToBack(id) }
        case "undo": body = { try $0.undo() }
        case "redo": body = { try $0.redo() }
        case "begin-group": body = { $0.beginUndoGroup(); return LocalEdit() }
        case "end-group": body = { $0.endUndoGroup(); return LocalEdit() }
        default:
            body = nil
        }
        guard let body else { return refuse(client, "unknown message type '\(type.prefix(40))'") }
        do {
            let editor = try editorHost(for: client, board: board)
            _ = try editor.edit(board, body)
        } catch {
            refuse(client, "\(error)")
        }
    }

    private func numberOrOne(_ value: Any?) -> Double { (value as? NSNumber)?.doubleValue ?? 1 }

    private func refuse(_ client: Client, _ why: String) {
        guard var socket = client.socket else { return }
        socket.send(text: "{\"type\":\"error\",\"message\":\(WebPage.json(why))}")
        client.socket = socket
        flushSocket(client)
    }

    /// The page's replica: made at its first edit, holding the board (it syncs the whole board
    /// from the server first, as any new peer does) and speaking for the page from then on.
    private func editorHost(for client: Client, board: String) throws -> SyncHost {
        if let editor = client.editor { return editor }
        guard let address = host.listenAddress else { throw HTTPError(503, "the sync server has no address to connect to") }
        var options = SyncHost.Options()
        options.credentials = client.token
        let log = self.options.log
        let name = client.name
        options.log = { line in log("web page \(name): \(line)") }
        options.reconnectDelay = (0.05, 1)
        let replica = Replica(id: client.tab)
        // The board's current state, so the first edit already sees every item.
        var seeded = replica
        if let current = host.endpoint.boards[board]?.store.replica {
            try seeded.apply(current.fullState())
            seeded.assets = current.assets
        }
        let editor = try SyncHost(board: board, store: MemoryReplicaStore(replica: seeded), listen: nil, loop: loop, options: options)
        editor.connect(to: address)
        client.editor = editor
        return editor
    }

    private func flushSocket(_ client: Client) {
        guard var socket = client.socket else { return }
        let output = socket.takeOutput()
        client.socket = socket
        if !output.isEmpty { _ = client.connection.send(output) }
    }

    /// When pages were last sent the boards (updates go at once, then at most every 0.1 s).
    private var lastSent = -Double.infinity

    private func changed(_ board: String) {
        guard clients.values.contains(where: { $0.board == board }) else { return }
        dirty.insert(board)
        guard !flushScheduled else { return }
        flushScheduled = true
        // The first change goes out on the next loop turn (coalescing what that turn merges);
        // changes right after it wait out the rest of 0.1 s, so a busy board costs at most ten
        // whole-board messages a second per page.
        let wait = max(0, lastSent + 0.1 - EventLoop.now())
        loop.schedule(after: wait) { [weak self] in
            guard let self else { return }
            self.flushScheduled = false
            self.lastSent = EventLoop.now()
            let boards = self.dirty
            self.dirty = []
            // Rendered once per board, then diffed per page.
            var rendered: [String: WebPage.Rendered] = [:]
            for client in self.clients.values {
                guard let board = client.board, boards.contains(board) else { continue }
                if rendered[board] == nil, let replica = self.host.endpoint.boards[board]?.store.replica {
                    rendered[board] = WebPage.render(replica.snapshot())
                }
                if let now = rendered[board] { self.sendBoard(now, to: client) }
            }
        }
    }

    /// The whole board on join, then what changed since the page's last message: items
    /// upserted and removed, and the paint order when it moved.
    private func sendBoard(to client: Client) {
        guard let board = client.board, let replica = host.endpoint.boards[board]?.store.replica else { return }
        sendBoard(WebPage.render(replica.snapshot()), to: client)
    }

    private func sendBoard(_ rendered: WebPage.Rendered, to client: Client) {
        guard var socket = client.socket else { return }
        // A page that does not read gets nothing more queued past 8 MiB; it gets the whole board
        // once it reads again (its next update is measured against nothing).
        guard client.connection.queuedBytes < 8 << 20 else {
            client.sent = nil
            return
        }
        let message = client.sent.map { rendered.changes(since: $0) } ?? rendered.json
        client.sent = rendered
        guard let message else { return }
        socket.send(text: message)
        client.socket = socket
        flushSocket(client)
    }

    private func relay(_ presence: Presence, on board: String) {
        for client in clients.values where client.board == board && client.tab != presence.replica {
            sendPresence(presence, to: client)
        }
    }

    private func sendPresence(_ presence: Presence, to client: Client) {
        guard var socket = client.socket else { return }
        socket.send(text: WebPage.presenceJSON(presence))
        client.socket = socket
        flushSocket(client)
    }
}
