import BoardCRDT
import BoardModel
import BoardSync
import Foundation

/// `serve --web`: a server's boards in a web browser, live and editable, on its own
/// address. `GET /` lists the boards, `GET /b/NAME` is the board page (one embedded HTML file:
/// no build step, no CDN), `GET /b/NAME/asset/HASH` serves an image by content hash, and
/// `GET /ws/NAME` upgrades to a WebSocket that sends the board as JSON on join and again as it
/// changes (at most ten times a second), plus the presence of everyone on it. A page's pointer
/// becomes a presence others see (peers and other pages).
///
/// Who may look: every request needs a token (`?token=`): with access control a token for the
/// board, and without it the random token this view minted for its run (printed in its URL),
/// so no other web site a browser visits can read or edit boards (cross-site WebSocket
/// hijacking). `Host` must name this server (an IP address, `localhost`, or an allowed name:
/// DNS rebinding), and a WebSocket's `Origin`, when a browser sends one, must be this server's
/// own (or an allowed origin).
///
/// Editing: a page that edits is a light author on the board's one replica in the server
/// (`Author`: a fresh replica id and its own undo history, a few hundred bytes; nothing of the
/// board is copied per page). Its edits are drafted on the board's replica as that author and
/// merged the way a peer's operations are (group commit, relayed to every peer and page, into
/// the shared log with Redis), so conflicts follow the same contract as for any peer. A read
/// token gives a page whose edits are refused unread; a page's token is checked again every
/// second, so an expired or revoked one ends the page and its edits.
///
/// Pages render from typed changes: per board the view keeps a `ChangeTracker` on the loop
/// (made off the loop from one snapshot when the first page joins), and each update re-renders
/// and re-sends only the items that changed (`WebRenderer`).
///
/// Bounds (docs/DEPLOYMENT.md lists them with their defaults): pages at once and per address,
/// a whole request within `requestTimeout`, a response drained within `drainTimeout`, a page
/// that answers nothing (not even the view's pings) for `idleTimeout` is closed, messages per
/// second per page, message size (small for pages that only read, which send nothing), output
/// queued per page, images streamed in chunks from the one copy the board holds, presence
/// coalesced to at most `presenceInterval`. Rendering runs off the loop (`WebRenderer`).
///
/// History: the board page's time slider lists the board's versions, shows past versions
/// rendered off the loop, and lets an editing page restore one (WebView+History.swift, with
/// its bounds).
public final class WebView {
    public struct Options {
        /// Tokens, as the sync server checks them (nil: the view mints a token for its run).
        public var access: SyncEndpoint.AccessControl?
        /// Without `access`: the token every request needs (nil: a random one, `runToken`).
        public var runToken: String?
        public var log: (String) -> Void = { _ in }
        public var limits = HTTPLimits()
        /// Largest message a page that edits may send (a sticker's PNG travels in one, base64).
        public var maxMessage = 8 << 20
        /// Largest message a page that only reads may send (it sends nothing but close and pong).
        public var maxReaderMessage = 1 << 10
        /// Messages a page may send per second (bursts of twice as many); beyond, it is closed.
        public var maxMessagesPerSecond: Double = 100
        /// Pages connected at once, and from one IP address (behind a reverse proxy every page
        /// comes from the proxy's address: raise it there).
        public var maxPages = 256
        public var maxPagesPerAddress = 32
        /// Connections that have not yet been answered or upgraded (no valid token shown yet):
        /// beyond, the oldest of them is dropped, so strangers cannot take the pages' places.
        public var maxUnanswered = 64
        /// Pages of one board that edit (each holds its undo history), and how long an editing
        /// page keeps its undo history without an edit.
        public var maxEditorsPerBoard = 128
        public var editorIdleTimeout: Double = 300
        /// Seconds a connection has to send a whole request (a connection that sends nothing,
        /// or a trickle, must not hold one of the `maxPages` places).
        public var requestTimeout: Double = 10
        /// Seconds a response (a page, an image) has to reach a client that stopped reading.
        public var drainTimeout: Double = 30
        /// A page's socket is pinged after `pingInterval` seconds of silence and closed after
        /// `idleTimeout` (browsers answer pings by themselves).
        public var pingInterval: Double = 15
        public var idleTimeout: Double = 45
        /// Output queued for one page before it counts as not reading: it then gets no more
        /// board updates (the whole board once it reads again); past twice this it is closed.
        public var maxQueuedPerPage = 8 << 20
        /// Presence from one page is forwarded at most this often (the latest wins).
        public var presenceInterval: Double = 0.05
        /// Widest and tallest image a page may upload or is served (a decompression bomb for
        /// every viewer otherwise).
        public var maxImageSide = 8192
        /// HTTPS with this server context (`serve --tls-cert`): pages, images and WebSockets.
        public var tls: TLSContext?
        /// Host names (besides IP addresses and `localhost`) requests may name in `Host`, such
        /// as the name a reverse proxy serves the view under.
        public var allowedHosts: [String] = []
        /// Origins (`https://boards.example`) besides the view's own that may open WebSockets.
        public var allowedOrigins: [String] = []
        /// The time slider (WebView+History.swift): versions a page is told at most (evenly
        /// spaced beyond), views of past versions rendered per second per page (one in flight,
        /// the latest request waiting), bytes of history on disk the view reads for a board,
        /// boards whose history is kept in memory at once, and how often a board's history is
        /// read again for pages that ask (when it changed). A history kept takes about eight
        /// times its bytes on disk in memory (measured: 0.75 MB of archive and log, 5.9 MB
        /// resident), so the defaults hold at most about 4 × 8 MiB × 8 ≈ 260 MB.
        public var maxHistoryVersionsListed = 1_000
        public var historyViewsPerSecond: Double = 10
        /// Views of past versions rendered per second by the whole view, all pages together
        /// (bursts of twice as many): beyond, pages' views wait their turn.
        public var maxHistoryViewsPerSecond: Double = 50
        public var maxHistoryBytes = 8 << 20
        public var maxHistoryBoards = 4
        public var historyRefreshInterval: Double = 2

