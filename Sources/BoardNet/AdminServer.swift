import BoardModel
import BoardSync
import Foundation

/// `serve --admin`: the operator's port. `GET /healthz` (200 while the process serves),
/// `GET /readyz` (200 when the boards' storage is writable and every readiness check passes;
/// 503 from the moment the server starts stopping), `GET /metrics` (the Prometheus text
/// exposition format, `AdminServer+Metrics.swift`).
///
/// Who may ask: the probes are open (Kubernetes' probes send no credentials, and they say
/// nothing but ready or not); everything else needs `Authorization: Bearer TOKEN`: with access
/// control an admin token (`board-sync token --role admin`: signed, not expired, not revoked,
/// checked at every request), without it the run token (`runToken`). A token is never taken
/// from the URL (it would land in proxies' logs). `Host` must name this server (an IP
/// address, `localhost` or an allowed name: DNS rebinding), and a request a browser sends
/// cross-site (an `Origin` header, or `Sec-Fetch-Site: cross-site`) is refused: the port is
/// for scrapers and scripts, not pages.
///
/// Bounds (docs/DEPLOYMENT.md): connections at once and per address, strangers that have
/// sent no whole request yet make room oldest first, a whole request within
/// `requestTimeout`, a response drained within `drainTimeout`, HTTP heads within
/// `HTTPLimits`, no bodies (every parameter is in the query), one request per connection, readiness checks run at most once per
/// `readinessInterval` however often they are asked. Loop thread only.
///
/// The admin API (`AdminServer+Boards.swift`, admin token): `GET /boards`, `GET|DELETE
/// /boards/NAME`, `POST /boards/NAME/compact|undelete`, `POST /revoke`, `POST /backup`.
public final class AdminServer {
    public struct Options {
        /// Tokens as the sync server checks them: /metrics needs an admin token. Nil: `runToken`.
        public var access: SyncEndpoint.AccessControl?
        /// Without `access`: the bearer token /metrics needs (required then).
        public var runToken: String?
        public var log: (String) -> Void = { _ in }
        /// Request heads (no request to this port has a body).
        public var limits = HTTPLimits()
        /// Connections at once, and from one IP address.
        public var maxConnections = 64
        public var maxConnectionsPerAddress = 16
        /// Connections that have not sent a whole request yet; beyond, the oldest is dropped.
        public var maxUnanswered = 32
        /// Seconds a connection has to send a whole request, and a response to be read.
        public var requestTimeout: Double = 5
        public var drainTimeout: Double = 10
        /// The readiness checks' result is reused for this long (a stranger asking /readyz in a
        /// loop costs no more than one check a second).
        public var readinessInterval: Double = 1
        /// HTTPS with this server context (the sync port's certificate).
        public var tls: TLSContext?
        /// Host names (besides IP addresses and `localhost`) requests may name in `Host`.
        public var allowedHosts: [String] = []
        /// What readiness needs besides writable storage: each a name and a check that returns
        /// nil when ready or why not (Redis reachable, say).
        public var readinessChecks: [(name: String, check: () -> String?)] = []
        /// More metric families in the exposition format (Redis' counters, say), appended.
        public var extraMetrics: [() -> String] = []
        /// `POST /backup`: starts a backup now (nil: the server makes no backups, 409).
        public var backupNow: (() -> Void)?
        /// Told each board `DELETE /boards/NAME` deleted (the webhooks' `board.deleted`).
        public var onBoardDeleted: ((String) -> Void)?
        /// `POST /revoke`: records a revocation of a subject or a token id where every server
        /// applies it, returning the line recorded (nil: no access control, 409).
        public var revoke: ((_ subject: String?, _ tokenID: String?) throws -> String)?
        /// Renders a board for `export?format=png|pdf|svg` (format, scale), off the loop
        /// thread (nil: renderings answer 501). BoardNet does not link BoardRender: `serve` sets it.
        public var render: (@Sendable (BoardSnapshot, String, Double) throws -> [UInt8])?
        /// Exports streaming at once (tar or rendered); beyond, 503.
        public var maxExports = 4
        /// Renderings (PNG, PDF, SVG) at once: a raster may take 16 bytes a pixel, up to the
        /// renderer's pixel limit (about 1 GiB); beyond, 503.
        public var maxRenders = 1
        /// `GET /boards` listings reading the disk at once (on worker threads); beyond, 503.
        public var maxListings = 2
        /// Called on a listing's worker thread before it reads the disk (tests hold it there).
        public var listingWillRead: (@Sendable () -> Void)?
        /// With `--redis`: tombstones kept for every server (`RedisCluster`); nil: files in
        /// the data directory (`BoardTombstones`).
        public var sharedTombstones: (any SharedTombstones)?

        public init() {}
    }

