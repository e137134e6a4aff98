import BoardCRDT
import BoardModel
import BoardSync
import Foundation

/// The live page: the WebSocket, what a page says, its edits, presence and board updates.
extension WebView {
    func upgrade(_ client: Client, _ request: HTTPRequest, board: String) {
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
            // A page that only reads sends nothing but pongs and its close: its messages are
            // refused at a few bytes, before anything is parsed.
            client.socket = WebSocketConnection(maxMessage: client.canEdit ? options.maxMessage : options.maxReaderMessage)
            client.board = board
            // A fresh replica id per page: its edits are its own replica's (its own undo history).
            client.tab = ReplicaID(UInt64.random(in: 1...UInt64.max))
            client.name = "web \(nextTab)"
            nextTab += 1
            options.log("web: page \(client.connection.remote) \(client.canEdit ? "edits" : "watches") board '\(board)'")
            if var socket = client.socket {
                socket.send(text: "{\"type\":\"welcome\",\"canEdit\":\(client.canEdit),\"name\":\(WebPage.json(client.name))}")
                client.socket = socket
            }
            // Everyone already here: peers' presences and other pages'.
            for presence in host.presences(on: board) { sendPresence(presence, to: client) }
            for (_, presence) in (pagePresences[board] ?? [:]).sorted(by: { $0.key < $1.key }) { sendPresence(presence, to: client) }
            client.seq = nil
            requestRender(board)
            let leftover = client.parser.takeRemaining()
            if !leftover.isEmpty { handleSocket(leftover, from: client) }
        }
    }

    func handleSocket(_ bytes: [UInt8], from client: Client) {
        guard var socket = client.socket else { return }
        let events = socket.receive(bytes)
        client.socket = socket
        for event in events {
            guard case .text(let text) = event else { continue }
            // Messages per second, before any is parsed: a page cannot make the loop parse
            // without end.
            let now = EventLoop.now()
            let rate = options.maxMessagesPerSecond
            client.bucket.tokens = min(2 * rate, client.bucket.tokens + rate * max(0, now - client.bucket.at))
            client.bucket.at = now
            guard client.bucket.tokens >= 1 else {
                options.log("web: closed page \(client.connection.remote): more than \(Int(rate)) messages a second")
                closeSocket(client, .policyViolation, "more than \(Int(rate)) messages a second")
                return
            }
            client.bucket.tokens -= 1
            pageSaid(text, client)
            if client.socket?.closeSent ?? true { break }
        }
        flushSocket(client)
        if client.socket?.isClosed ?? true { client.connection.close() }
    }

    func closeSocket(_ client: Client, _ code: WebSocket.CloseCode, _ reason: String) {
        guard var socket = client.socket else { return client.connection.close() }
        socket.close(code, reason: reason)
        client.socket = socket
        flushSocket(client)
        client.connection.close()
    }

    /// `[x, y, x, y, ...]` from a page's JSON as board points (at most `limit` of them, the last).
    private static func points(_ value: Any?, limit: Int) -> [CodablePoint] {
        let flat = ((value as? [NSNumber]) ?? []).suffix(2 * limit).map(\.doubleValue)
        return stride(from: 0, to: flat.count - 1, by: 2).map { CodablePoint(x: flat[$0], y: flat[$0 + 1]) }
    }

    /// What a page sends: `{"type":"pointer","x":..,"y":..}` (board points, with the ink it is
    /// drawing), or an edit (`edit(_:_:_:board:)`; docs/PROTOCOL.md has the list). A page that
    /// only reads sends nothing that is taken: its messages are refused unread.
    private func pageSaid(_ text: String, _ client: Client) {
        guard let board = client.board else { return }
        guard client.canEdit else {
            return refuse(client, "this page's token may only read board '\(board)'")
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
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
            queuePresence(presence, from: client, on: board)
        default:
            edit(type, object, client, board: board)
        }
    }

    /// A page's presence goes out at most every `presenceInterval` (the latest wins), to peers
    /// through the hub and to the other pages.
    private func queuePresence(_ presence: Presence, from client: Client, on board: String) {
        client.pendingPresence = presence
        guard !client.presenceScheduled else { return }
        let wait = max(0, client.presenceSent + options.presenceInterval - EventLoop.now())
        if wait == 0 { return sendPending(client) }
        client.presenceScheduled = true
        loop.schedule(after: wait) { [weak self, weak client] in
            guard let self, let client else { return }
            client.presenceScheduled = false
            self.sendPending(client)
        }
    }

    private func sendPending(_ client: Client) {
        guard let presence = client.pendingPresence, let board = client.board, clients[ObjectIdentifier(client)] != nil else { return }
        client.pendingPresence = nil
        client.presenceSent = EventLoop.now()
        pagePresences[board, default: [:]][client.tab] = presence
        host.setPresence(presence, on: board)
        relay(presence, on: board)  // other pages (the hub tells only peers about its own)
    }

    /// The page's edits, made by its own replica (see the type's comment).
    private func edit(_ type: String, _ object: [String: Any], _ client: Client, board: String) {
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
            guard let header = try? PNGHeader(validating: png) else { return refuse(client, "that file is not a PNG image") }
            guard header.width <= options.maxImageSide, header.height <= options.maxImageSide else {
                return refuse(client, "that image is \(header.width)x\(header.height) pixels; stickers are at most \(options.maxImageSide) on a side")
            }
            let scale = (object["scale"] as? NSNumber)?.doubleValue ?? 1
            body = { try $0.addSticker(imagePNG: png, at: at, scale: scale) }
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
        } catch let error as EditError {
            refuse(client, error.description)
        } catch {
            // What went wrong on the server (a path, a disk) is for its log, not for the page.
            options.log("web: page \(client.connection.remote) on board '\(board)': edit failed: \(error)")
            refuse(client, "the server could not make this edit (its log says why)")
        }
    }

    private func refuse(_ client: Client, _ why: String) {
        guard var socket = client.socket else { return }
        socket.send(text: "{\"type\":\"error\",\"message\":\(WebPage.json(why))}")
        client.socket = socket
        flushSocket(client)
    }

    /// The page's replica: made at its first edit, holding the board (it syncs the whole board
    /// from the server first, as any new peer does) and joined to the server in-process.
    private func editorHost(for client: Client, board: String) throws -> SyncHost {
        if let editor = client.editor { return editor }
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
        editor.connectLocally(to: host)
        client.editor = editor
        return editor
    }

    func flushSocket(_ client: Client) {
        guard var socket = client.socket else { return }
        let output = socket.takeOutput()
        client.socket = socket
        if !output.isEmpty { _ = client.connection.send(output) }
    }

    // MARK: Board updates

    func changed(_ board: String) {
        guard clients.values.contains(where: { $0.board == board }) else { return }
        renders[board, default: RenderState()].dirty = true
        requestRender(board)
    }

    /// Renders a board off the loop, at most every 0.1 s and one render at a time: the first
    /// change goes out at once, changes meanwhile are coalesced into the next render.
    func requestRender(_ board: String) {
        var state = renders[board, default: RenderState()]
        state.dirty = true
        guard !state.inFlight, !state.scheduled else { renders[board] = state; return }
        let wait = max(0, state.lastStart + 0.1 - EventLoop.now())
        state.scheduled = true
        renders[board] = state
        loop.schedule(after: wait) { [weak self] in self?.startRender(board) }
    }

    private func startRender(_ board: String) {
        guard var state = renders[board] else { return }
        state.scheduled = false
        let pages = clients.values.filter { $0.board == board && $0.socket != nil }
        guard !pages.isEmpty, let replica = host.endpoint.boards[board]?.store.replica else {
            renders[board] = nil
            return
        }
        state.inFlight = true
        state.dirty = false
        state.lastStart = EventLoop.now()
        renders[board] = state
        let needWhole = pages.contains { $0.seq != state.seq }
        let box = WeakView(self)
        let loop = self.loop
        // The replica is a value: this copy is the board as it is now, whatever the loop merges
        // while the render runs.
        renderer.render(board, replica, whole: needWhole) { result in
            loop.execute { box.view?.rendered(board, result) }
        }
    }

    private func rendered(_ board: String, _ result: WebRenderer.Result) {
        guard var state = renders[board] else { return }
        let previous = state.seq
        state.seq += 1
        state.inFlight = false
        var missing = false
        for client in clients.values where client.board == board && client.socket != nil {
            if client.seq == previous, result.compared {
                client.seq = state.seq
                if let message = result.changes { sendUpdate(message, to: client) }
            } else if let whole = result.whole {
                client.seq = state.seq
                sendUpdate(whole, to: client)
            } else {
                missing = true  // joined while this render ran: the next one sends it the board
            }
        }
        if missing { state.dirty = true }
        renders[board] = state
        if state.dirty { requestRender(board) }
    }

    private func sendUpdate(_ message: String, to client: Client) {
        guard var socket = client.socket else { return }
        // A page that does not read gets nothing more queued past its limit; it gets the whole
        // board once it reads again (its next update is measured against nothing).
        guard client.connection.queuedBytes < options.maxQueuedPerPage else {
            client.seq = nil
            return
        }
        socket.send(text: message)
        client.socket = socket
        flushSocket(client)
    }

    func relay(_ presence: Presence, on board: String) {
        for client in clients.values where client.board == board && client.tab != presence.replica {
            sendPresence(presence, to: client)
        }
    }

    private func sendPresence(_ presence: Presence, to client: Client) {
        guard var socket = client.socket, client.connection.queuedBytes < options.maxQueuedPerPage else { return }
        socket.send(text: WebPage.presenceJSON(presence))
        client.socket = socket
        flushSocket(client)
    }
}