        public init() {}
    }

    public let listenAddress: SocketAddress
    /// The token pages need when there is no access control (nil with access control).
    public let runToken: String?
    let host: SyncHost
    let dataDirectory: String
    let options: Options
    let loop: EventLoop
    private let listener: TCPListener
    var clients: [ObjectIdentifier: Client] = [:]
    private var perAddress: [String: Int] = [:]
    var nextTab: UInt64 = 1
    private var tickArmed = false
    let renderer = WebRenderer()
    /// Per board: the render in flight, whether the board changed since it started, the
    /// latest render's sequence number, and when the last one started.
    var renders: [String: RenderState] = [:]
    /// Per board with pages: the typed changes' tracker and the version it was brought to (nil
    /// while the first one is being made off the loop).
    var feeds: [String: Feed] = [:]
    /// The replica id the pages of one token subject edit a board under, for this run.
    var authorIDs: [AuthorKey: ReplicaID] = [:]
    /// Requests refused for their token, by reason (`AccessRefusal.label`), for `/metrics`.
    public internal(set) var authFailures: [String: Int] = [:]

    struct AuthorKey: Hashable {
        var board: String
        var subject: String
    }

    /// The latest presence of each page, by board (sent to pages that join later).
    var pagePresences: [String: [ReplicaID: Presence]] = [:]
    /// Boards' histories kept for their pages' time sliders, and the one queue that reads and
    /// renders them (WebView+History.swift).
    var histories: [String: HistoryCache] = [:]
    let historyQueue = DispatchQueue(label: "boardsync.web.history")
    /// Past views rendered by the whole view (`maxHistoryViewsPerSecond`), made at the first.
    var historyViews: TokenBucket?

    struct RenderState {
        var inFlight = false
        var dirty = false
        var scheduled = false
        var seq = 0
        var lastStart = -Double.infinity
    }

    final class Client {
        let connection: TCPConnection
        /// The IP address (for the per-address limit).
        let address: String
        var parser: HTTPRequestParser
        var socket: WebSocketConnection?
        var board: String?
        /// The replica id this page's presence is announced under (and its edits made as).
        var tab = ReplicaID(0)
        var name = ""
        /// The token the page presented (passed on by its replica's connection).
        var token: [UInt8] = []
        /// Whether the token allows editing (a write or peer token, or the run token).
        var canEdit = true
        /// What the page's token grants (nil without access control): checked again every
        /// second, so a page ends when its token expires or is revoked.
        var grant: AccessGrant?
        /// The page as an author on the board's replica (made at its first edit), when it last
        /// edited, and how many edits the group it has open holds (nil: none open).
        var author: Author?
        var groupEdits: Int?
        var lastEdit: Double = 0
        /// The view closed this page's socket (its close frame is queued): nothing it sends is
        /// taken any more.
        var closing = false
        /// The render this page last got (nil: it needs the whole board).
        var seq: Int?
        /// A response was queued: the connection closes once it drains.
        var answered = false
        let opened: Double
        var drainDeadline: Double?
        var lastHeard: Double
        var pinged = false
        /// An image being streamed: its bytes (the board's own copy) and how far.
        var body: (data: Data, offset: Int)?
        var bucket: TokenBucket
        /// Presence waiting for its turn (`presenceInterval`), and when the last one went.
        var pendingPresence: Presence?
        var presenceSent = -Double.infinity
        var presenceScheduled = false
        /// The page's time slider (WebView+History.swift).
        var history = PageHistory()

