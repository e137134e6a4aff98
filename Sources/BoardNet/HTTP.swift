import Foundation

/// HTTP/1.1 request heads, parsed sans-IO with limits (for `serve --web`: its page, images and
/// the WebSocket upgrade). Bytes go in as they arrive; a complete head comes out, or an
/// `HTTPError` naming the status to answer with. Strict where leniency lets a request mean two
/// things to two parsers (request smuggling): CRLF line ends only, no folded headers, no space
/// before a header's colon, one Content-Length at most and no Transfer-Encoding.
public struct HTTPRequest: Equatable, Sendable {
    public var method: String
    /// The request target as sent (origin form: a path, maybe with a query).
    public var target: String
    /// "HTTP/1.1" or "HTTP/1.0".
    public var version: String
    /// Header fields in order, names as sent.
    public var headers: [(name: String, value: String)]

    public init(method: String, target: String, version: String, headers: [(name: String, value: String)]) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }

    /// The value of the first field named `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }

    /// Every comma-separated token of every field named `name`, lowercased (`Connection`, `Upgrade`).
    public func tokens(_ name: String) -> [String] {
        let wanted = name.lowercased()
        return headers.filter { $0.name.lowercased() == wanted }
            .flatMap { $0.value.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty }
    }

    /// The path without its query, percent-decoding not applied.
    public var path: String { String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]) }

    /// The query's `name=value` pairs, percent-decoded ('+' as a space).
    public var query: [String: String] {
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return [:] }
        var result: [String: String] = [:]
        for pair in parts[1].split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text) }
            if let name = kv.first { result[decode(name)] = kv.count == 2 ? decode(kv[1]) : "" }
        }
        return result
    }

    public static func == (a: HTTPRequest, b: HTTPRequest) -> Bool {
        a.method == b.method && a.target == b.target && a.version == b.version
            && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
    }
}

/// Why a request was refused, and the status to answer with before closing.
public struct HTTPError: Error, Equatable, Sendable, CustomStringConvertible {
    public var status: Int
    public var reason: String

    public init(_ status: Int, _ reason: String) {
        self.status = status
        self.reason = reason
    }

    public var description: String { "\(status) \(HTTPResponse.phrase(status)): \(reason)" }
}

public struct HTTPLimits: Sendable {
    /// The whole head (request line and fields).
    public var maxHead = 16 << 10
    /// The request line (431 covers fields, 414 the target).
    public var maxRequestLine = 8 << 10
    public var maxHeaders = 64
    /// A request body (Content-Length); none of the web view's requests need one.
    public var maxBody = 0

    public init() {}
}

/// Parses one request head at a time from a byte stream (keep-alive connections parse again
/// with the bytes left over).
public struct HTTPRequestParser: Sendable {
    public let limits: HTTPLimits
    private var buffer: [UInt8] = []
    /// How far `buffer` was searched for the head's end without finding it (each byte is
    /// looked at once however the head is split into segments).
    private var scanned = 0
    /// Empty lines skipped before the current head (counted toward `maxHead`).
    private var blankLines = 0

    public init(limits: HTTPLimits = HTTPLimits()) {
        self.limits = limits
    }

    /// Bytes received and not yet part of a returned request (a body, the next request, or the
    /// first WebSocket frames after an upgrade).
    public var remaining: [UInt8] { buffer }

    /// Takes the bytes that follow a parsed head (for the caller to hand to the next protocol).
    public mutating func takeRemaining() -> [UInt8] {
        defer { buffer = []; scanned = 0 }
        return buffer
    }

    /// Feeds bytes; returns a request once its head is complete (nil: need more). Throws
    /// `HTTPError` for a malformed or oversized head; the connection should answer and close.
    public mutating func append(_ bytes: [UInt8]) throws(HTTPError) -> HTTPRequest? {
        buffer += bytes
        return try next()
    }

    /// The next complete head in what was fed, if any.
    public mutating func next() throws(HTTPError) -> HTTPRequest? {
        // Leading empty lines before a request are allowed (RFC 9112 §2.2), dropped in one go
        // and counted toward the head's limit: a stream of CRLFs is refused like any
        // oversized head, not stripped two bytes at a time forever.
        var blank = 0
        while blank + 1 < buffer.count, buffer[blank] == 13, buffer[blank + 1] == 10 { blank += 2 }
        if blank > 0 {
            buffer.removeFirst(blank)
            blankLines += blank
            scanned = 0
        }
        if blankLines > limits.maxHead { throw HTTPError(400, "over \(limits.maxHead) bytes of empty lines before a request") }
        guard let end = headEnd() else {
            if buffer.count > limits.maxHead { throw HTTPError(431, "the request head is over \(limits.maxHead) bytes") }
            // Only the first maxRequestLine + 1 bytes can tell (never a scan of the whole buffer).
            if buffer.count > limits.maxRequestLine, !buffer.prefix(limits.maxRequestLine + 1).contains(10) {
                throw HTTPError(414, "the request line is over \(limits.maxRequestLine) bytes")
            }
            return nil
        }
        guard end <= limits.maxHead else { throw HTTPError(431, "the request head is over \(limits.maxHead) bytes") }
        let head = Array(buffer[..<end])
        buffer.removeFirst(end + 4)
        scanned = 0
        blankLines = 0
        let request = try Self.parse(head, limits: limits)
        return request
    }