    public let listenAddress: SocketAddress
    let host: SyncHost
    weak var web: WebView?
    let dataDirectory: String
    let options: Options
    let loop: EventLoop
    private let listener: TCPListener
    var clients: [ObjectIdentifier: Client] = [:]
    private var perAddress: [String: Int] = [:]
    private var tickArmed = false
    /// Set when the server starts stopping: /readyz answers 503 from then on.
    public private(set) var isDraining = false
    private var readiness: (at: Double, failure: (check: String, detail: String)?)?
    private var refusalLogTokens = AdminServer.refusalLogBurst
    private var refusalLogRefilled = EventLoop.now()
    private var refusalsNotLogged = 0
    /// Counters of this port (`/metrics`).
    var requests: [String: Int] = [:]
    var authFailures: [String: Int] = [:]
    var connectionsRefused = 0
    /// Exports streaming now (`AdminServer+Export.swift`).
    var exportsRunning = 0
    /// Renderings running now (each also holds a place in `exportsRunning`).
    var rendersRunning = 0
    /// Listings reading the disk now (`AdminServer+Listing.swift`).
    var listingsRunning = 0
    let started = Date().timeIntervalSince1970

    final class Client {
        let connection: TCPConnection
        let address: String
        var parser: HTTPRequestParser
        var answered = false
        /// A whole request arrived (it is being answered, rendered or prepared): never dropped
        /// to make room for newcomers.
        var requested = false
        let opened: Double
        var drainDeadline: Double?
        /// Counted in `exportsRunning` until it closes.
        var exporting = false
        /// Its export is being rendered (the render holds its own place in `exportsRunning`,
        /// given back when it ends); no request timeout meanwhile.
        var rendering = false

        init(_ connection: TCPConnection, address: String, limits: HTTPLimits, now: Double) {
            self.connection = connection
            self.address = address
            parser = HTTPRequestParser(limits: limits)
            opened = now
        }
    }

    public init(listen: SocketAddress, host: SyncHost, web: WebView? = nil, dataDirectory: String, loop: EventLoop,
                options: Options = Options()) throws {
        guard options.access != nil || !(options.runToken ?? "").isEmpty else {
            throw AccessSetupError("the admin port needs access control or a run token")
        }
        var options = options
        let log = options.log
        options.log = { line in log(LogText.escaped(line)) }
        self.options = options
        self.host = host
        self.web = web
        self.dataDirectory = dataDirectory
        self.loop = loop
        listener = try TCPListener(address: listen, on: loop)
        listenAddress = listener.address
        listener.onAccept = { [weak self] connection in self?.accepted(connection) }
        listener.onError = { [options] line in options.log("admin: \(line)") }
    }

    /// From now on /readyz answers 503 (the server is stopping); the probes and /metrics are
    /// still answered until `close()`.
    public func beginDraining() {
        guard !isDraining else { return }
        isDraining = true
        options.log("admin: draining: /readyz answers 503")
    }

    public func close() {
        listener.close()
        for client in clients.values { client.connection.close(immediately: true) }
    }

    /// Connections open on this port now.
    public var connectionCount: Int { clients.count }

    // MARK: Connections

    private func accepted(_ connection: TCPConnection) {
        let address = connection.remote.split(separator: ":").dropLast().joined(separator: ":")
        // An address at its limit is refused before anything else: it cannot make others'
        // waiting connections go (found by review).
        let addressFull = perAddress[address, default: 0] >= options.maxConnectionsPerAddress
        if !addressFull {
            // Only connections that have not sent a whole request make room (one being answered,
            // rendered or prepared is past that: found by review), and the address holding the
            // most of them gives its oldest first, so a stranger's crowd drops its own.
            let waiting = clients.values.filter { !$0.answered && !$0.requested }
            if waiting.count >= options.maxUnanswered {
                let counts = Dictionary(grouping: waiting, by: \.address).mapValues(\.count)
                let crowded = waiting.max { (counts[$0.address]!, -$0.opened) < (counts[$1.address]!, -$1.opened) }
                if let oldest = crowded {
                    logRefusal("admin: dropped \(oldest.connection.remote): \(options.maxUnanswered) connections are waiting for their request")
                    oldest.connection.close(immediately: true)
                }
            }
        }
        guard clients.count < options.maxConnections, !addressFull else {
            connectionsRefused += 1
            let why = clients.count >= options.maxConnections ? "too many admin connections are open" : "too many admin connections are open from \(address)"
            logRefusal("admin: refused \(connection.remote): \(why)")
            _ = connection.send(HTTPResponse.error(HTTPError(503, "\(why); try again later")).encoded())
            connection.close()
            return
        }
        if let tls = options.tls {
            do { try connection.acceptTLS(tls) } catch { return logRefusal("admin: closed \(connection.remote): \(error)") }
        }
        connection.maxQueuedBytes = 4 << 20
        let client = Client(connection, address: address, limits: options.limits, now: EventLoop.now())
        clients[ObjectIdentifier(client)] = client
        perAddress[address, default: 0] += 1
        connection.onData = { [weak self, weak client] bytes in
            guard let self, let client else { return }
            self.received(bytes, from: client)
        }
        connection.onClose = { [weak self, weak client] _ in
            guard let self, let client else { return }
            self.disconnected(client)
        }
        armTick()
    }