        init(_ connection: TCPConnection, address: String, limits: HTTPLimits, now: Double, messagesPerSecond rate: Double) {
            self.connection = connection
            self.address = address
            parser = HTTPRequestParser(limits: limits)
            opened = now
            lastHeard = now
            bucket = TokenBucket(rate: rate, burst: 2 * rate, now: now)  // bursts of two seconds' worth
        }
    }

    public init(listen: SocketAddress, host: SyncHost, dataDirectory: String, loop: EventLoop, options: Options = Options()) throws {
        self.host = host
        self.dataDirectory = dataDirectory
        var options = options
        let log = options.log
        options.log = { line in log(LogText.escaped(line)) }
        if options.access == nil, options.runToken == nil {
            var generator = SystemRandomNumberGenerator()
            options.runToken = Base64URL.encode((0..<18).map { _ in UInt8.random(in: 0...255, using: &generator) })
        }
        runToken = options.access == nil ? options.runToken : nil
        self.options = options
        self.loop = loop
        listener = try TCPListener(address: listen, on: loop)
        listenAddress = listener.address
        listener.onAccept = { [weak self] connection in self?.accepted(connection) }
        let previousChange = host.onBoardChange
        host.onBoardChange = { [weak self] board in
            previousChange?(board)
            self?.changed(board)
        }
        let previousDeleted = host.onBoardDeleted
        host.onBoardDeleted = { [weak self] board in
            previousDeleted?(board)
            self?.deleted(board)
        }
        let previousPresence = host.onPresence
        host.onPresence = { [weak self] board, presence in
            previousPresence?(board, presence)
            self?.relay(presence, on: board)
        }
    }

    /// The view's address as a browser opens it (with the run token when there is one).
    public var url: String {
        let query = runToken.map { "?token=" + ($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "") } ?? ""
        return "\(options.tls == nil ? "http" : "https")://\(listenAddress)/\(query)"
    }

    public func close() {
        listener.close()
        for client in clients.values { client.connection.close() }
    }

    // MARK: Connections

    private func accepted(_ connection: TCPConnection) {
        let address = connection.remote.split(separator: ":").dropLast().joined(separator: ":")
        // Strangers first: the oldest connection that has shown nothing yet makes room.
        let unanswered = clients.values.filter { $0.socket == nil && !$0.answered }
        if unanswered.count >= options.maxUnanswered, let oldest = unanswered.min(by: { $0.opened < $1.opened }) {
            options.log("web: dropped \(oldest.connection.remote): \(options.maxUnanswered) connections are waiting for their request")
            oldest.connection.close(immediately: true)
        }
        guard clients.count < options.maxPages, perAddress[address, default: 0] < options.maxPagesPerAddress else {
            let why = clients.count >= options.maxPages ? "too many pages are open" : "too many pages are open from \(address)"
            options.log("web: refused \(connection.remote): \(why)")
            _ = connection.send(HTTPResponse.error(HTTPError(503, "\(why); try again later")).encoded())
            connection.close()
            return
        }
        if let tls = options.tls {
            do { try connection.acceptTLS(tls) } catch { return options.log("web: closed \(connection.remote): \(error)") }
        }
        connection.maxQueuedBytes = 2 * options.maxQueuedPerPage
        let now = EventLoop.now()
        let client = Client(connection, address: address, limits: options.limits, now: now, messagesPerSecond: options.maxMessagesPerSecond)
        clients[ObjectIdentifier(client)] = client
        perAddress[address, default: 0] += 1
        connection.onData = { [weak self, weak client] bytes in
            guard let self, let client else { return }
            self.received(bytes, from: client)
        }
        connection.onWritable = { [weak self, weak client] in
            guard let self, let client else { return }
            self.pump(client)
            // A page that stopped reading missed updates: once it reads again it gets the board.
            if client.socket != nil, client.seq == nil, !client.closing, let board = client.board { self.requestRender(board) }
        }
        connection.onClose = { [weak self, weak client] _ in
            guard let self, let client else { return }
            self.disconnected(client)
        }
        armTick()
    }

