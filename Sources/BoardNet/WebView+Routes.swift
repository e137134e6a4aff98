import BoardCRDT
import BoardModel
import BoardSync
import Foundation

/// The view's routes: `/` (the boards), `/b/NAME` (the page), `/b/NAME/asset/HASH` (an image),
/// `/ws/NAME` (the page's WebSocket), each behind the token, Host and Origin checks here.
extension WebView {
    func respond(to request: HTTPRequest, client: Client) {
        let head = request.method == "HEAD"
        guard request.method == "GET" || head else {
            return finish(client, HTTPResponse.error(HTTPError(405, "only GET is served")))
        }
        // DNS rebinding: a page of another site, its name pointed at this address, would send
        // its own name here.
        guard isAllowedHost(request.header("Host")) else {
            options.log("web: refused a request from \(client.connection.remote) for host \(LogText.quoted(request.header("Host") ?? "", limit: 80))")
            return finish(client, HTTPResponse.error(HTTPError(421, "this server does not serve that host name (allow it with --web-host)")), head: head)
        }
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // "/" → ["", ""]; "/b/x" → ["", "b", "x"]
        switch (parts.count, parts.count > 1 ? parts[1] : "") {
        case (2, ""):
            guard runTokenMatches(request) || options.access != nil else { return refuseToken(client, request, head: head) }
            let (html, script) = WebPage.index(boards: boardNames(), token: runToken)
            finish(client, page(html, script: script), head: head)
        case (3, "b"):
            guard let board = viewable(parts[2], request, client, head: head) else { return }
            let (html, script) = WebPage.board(name: board)
            finish(client, page(html, script: script), head: head)
        case (5, "b") where parts[3] == "asset":
            guard let board = viewable(parts[2], request, client, head: head) else { return }
            serveImage(parts[4], board: board, client, head: head)
        case (3, "ws"):
            guard let board = viewable(parts[2], request, client, head: false) else { return }
            guard isAllowedOrigin(request.header("Origin"), host: request.header("Host")) else {
                options.log("web: refused a WebSocket from \(client.connection.remote) opened by \(LogText.quoted(request.header("Origin") ?? "", limit: 80))")
                return finish(client, HTTPResponse.error(HTTPError(403, "WebSockets are served to this server's own pages only")))
            }
            upgrade(client, request, board: board)
        default:
            finish(client, HTTPResponse.error(HTTPError(404, "nothing at \(request.path.prefix(80))")), head: head)
        }
    }

    private func serveImage(_ name: String, board: String, _ client: Client, head: Bool) {
        guard let hash = AssetHash(hex: name), host.endpoint.addViewer(board: board, now: EventLoop.now()) else {
            return finish(client, HTTPResponse.error(HTTPError(404, "no such image")), head: head)
        }
        defer { host.endpoint.removeViewer(board: board, now: EventLoop.now()) }
        guard let data = host.endpoint.boards[board]?.store.replica.assets.data(for: hash) else {
            return finish(client, HTTPResponse.error(HTTPError(404, "this board holds no image \(hash.hex.prefix(12))")), head: head)
        }
        // Images that came over the sync protocol are stored as sent: only PNGs a viewer can
        // afford to decode are served.
        guard let png = try? PNGHeader(validating: data) else {
            return finish(client, HTTPResponse.error(HTTPError(404, "image \(hash.hex.prefix(12)) is not a PNG")), head: head)
        }
        guard png.width <= options.maxImageSide, png.height <= options.maxImageSide else {
            return finish(client, HTTPResponse.error(HTTPError(404, "image \(hash.hex.prefix(12)) is \(png.width)x\(png.height), over \(options.maxImageSide) pixels on a side")), head: head)
        }
        // The content never changes (its name is its hash); a token-gated one stays out of
        // shared caches.
        // The URL carries a token: never in a shared cache.
        let cache = "private, max-age=31536000, immutable"
        let response = HTTPResponse(status: 200, headers: Self.securityHeaders + [
            ("Content-Type", "image/png"), ("Cache-Control", cache), ("Content-Length", String(data.count)),
            ("Content-Security-Policy", "default-src 'none'; sandbox"), ("Connection", "close"),
        ])
        if !head { client.body = (data, 0) }
        finish(client, response, head: head)
    }

    /// Headers every answer carries: no MIME sniffing, no framing, no referrer (the URL may
    /// carry a token).
    static let securityHeaders: [(name: String, value: String)] = [
        ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"), ("Referrer-Policy", "no-referrer"),
    ]