/// The view, weakly, for a render's result to find it back on the loop thread.
/// `@unchecked Sendable`: created on the loop and dereferenced only in tasks the loop runs.
final class WeakView: @unchecked Sendable {
    weak var view: WebView?
    init(_ view: WebView) { self.view = view }
}

/// Renders boards for the web view on a queue of its own, so a large board's render never
/// holds the event loop that serves every other board: the snapshot, each item's JSON (image
/// sizes read once per image), and what changed since the board's previous render.
/// `@unchecked Sendable`: its state is touched only on `queue`.
final class WebRenderer: @unchecked Sendable {
    struct Result: Sendable {
        /// Whether there was a previous render to compare with, and what changed since it
        /// (nil: nothing).
        var compared = false
        var changes: String?
        var whole: String?
    }

    private let queue = DispatchQueue(label: "boardsync.web.render")
    private var previous: [String: WebPage.Rendered] = [:]
    private var sizes: [String: (width: Int, height: Int)] = [:]

    func render(_ board: String, _ replica: Replica, whole: Bool, _ done: @escaping @Sendable (Result) -> Void) {
        queue.async {
            let rendered = WebPage.render(replica.snapshot(), sizes: &self.sizes)
            var result = Result()
            if let old = self.previous[board] {
                result.compared = true
                result.changes = rendered.changes(since: old)
            }
            if whole || !result.compared { result.whole = rendered.json }
            self.previous[board] = rendered
            if self.sizes.count > 100_000 { self.sizes = [:] }
            done(result)
        }
    }

    /// Drops what is kept for a board nobody watches any more.
    func forget(_ board: String) {
        queue.async { self.previous[board] = nil }
    }
}