    private func disconnected(_ client: Client) {
        guard clients.removeValue(forKey: ObjectIdentifier(client)) != nil else { return }
        perAddress[client.address, default: 1] -= 1
        if perAddress[client.address] == 0 { perAddress[client.address] = nil }
        client.author = nil
        client.body = nil
        if let board = client.board {
            if pagePresences[board]?.removeValue(forKey: client.tab) != nil {
                let gone = Presence.gone(client.tab, clock: 0)  // the endpoint stamps its next clock
                host.setPresence(gone, on: board)
                relay(gone, on: board)
            }
            if pagePresences[board]?.isEmpty == true { pagePresences[board] = nil }
            host.endpoint.removeViewer(board: board, now: EventLoop.now())
            host.refresh()  // the board may now close when idle: the host's timer must know
            if !clients.values.contains(where: { $0.board == board }) {
                renderer.forget(board)
                feeds[board] = nil
                histories[board] = nil
            }
        }
    }

    private func received(_ bytes: [UInt8], from client: Client) {
        let now = EventLoop.now()
        client.lastHeard = now
        client.pinged = false
        if client.socket != nil {
            handleSocket(bytes, from: client)
            return
        }
        guard !client.answered else { return }  // a response is on its way; the rest is ignored
        // The request deadline is checked as bytes arrive too, not only by the timer.
        if now - client.opened > options.requestTimeout { return timedOut(client) }
        do {
            guard let request = try client.parser.append(bytes) else { return }
            respond(to: request, client: client)
        } catch {
            options.log("web: refused a request from \(client.connection.remote): \(error)")
            finish(client, HTTPResponse.error(error))
        }
    }

    private func timedOut(_ client: Client) {
        options.log("web: closed \(client.connection.remote): no whole request within \(options.requestTimeout) s")
        // No TLS session yet: nothing can be answered, so nothing is waited for.
        if let tls = client.connection.tls, !tls.isHandshakeDone { return client.connection.close(immediately: true) }
        finish(client, HTTPResponse.error(HTTPError(408, "no whole request within \(Int(options.requestTimeout)) s")))
    }

    /// Answers once (a second answer, from a timer say, is never appended) and closes after it.
    func finish(_ client: Client, _ response: HTTPResponse, head: Bool = false) {
        guard !client.answered else { return }
        client.answered = true
        client.drainDeadline = EventLoop.now() + options.drainTimeout
        _ = client.connection.send(response.encoded(includingBody: !head))
        if client.body == nil { client.connection.close() } else { pump(client) }
    }

    /// Streams an image response's body while the socket takes it (a chunk at a time from the
    /// board's own copy: however many pages ask for a large image, it is held once).
    private func pump(_ client: Client) {
        guard let (data, offset) = client.body else { return }
        let chunk = 64 << 10
        var at = offset
        while at < data.count, client.connection.queuedBytes < 4 * chunk, !client.connection.isClosed {
            let end = min(data.count, at + chunk)
            _ = client.connection.send(Array(data[(data.startIndex + at)..<(data.startIndex + end)]))
            at = end
        }
        if at >= data.count {
            client.body = nil
            client.connection.close()
        } else {
            client.body = (data, at)
        }
    }

    // MARK: Timers

    /// One timer for the whole view, every second while anyone is connected: request and
    /// drain deadlines, pings, idle pages, tokens that expired.
    private func armTick() {
        guard !tickArmed, !clients.isEmpty else { return }
        tickArmed = true
        loop.schedule(after: 1) { [weak self] in
            guard let self else { return }
            self.tickArmed = false
            self.tick()
            self.armTick()
        }
    }

    private func tick() {
        let now = EventLoop.now()
        for client in Array(clients.values) {
            if client.connection.isClosed { continue }
            if let deadline = client.drainDeadline {
                if now >= deadline {
                    options.log("web: closed \(client.connection.remote): the response was not read within \(options.drainTimeout) s")
                    client.connection.close(immediately: true)
                }
                continue
            }
            guard client.socket != nil else {
                if now - client.opened > options.requestTimeout { timedOut(client) }
                continue
            }
            if client.closing { continue }
            if let grant = client.grant, let access = options.access, let refusal = access.recheck(grant) {
                let why = if case .expired = refusal { "its token expired" } else { "its token was revoked" }
                options.log("web: closed page \(client.connection.remote) on board '\(client.board ?? "")': \(why)")
                closeSocket(client, .policyViolation, "\(why); open the page with a new one")
                continue
            }
            if client.author != nil, now - client.lastEdit >= options.editorIdleTimeout {
                // Its undo history goes; its next edit makes it an author again (under the same
                // replica id, continuing that id's sequence on the board).
                client.author = nil
                client.groupEdits = nil
            }
            if now - client.lastHeard >= options.idleTimeout {
                options.log("web: closed page \(client.connection.remote): nothing heard for \(Int(options.idleTimeout)) s")
                client.connection.close(immediately: true)
            } else if now - client.lastHeard >= options.pingInterval, !client.pinged {
                client.pinged = true
                guard var socket = client.socket else { continue }
                socket.ping()
                client.socket = socket
                flushSocket(client)
            }
        }
    }
}