    /// Where the head's blank line starts, searching only what was not searched before.
    private mutating func headEnd() -> Int? {
        var index = max(0, scanned - 3)
        while index + 3 < buffer.count {
            if buffer[index] == 13, buffer[index + 1] == 10, buffer[index + 2] == 13, buffer[index + 3] == 10 { return index }
            index += 1
        }
        scanned = buffer.count
        return nil
    }

    private static func parse(_ head: [UInt8], limits: HTTPLimits) throws(HTTPError) -> HTTPRequest {
        // Lines end in CRLF; a bare CR or LF inside the head is refused.
        var lines: [ArraySlice<UInt8>] = []
        var start = 0
        var index = 0
        while index < head.count {
            if head[index] == 13 {
                guard index + 1 < head.count, head[index + 1] == 10 else { throw HTTPError(400, "a bare CR in the request head") }
                lines.append(head[start..<index])
                index += 2
                start = index
            } else if head[index] == 10 {
                throw HTTPError(400, "a bare LF in the request head (lines end in CRLF)")
            } else if head[index] == 0 {
                throw HTTPError(400, "a NUL byte in the request head")
            } else {
                index += 1
            }
        }
        lines.append(head[start..<head.count])
        let requestLine = lines.removeFirst()
        guard requestLine.count <= limits.maxRequestLine else { throw HTTPError(414, "the request line is over \(limits.maxRequestLine) bytes") }
        let parts = requestLine.split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw HTTPError(400, "the request line is not 'METHOD target HTTP/1.1'") }
        let method = String(decoding: parts[0], as: UTF8.self)
        guard !method.isEmpty, parts[0].allSatisfy(isTokenByte) else { throw HTTPError(400, "the method is not a token") }
        guard let target = String(validating: parts[1], as: UTF8.self), target.hasPrefix("/"),
              parts[1].allSatisfy({ $0 > 32 && $0 < 127 }) else {
            throw HTTPError(400, "the request target must be a path starting with '/' (printable ASCII)")
        }
        let version = String(decoding: parts[2], as: UTF8.self)
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            throw HTTPError(version.hasPrefix("HTTP/") ? 505 : 400, "HTTP version '\(version.prefix(16))' is not supported")
        }
        guard lines.count <= limits.maxHeaders else { throw HTTPError(431, "more than \(limits.maxHeaders) header fields") }
        var headers: [(name: String, value: String)] = []
        for line in lines {
            guard let first = line.first else { throw HTTPError(400, "an empty header line") }
            guard first != 32, first != 9 else { throw HTTPError(400, "a folded header line (obsolete line folding is refused)") }
            guard let colon = line.firstIndex(of: 58) else { throw HTTPError(400, "a header line without ':'") }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else {
                throw HTTPError(400, "header name '\(String(decoding: name.prefix(40), as: UTF8.self))' is not a token (no space before ':')")
            }
            let rawValue = line[(colon + 1)...]
            guard rawValue.allSatisfy({ $0 == 9 || $0 >= 32 && $0 != 127 }) else { throw HTTPError(400, "a control byte in a header value") }
            let value = String(decoding: rawValue, as: UTF8.self).trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            headers.append((String(decoding: name, as: UTF8.self), value))
        }
        let request = HTTPRequest(method: method, target: target, version: version, headers: headers)
        if !request.tokens("Transfer-Encoding").isEmpty {
            throw HTTPError(501, "Transfer-Encoding is not supported")
        }
        let lengths = headers.filter { $0.name.lowercased() == "content-length" }.map(\.value)
        if lengths.count > 1 { throw HTTPError(400, "more than one Content-Length") }
        if let length = lengths.first {
            guard let value = Int(length), value >= 0, length.allSatisfy(\.isASCII) else { throw HTTPError(400, "Content-Length '\(length.prefix(20))' is not a number") }
            guard value <= limits.maxBody else { throw HTTPError(413, "a request body of \(value) bytes (at most \(limits.maxBody))") }
        }
        if version == "HTTP/1.1", request.header("Host") == nil { throw HTTPError(400, "an HTTP/1.1 request without Host") }
        return request
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }
}

/// A response head (and body) in bytes.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A plain-text answer to a refused request (closes the connection).
    public static func error(_ error: HTTPError) -> HTTPResponse {
        HTTPResponse(status: error.status, headers: [("Content-Type", "text/plain; charset=utf-8"), ("Connection", "close"),
                                                     ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"),
                                                     ("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"),
                                                     ("Referrer-Policy", "no-referrer")],
                     body: Array("\(error.reason)\n".utf8))
    }

    /// The response in bytes; without the body for a HEAD request (its Content-Length still
    /// the body's).
    public func encoded(includingBody: Bool = true) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(HTTPResponse.phrase(status))\r\n"
        var names = Set<String>()
        for (name, value) in headers {
            names.insert(name.lowercased())
            head += "\(name): \(value)\r\n"
        }
        if status != 101, status != 204, status != 304, !names.contains("content-length") { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        return includingBody ? Array(head.utf8) + body : Array(head.utf8)
    }

    public static func phrase(_ status: Int) -> String {
        switch status {
        case 101: return "Switching Protocols"
        case 200: return "OK"
        case 204: return "No Content"
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 421: return "Misdirected Request"
        case 426: return "Upgrade Required"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 503: return "Service Unavailable"
        case 505: return "HTTP Version Not Supported"
        default: return "Status"
        }
    }
}
