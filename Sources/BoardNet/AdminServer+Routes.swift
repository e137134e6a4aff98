import BoardModel
import BoardSync
import Foundation

/// The admin port's routes and checks: method, `Host`, cross-site requests, then the path;
/// the probes are open, everything else needs the admin (or run) token.
extension AdminServer {
    func respond(to request: HTTPRequest, client: Client) {
        let head = request.method == "HEAD"
        guard ["GET", "HEAD", "POST", "DELETE"].contains(request.method) else {
            return finish(client, HTTPResponse.error(HTTPError(405, "only GET, HEAD, POST and DELETE are served")))
        }
        guard Self.isAllowedHost(request.header("Host"), allowed: options.allowedHosts) else {
            logRefusal("admin: refused a request from \(client.connection.remote) for host \(LogText.quoted(request.header("Host") ?? "", limit: 80))")
            return finish(client, HTTPResponse.error(HTTPError(421, "this server does not serve that host name (allow it with --admin-host)")), head: head)
        }
        // A browser's request made by another site's page (its token would not be sent, but a
        // probe's answer could be read by a page rebinding its name): not for this port.
        if request.header("Origin") != nil || request.header("Sec-Fetch-Site")?.lowercased() == "cross-site" {
            logRefusal("admin: refused a cross-site request from \(client.connection.remote) (Origin \(LogText.quoted(request.header("Origin") ?? "", limit: 80)))")
            return finish(client, HTTPResponse.error(HTTPError(403, "the admin port serves no web pages: cross-site requests are refused")), head: head)
        }
        switch request.path {
        case "/healthz" where request.method != "POST" && request.method != "DELETE":
            finish(client, Self.text(200, "ok\n"), head: head)
        case "/readyz" where request.method != "POST" && request.method != "DELETE":
            // Only the failing check's name: the detail (an internal address, an errno text)
            // is for the log, not for anyone who can reach the probe.
            if let failure = readinessCheck() {
                finish(client, Self.text(503, "not ready: \(failure.check)\n"), head: head)
            } else {
                finish(client, Self.text(200, "ready\n"), head: head)
            }
        default:
            guard authorized(request, client: client, head: head) else { return }
            route(request, client: client, head: head)
        }
    }

    /// Whether the request carries the admin token (or the run token); otherwise it was answered
    /// 401 (no valid token) or 403 (a valid token that is not an admin token), counted by reason.
    private func authorized(_ request: HTTPRequest, client: Client, head: Bool) -> Bool {
        let presented = Self.bearer(request.header("Authorization"))
        let refusal: AccessRefusal
        if let access = options.access {
            switch access.checkAdmin(presented) {
            case .success: return true
            case .failure(let why): refusal = why
            }
        } else {
            if let runToken = options.runToken, !presented.isEmpty, HMAC.constantTimeEquals(presented, Array(runToken.utf8)) { return true }
            refusal = presented.isEmpty ? .missing : .badSignature
        }
        authFailures[refusal.label, default: 0] += 1
        logRefusal("admin: refused \(client.connection.remote) \(LogText.quoted(request.path, limit: 80)): \(refusal)")
        if refusal == .notAdmin {
            finish(client, HTTPResponse.error(HTTPError(403, "this needs an admin token (board-sync token --role admin)")), head: head)
        } else {
            var response = HTTPResponse.error(HTTPError(401, "access denied: send Authorization: Bearer <admin token>"))
            response.headers.append(("WWW-Authenticate", "Bearer realm=\"board-sync admin\""))
            finish(client, response, head: head)
        }
        return false
    }

    /// The token of `Authorization: Bearer TOKEN` (empty when missing or another scheme).
    static func bearer(_ value: String?) -> [UInt8] {
        guard let value else { return [] }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return [] }
        return Array(parts[1].trimmingCharacters(in: .whitespaces).utf8)
    }

    static let headers: [(name: String, value: String)] = [
        ("Cache-Control", "no-store"), ("Connection", "close"), ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"), ("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"),
        ("Referrer-Policy", "no-referrer"),
    ]

    static func text(_ status: Int, _ body: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers + [("Content-Type", "text/plain; charset=utf-8")], body: Array(body.utf8))
    }

    /// `Host` names this server: an IP address, `localhost`, or an allowed name (a port,
    /// when given, is ignored): the web view's rule against DNS rebinding.
    static func isAllowedHost(_ value: String?, allowed: [String]) -> Bool {
        guard let value, !value.isEmpty else { return false }
        var name = value.lowercased()
        if name.hasPrefix("[") {
            guard let close = name.firstIndex(of: "]") else { return false }
            var probe = in6_addr()
            return inet_pton(AF_INET6, String(name[name.index(after: name.startIndex)..<close]), &probe) == 1
        }
        if let colon = name.lastIndex(of: ":") {
            guard UInt16(name[name.index(after: colon)...]) != nil else { return false }
            name = String(name[..<colon])
        }
        if name.hasSuffix(".") { name.removeLast() }
        var probe = in_addr()
        if inet_pton(AF_INET, name, &probe) == 1 || name == "localhost" { return true }
        return allowed.contains { $0.lowercased() == name }
    }
}