    private func page(_ html: String, script: String?) -> HTTPResponse {
        // Only the page's own script runs: allowed by its hash, never 'unsafe-inline'.
        let scripts = script.map { "'sha256-\(Data(SHA256.hash(Array($0.utf8))).base64EncodedString())'" } ?? "'none'"
        let policy = "default-src 'self'; img-src 'self' data:; style-src 'unsafe-inline'; script-src \(scripts); "
            + "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
        let cache = options.access == nil ? "no-cache" : "private, no-cache"
        return HTTPResponse(status: 200, headers: Self.securityHeaders + [
            ("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", cache), ("Connection", "close"),
            ("Content-Security-Policy", policy),
        ], body: Array(html.utf8))
    }

    /// `Host` names this server: an IP address (any: they cannot be rebound), `localhost`, or
    /// an allowed name; a port, when given, is ignored (a proxy may forward another one).
    func isAllowedHost(_ value: String?) -> Bool {
        guard let value, !value.isEmpty else { return false }
        var name = value.lowercased()
        if name.hasPrefix("[") {
            guard let close = name.firstIndex(of: "]") else { return false }
            let literal = String(name[name.index(after: name.startIndex)..<close])
            var probe = in6_addr()
            return inet_pton(AF_INET6, literal, &probe) == 1
        }
        if let colon = name.lastIndex(of: ":") {
            guard UInt16(name[name.index(after: colon)...]) != nil else { return false }
            name = String(name[..<colon])
        }
        if name.hasSuffix(".") { name.removeLast() }
        var probe = in_addr()
        if inet_pton(AF_INET, name, &probe) == 1 || name == "localhost" { return true }
        return options.allowedHosts.contains { $0.lowercased() == name }
    }

    /// A WebSocket opened by a browser names the page's origin: it must be this server as the
    /// request's `Host` names it (http or https), or an allowed origin. A client that is not a
    /// browser sends none (it could send anything, so it proves nothing; the token still counts).
    func isAllowedOrigin(_ origin: String?, host: String?) -> Bool {
        guard let origin else { return true }
        let value = origin.lowercased()
        if options.allowedOrigins.contains(where: { $0.lowercased() == value }) { return true }
        guard let host = host?.lowercased(), value != "null" else { return false }
        let scheme = options.tls == nil ? "http://" : "https://"
        return value == scheme + host
    }

    private func runTokenMatches(_ request: HTTPRequest) -> Bool {
        guard let runToken else { return false }
        return HMAC.constantTimeEquals(Array((request.query["token"] ?? "").utf8), Array(runToken.utf8))
    }

    /// A request without this run's token: 401, counted as `missing` (no token) or
    /// `bad_signature` (another one), as the admin port counts its run token.
    private func refuseToken(_ client: Client, _ request: HTTPRequest, head: Bool) {
        authFailures[(request.query["token"] ?? "").isEmpty ? "missing" : "bad_signature", default: 0] += 1
        finish(client, HTTPResponse.error(HTTPError(401, "access denied: open the URL the server printed (it carries ?token=...)")), head: head)
    }

    /// The board a request names, when it exists and the request may see it; otherwise the
    /// client got its answer (404 for names that are not boards, 401 without a valid token:
    /// the same answer whether or not the board exists).
    private func viewable(_ raw: String, _ request: HTTPRequest, _ client: Client, head: Bool) -> String? {
        let name = raw.removingPercentEncoding ?? raw
        // The name before the token: a token is only ever compared with a valid, plain name.
        guard Hello.isValidBoardName(name) else {
            finish(client, HTTPResponse.error(HTTPError(404, "no board named '\(name.prefix(60))'")), head: head)
            return nil
        }
        if let access = options.access {
            let token = Array((request.query["token"] ?? "").utf8)
            let grant: AccessGrant
            switch access.check(token, board: name) {  // signature, board, expiry, revocations
            case .success(let granted): grant = granted
            case .failure(let refusal):
                authFailures[refusal.label, default: 0] += 1
                finish(client, HTTPResponse.error(HTTPError(401, "access denied: this page needs a valid token for the board (?token=...)")), head: head)
                return nil
            }
            client.token = token
            client.canEdit = grant.role != .read
            client.grant = grant
        } else {
            guard runTokenMatches(request) else {
                refuseToken(client, request, head: head)
                return nil
            }
        }
        guard FileManager.default.fileExists(atPath: dataDirectory + "/" + name + ".boardpkg") else {
            finish(client, HTTPResponse.error(HTTPError(404, "no board named '\(name.prefix(60))'")), head: head)
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
}
