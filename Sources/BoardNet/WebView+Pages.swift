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
            // The board first: whatever happens to the connection from here, its close removes
            // the viewer again.
            client.board = board
            _ = client.connection.send(response.encoded())
            guard !client.connection.isClosed, clients[ObjectIdentifier(client)] != nil else { return }
            // A page that only reads sends nothing but pongs and its close: its messages are
            // refused at a few bytes, before anything is parsed.
            client.socket = WebSocketConnection(maxMessage: client.canEdit ? options.maxMessage : options.maxReaderMessage)
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
            // Once the view closed the page (or the page left), nothing it sends is taken.
            guard !client.closing, !socket.closeSent || { if case .closed = event { return true } else { return false } }(),
                  clients[ObjectIdentifier(client)] != nil else { break }
            guard case .text(let text) = event else { continue }
            // Messages per second, before any is parsed: a page cannot make the loop parse
            // without end.
            let now = EventLoop.now()
            let rate = options.maxMessagesPerSecond
            guard client.bucket.take(now: now) else {
                options.log("web: closed page \(client.connection.remote): more than \(Int(rate)) messages a second")
                closeSocket(client, .policyViolation, "more than \(Int(rate)) messages a second")
                return
            }
            pageSaid(text, client)
            if client.socket?.closeSent ?? true { break }
        }
        flushSocket(client)
        if client.socket?.isClosed ?? true { client.connection.close() }
    }

    /// Closes a page's socket: its close frame goes, nothing more it sends is taken, its
    /// replica stops at once, and the connection is dropped if the close does not drain in time.
    func closeSocket(_ client: Client, _ code: WebSocket.CloseCode, _ reason: String) {
        guard !client.closing else { return }
        client.closing = true
        client.author = nil
        client.drainDeadline = EventLoop.now() + options.drainTimeout
        guard var socket = client.socket else { return client.connection.close() }
        socket.close(code, reason: reason)
        client.socket = socket
        flushSocket(client)
        client.connection.close()
    }

    /// What a page sends (`WebMessage`): its pointer becomes a presence, anything else is an
    /// edit; the time slider's messages go to WebView+History.swift. A page that only reads
    /// sends nothing else that is taken: its other messages are refused unread.
    private func pageSaid(_ text: String, _ client: Client) {
        guard let board = client.board else { return }
        // The time slider's messages (WebView+History.swift): pages that only read may send
        // these; a restore is refused there unless the page edits.
        if let request = historyRequest(text) { return pageAsked(request, client, board: board) }
        guard client.canEdit else {
            return refuse(client, "this page's token may only read board '\(board)'")
        }
        let message: WebMessage
        switch WebMessage.parse(text, maxImageSide: options.maxImageSide) {
        case .success(let parsed): message = parsed
        case .failure(let refusal): return refuse(client, refusal.message)
        }
        if case .pointer(let pointer) = message {
            if let name = pointer.name { client.name = name }
            let presence = Presence(replica: client.tab, name: client.name, color: pointer.color, pointer: pointer.at,
                                    stroke: pointer.ink.isEmpty ? nil : InkPreview(color: pointer.color, width: pointer.width, points: pointer.ink),
                                    ttl: Presence.defaultTTL)
            return queuePresence(presence, from: client, on: board)
        }
        guard let body = message.edit else { return }
        // Grouping and undo mean nothing to a page that has not edited yet: no author is made
        // for them.
        if client.author == nil, [WebMessage.beginGroup, .endGroup, .undo, .redo].contains(message) { return }
        // A group (a drag) is closed by the view after `maxGroupEdits` edits: however long a
        // page keeps one open, no step grows without bound (a draft copies the open step).
        switch message {
        case .beginGroup: client.groupEdits = 0
        case .endGroup, .undo, .redo: client.groupEdits = nil
        default:
            if let count = client.groupEdits {
                client.groupEdits = count + 1
                if count + 1 >= Self.maxGroupEdits, var author = client.author {
                    client.author = nil
                    _ = try? host.edit(board, as: &author) { $0.endUndoGroup(); return LocalEdit() }
                    client.author = author
                    client.groupEdits = nil
                }
            }
        }
        do {
            var author = try author(for: client, board: board)
            client.lastEdit = EventLoop.now()
            _ = try host.edit(board, as: &author, body)
            client.author = author
        } catch let error as EditError {
            refuse(client, error.description)
        } catch let error as EditorLimit {
            refuse(client, error.message)
        } catch {
            // What went wrong on the server (a path, a disk) is for its log, not for the page.
            options.log("web: page \(client.connection.remote) on board '\(board)': edit failed: \(error)")
            refuse(client, "the server could not make this edit (its log says why)")
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

    private func refuse(_ client: Client, _ why: String) {
        guard var socket = client.socket else { return }
        socket.send(text: "{\"type\":\"error\",\"message\":\(WebPage.json(why))}")
        client.socket = socket
        flushSocket(client)
    }

    /// The page as an author on the board's replica, holding only its undo history: made at
    /// its first edit (and again after `editorIdleTimeout` without one). Every page of one token
    /// subject on a board edits under one replica id for this server's run (each page with its
    /// own undo), made when the first of them edits and never announced before its first
    /// operation is on the board (pages' presences go under ids of their own): no writer can
    /// claim it first, and pages cannot mint replica ids without end (each id is an entry in
    /// every version vector of the board).
    func author(for client: Client, board: String) throws -> Author {
        if let author = client.author { return author }
        let editors = clients.values.filter { $0.board == board && $0.author != nil }.count
        guard editors < options.maxEditorsPerBoard else {
            throw EditorLimit(message: "\(editors) pages are editing board '\(board)', the most at once; try again later")
        }
        let key = AuthorKey(board: board, subject: client.grant?.subject ?? "")
        if let id = authorIDs[key] { return Author(id: id) }
        let id = ReplicaID(UInt64.random(in: 1...UInt64.max))
        authorIDs[key] = id
        return Author(id: id)
    }

    /// Edits a page may make inside one group before the view closes it.
    static let maxGroupEdits = 1_000

    func flushSocket(_ client: Client) {
        guard var socket = client.socket else { return }
        let output = socket.takeOutput()
        client.socket = socket
        if !output.isEmpty { _ = client.connection.send(output) }
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

/// More pages edit a board than `WebView.Options.maxEditorsPerBoard` allows.
struct EditorLimit: Error {
    var message: String
}
