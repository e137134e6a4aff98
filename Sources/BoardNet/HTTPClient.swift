import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A small blocking HTTP/1.1 client for the operator's kit (S3 backups, webhooks): one request
/// per connection (`Connection: close`), plain or TLS (OpenSSL through `TLSStream`, verifying the
/// server against the system trust store), with a deadline over the whole exchange and a bound
/// on the response. Runs on the caller's thread: never call it on an event loop.
public struct HTTPClient: Sendable {
    public struct URLParts: Sendable, Equatable {
        public var tls: Bool
        public var host: String
        public var port: UInt16
        /// The path and query, starting with '/'.
        public var path: String

        /// Parses `http://HOST[:PORT][/PATH]` or `https://...` (no user info, no fragment).
        /// Errors name the URL as `redacting` shows it: a webhook's path and query may hold
        /// its secret.
        public init(_ text: String) throws {
            let shown = Self.redacting(text)
            let rest: Substring
            if text.hasPrefix("http://") { tls = false; rest = text.dropFirst(7) } else if text.hasPrefix("https://") { tls = true; rest = text.dropFirst(8) } else {
                throw HTTPClientError("'\(shown)' is not an http:// or https:// URL")
            }
            let authority = rest.prefix { $0 != "/" && $0 != "?" }
            var remainder = String(rest.dropFirst(authority.count))
            if remainder.isEmpty { remainder = "/" } else if remainder.hasPrefix("?") { remainder = "/" + remainder }
            guard !authority.isEmpty, !authority.contains("@"), !text.contains("#"), !text.contains(where: { $0.isWhitespace || $0.isNewline }) else {
                throw HTTPClientError("'\(shown)' is not a plain http(s)://HOST[:PORT]/PATH URL")
            }
            var host = String(authority)
            var port: UInt16 = tls ? 443 : 80
            if host.hasPrefix("[") {
                guard let close = host.firstIndex(of: "]") else { throw HTTPClientError("'\(shown)': unclosed '[' in the host") }
                let after = host[host.index(after: close)...]
                if after.hasPrefix(":") {
                    guard let number = UInt16(after.dropFirst()), number > 0 else { throw HTTPClientError("'\(shown)': bad port") }
                    port = number
                } else if !after.isEmpty { throw HTTPClientError("'\(shown)': bad host") }
                host = String(host[host.index(after: host.startIndex)..<close])
            } else if let colon = host.lastIndex(of: ":") {
                guard let number = UInt16(host[host.index(after: colon)...]), number > 0 else { throw HTTPClientError("'\(shown)': bad port") }
                port = number
                host = String(host[..<colon])
            }
            guard !host.isEmpty else { throw HTTPClientError("'\(shown)' has no host") }
            self.host = host
            self.port = port
            path = remainder
        }

        /// The URL for a log line or an error: scheme, host and port, and `/…` in place of a
        /// path or query (a webhook receiver's may carry its secret: Slack's, Zapier's).
        public var redacted: String {
            (tls ? "https://" : "http://") + hostHeader + (path == "/" ? "/" : "/…")
        }

        /// `text` (a URL that may not parse) as `redacted` shows one: the scheme and the host
        /// (cut to 200 characters, user info dropped), `/…` for anything after them.
        public static func redacting(_ text: String) -> String {
            let schemeEnd = text.range(of: "://")?.upperBound
            let rest = schemeEnd.map { text[$0...] } ?? text[...]
            let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            var shown = authority
            if let at = authority.lastIndex(of: "@") { shown = "…@" + authority[authority.index(after: at)...] }
            if shown.count > 200 { shown = shown.prefix(200) + "…" }
            let scheme = schemeEnd.map { String(text[..<$0].prefix(16)) } ?? ""
            return scheme + String(shown) + (rest.count > authority.count ? "/…" : "")
        }

        /// The `Host` header's value.
        public var hostHeader: String {
            let name = host.contains(":") ? "[\(host)]" : host
            return port == (tls ? 443 : 80) ? name : "\(name):\(port)"
        }
    }

    public struct Response: Sendable {
        public var status: Int
        /// Header names in lower case.
        public var headers: [String: String]
        public var body: [UInt8]
    }

    /// Seconds the whole exchange (connect, send, receive) may take.
    public var timeout: Double
    /// Largest response (head and body) read; beyond it the request fails.
    public var maxResponseBytes: Int
    /// TLS for https:// (nil: the system trust store, made on first use).
    public var tls: TLSContext?

    public init(timeout: Double = 30, maxResponseBytes: Int = 16 << 20, tls: TLSContext? = nil) {
        self.timeout = timeout
        self.maxResponseBytes = maxResponseBytes
        self.tls = tls
    }