    private func disconnected(_ client: Client) {
        guard clients.removeValue(forKey: ObjectIdentifier(client)) != nil else { return }
        if client.exporting { exportsRunning -= 1 }
        perAddress[client.address, default: 1] -= 1
        if perAddress[client.address] == 0 { perAddress[client.address] = nil }
    }

    private func received(_ bytes: [UInt8], from client: Client) {
        guard !client.answered else { return }  // one request per connection; the rest is ignored
        if EventLoop.now() - client.opened > options.requestTimeout { return timedOut(client) }
        do {
            guard let request = try client.parser.append(bytes) else { return }
            client.requested = true
            respond(to: request, client: client)
        } catch {
            logRefusal("admin: refused a request from \(client.connection.remote): \(error)")
            finish(client, HTTPResponse.error(error))
        }
    }

    private func timedOut(_ client: Client) {
        logRefusal("admin: closed \(client.connection.remote): no whole request within \(options.requestTimeout) s")
        if let tls = client.connection.tls, !tls.isHandshakeDone { return client.connection.close(immediately: true) }
        finish(client, HTTPResponse.error(HTTPError(408, "no whole request within \(Int(options.requestTimeout)) s")))
    }

    /// Answers once and closes after the response.
    func finish(_ client: Client, _ response: HTTPResponse, head: Bool = false) {
        guard !client.answered else { return }
        client.answered = true
        requests[String(response.status), default: 0] += 1
        client.drainDeadline = EventLoop.now() + options.drainTimeout
        _ = client.connection.send(response.encoded(includingBody: !head))
        client.connection.close()
    }

    /// Logs a refusal (a refused, dropped or closed connection: what strangers cause), at most
    /// `refusalLogBurst` lines at once and `refusalLogRate` a second; the lines left out are
    /// counted in the next one logged, so a stranger's loop cannot flood the log.
    func logRefusal(_ line: String) {
        let now = EventLoop.now()
        refusalLogTokens = min(Self.refusalLogBurst, refusalLogTokens + (now - refusalLogRefilled) * Self.refusalLogRate)
        refusalLogRefilled = now
        guard refusalLogTokens >= 1 else { refusalsNotLogged += 1; return }
        refusalLogTokens -= 1
        if refusalsNotLogged > 0 {
            options.log("\(line) (and \(refusalsNotLogged) refusals before it not logged: too many at once)")
            refusalsNotLogged = 0
        } else {
            options.log(line)
        }
    }

    static let refusalLogBurst: Double = 20
    static let refusalLogRate: Double = 5

    // MARK: Timers

    /// One timer while anyone is connected, every second: request and drain deadlines.
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
        for client in Array(clients.values) where !client.connection.isClosed {
            if let deadline = client.drainDeadline {
                if now >= deadline {
                    logRefusal("admin: closed \(client.connection.remote): the response was not read within \(options.drainTimeout) s")
                    client.connection.close(immediately: true)
                }
            } else if !client.rendering, now - client.opened > options.requestTimeout {
                timedOut(client)
            }
        }
    }

    // MARK: Readiness

    /// Nil when ready, or why not: draining, storage not writable, a failed check. Checks run
    /// at most once per `readinessInterval`; draining is seen at once.
    public func readinessFailure() -> String? { readinessCheck()?.detail }

    /// Why the server is not ready: `check` names the failing check (`draining`, `storage`, or a
    /// `readinessChecks` name: all /readyz tells a stranger), `detail` says why (an address, an
    /// errno text: logged when readiness changes, never sent on the open probe).
    func readinessCheck() -> (check: String, detail: String)? {
        if isDraining { return ("draining", "draining: the server is stopping") }
        let now = EventLoop.now()
        if let readiness, now - readiness.at < options.readinessInterval { return readiness.failure }
        var failure: (check: String, detail: String)? = storageFailure().map { ("storage", $0) }
        if failure == nil {
            failure = options.readinessChecks.lazy.compactMap { check in check.check().map { (check.name, "\(check.name): \($0)") } }.first
        }
        if failure?.detail != readiness?.failure?.detail {
            options.log(failure.map { "admin: not ready: \($0.detail)" } ?? "admin: ready")
        }
        readiness = (now, failure)
        return failure
    }

    /// Whether a file can be created, written and removed in the data directory.
    private func storageFailure() -> String? {
        let probe = dataDirectory + "/.readyz-probe-\(getpid())"
        let fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else { return "the data directory cannot be written (\(String(cString: strerror(errno))))" }
        var byte: UInt8 = 0
        let wrote = write(fd, &byte, 1)
        let error = errno
        _ = Glibc.close(fd)
        unlink(probe)
        return wrote == 1 ? nil : "the data directory cannot be written (\(String(cString: strerror(error))))"
    }
}