    /// Sends one request and reads the whole response. `headers` must not hold Host,
    /// Content-Length or Connection (added here).
    public func request(_ method: String, _ url: URLParts, headers: [(String, String)] = [], body: [UInt8] = []) throws -> Response {
        let deadline = Date().timeIntervalSince1970 + timeout
        let socket = try Self.connect(url.host, url.port, deadline: deadline)
        defer { close(socket) }
        let request = try Self.requestHead(method, url, headers: headers, bodyCount: body.count) + body
        var reader = ResponseReader(limit: maxResponseBytes)
        var received = 0
        if url.tls {
            let stream = try (tls ?? TLSContext.client()).stream(host: url.host)
            try stream.start()
            try stream.send(request)
            try Self.send(socket, stream.takeOutput(), deadline: deadline)
            var closed = false
            while !closed {
                let chunk = try Self.receive(socket, deadline: deadline)
                if chunk.isEmpty { break }
                let (plain, ended) = try stream.receive(chunk)
                received += plain.count
                closed = ended
                try Self.send(socket, stream.takeOutput(), deadline: deadline)
                guard received <= maxResponseBytes + 65536 else { throw HTTPClientError("the response from \(url.hostHeader) is over \(maxResponseBytes) bytes") }
                if let response = try reader.feed(plain[...]) { return response }
            }
        } else {
            try Self.send(socket, request, deadline: deadline)
            while true {
                let chunk = try Self.receive(socket, deadline: deadline)
                if chunk.isEmpty { break }
                received += chunk.count
                guard received <= maxResponseBytes + 65536 else { throw HTTPClientError("the response from \(url.hostHeader) is over \(maxResponseBytes) bytes") }
                if let response = try reader.feed(chunk[...]) { return response }
            }
        }
        guard let response = try reader.finish() else {
            throw HTTPClientError("\(url.hostHeader) closed the connection before a whole response")
        }
        return response
    }

    // MARK: Parsing

    /// Interim (1xx) responses skipped before a final one.
    static let maxInterimResponses = 8

    /// A whole response in `raw`, or nil when more is needed (`complete`: the connection
    /// ended, so a body without a length runs to here). `request` feeds a `ResponseReader`
    /// read by read instead (HTTPClient+Reader.swift).
    static func parse(_ raw: [UInt8], limit: Int, complete: Bool) throws -> Response? {
        var reader = ResponseReader(limit: limit)
        if let response = try reader.feed(raw[...]) { return response }
        return complete ? try reader.finish() : nil
    }

    // MARK: Sockets

    static func remaining(_ deadline: Double) throws -> Int32 {
        let left = deadline - Date().timeIntervalSince1970
        guard left > 0 else { throw HTTPClientError("timed out", timedOut: true) }
        return Int32(min(left * 1000, 3_600_000)) + 1
    }

    static func connect(_ host: String, _ port: UInt16, deadline: Double) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw HTTPClientError("cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var lastError = "no address"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let info = entry {
            entry = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            guard fd >= 0 else { lastError = String(cString: strerror(errno)); continue }
            if Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) != 0, errno != EINPROGRESS {
                lastError = String(cString: strerror(errno))
                close(fd)
                continue
            }
            var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let polled = poll(&ready, 1, try remaining(deadline))
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if polled == 1, error == 0 {
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return fd
            }
            lastError = polled == 0 ? "timed out" : String(cString: strerror(error == 0 ? errno : error))
            close(fd)
        }
        throw HTTPClientError("cannot connect to \(host):\(port): \(lastError)")
    }

    static func send(_ fd: Int32, _ bytes: [UInt8], deadline: Double) throws {
        var offset = 0
        while offset < bytes.count {
            // Every pass, not only when the socket is full: a peer reading a byte at a time
            // must not stretch the exchange past its deadline.
            _ = try remaining(deadline)
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent > 0 { offset += sent; continue }
            guard sent < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                throw HTTPClientError("sending failed: \(String(cString: strerror(errno)))")
            }
            var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            guard poll(&ready, 1, try remaining(deadline)) >= 0 || errno == EINTR else { throw HTTPClientError("poll failed") }
        }
    }

    /// Some bytes, or none at the end of the stream.
    static func receive(_ fd: Int32, deadline: Double) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            // Every pass, not only when nothing is waiting: a peer trickling bytes must not
            // keep the exchange going past its deadline.
            _ = try remaining(deadline)
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { return Array(buffer[0..<count]) }
            if count == 0 { return [] }
            guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                throw HTTPClientError("receiving failed: \(String(cString: strerror(errno)))")
            }
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, try remaining(deadline)) >= 0 || errno == EINTR else { throw HTTPClientError("poll failed") }
        }
    }
}

public struct HTTPClientError: Error, CustomStringConvertible, Sendable {
    public var description: String
    /// The exchange passed its deadline (`HTTPClient.timeout`).
    public var timedOut: Bool
    public init(_ description: String, timedOut: Bool = false) {
        self.description = description
        self.timedOut = timedOut
    }
}
