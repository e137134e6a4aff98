import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Responses whose bodies are never held whole: a backup restored from S3, an admin export.
extension HTTPClient {
    /// Sends one request; a 2xx answer's body is handed to `sink` piece by piece as it arrives
    /// (at most `maxBody` bytes in all), any other answer's body is collected (at most
    /// `maxResponseBytes`) into the returned response's `body` (an error to show). A body the
    /// connection ended inside (short of its Content-Length, or of a chunked body's last chunk)
    /// is an error saying how much came; a body without either runs to the connection's end.
    public func request(_ method: String, _ url: URLParts, headers: [(String, String)] = [], body: [UInt8] = [],
                        maxBody: Int, streamingTo sink: ([UInt8]) throws -> Void) throws -> Response {
        let exchange = try Exchange(self, url)
        try exchange.send(try Self.requestHead(method, url, headers: headers, bodyCount: body.count) + body)
        var raw: [UInt8] = []
        var interim = 0
        var status = 0
        var responseHeaders: [String: String] = [:]
        while true {
            if let end = raw.firstRange(of: [13, 10, 13, 10]) {
                (status, responseHeaders) = try Self.parseHead(raw[..<end.lowerBound])
                raw = Array(raw[end.upperBound...])
                guard (100..<200).contains(status) else { break }
                interim += 1
                guard interim <= Self.maxInterimResponses else { throw HTTPClientError("more than \(Self.maxInterimResponses) interim (1xx) responses") }
                continue
            }
            guard raw.count <= 65536 else { throw HTTPClientError("the response head is over 64 KiB") }
            let chunk = try exchange.receive()
            guard !chunk.isEmpty else { throw HTTPClientError("\(url.hostHeader) closed the connection before a whole response") }
            raw += chunk
        }
        let success = (200..<300).contains(status)
        let limit = success ? maxBody : maxResponseBytes
        var collected: [UInt8] = []
        var delivered = 0
        func deliver(_ bytes: ArraySlice<UInt8>) throws {
            guard !bytes.isEmpty else { return }
            // Compared without adding: a peer's count near Int.max must not overflow.
            guard bytes.count <= limit - delivered else { throw HTTPClientError("the response body is over the limit of \(limit) bytes") }
            delivered += bytes.count
            if success { try sink(Array(bytes)) } else { collected += bytes }
        }
        if status == 204 || status == 304 || method == "HEAD" { return Response(status: status, headers: responseHeaders, body: []) }
        if let text = responseHeaders["content-length"] {
            guard let length = Int(text), length >= 0 else { throw HTTPClientError("bad Content-Length '\(text.prefix(40))'") }
            guard length <= limit else { throw HTTPClientError("the response body is \(length) bytes, over the limit of \(limit)") }
            var pending = raw[...]
            while true {
                try deliver(pending.prefix(length - delivered))
                if delivered == length { break }
                let chunk = try exchange.receive()
                guard !chunk.isEmpty else { throw HTTPClientError("the response body was cut short (\(delivered) of \(length) bytes)") }
                pending = chunk[...]
            }
        } else if responseHeaders["transfer-encoding"]?.lowercased().contains("chunked") == true {
            var buffer = raw
            var position = 0
            func more() throws {
                let chunk = try exchange.receive()
                guard !chunk.isEmpty else { throw HTTPClientError("a chunked response was cut short (after \(delivered) bytes of body)") }
                buffer = Array(buffer[position...]) + chunk
                position = 0
            }
            while true {
                guard let lineEnd = buffer[position...].firstRange(of: [13, 10]) else {
                    guard buffer.count - position <= 4096 else { throw HTTPClientError("bad chunk size in the response") }
                    try more()
                    continue
                }
                let sizeText = String(decoding: buffer[position..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
                guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0 else {
                    throw HTTPClientError("bad chunk size in the response")
                }
                guard size <= limit - delivered else { throw HTTPClientError("the response body is over the limit of \(limit) bytes") }
                position = lineEnd.upperBound
                if size == 0 { break }  // trailers, if any, are not read
                var left = size
                while left > 0 {
                    if position == buffer.count { try more() }
                    let take = min(left, buffer.count - position)
                    try deliver(buffer[position..<(position + take)])
                    position += take
                    left -= take
                }
                while buffer.count - position < 2 { try more() }
                position += 2
                buffer = Array(buffer[position...])
                position = 0
            }
        } else {
            try deliver(raw[...])
            while true {
                let chunk = try exchange.receive()
                if chunk.isEmpty { break }
                try deliver(chunk[...])
            }
        }
        return Response(status: status, headers: responseHeaders, body: collected)
    }

    static func requestHead(_ method: String, _ url: URLParts, headers: [(String, String)], bodyCount: Int) throws -> [UInt8] {
        var head = "\(method) \(url.path) HTTP/1.1\r\nHost: \(url.hostHeader)\r\nConnection: close\r\n"
        for (name, value) in headers {
            guard !name.contains(where: { $0 == "\r" || $0 == "\n" || $0 == ":" }), !value.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                throw HTTPClientError("a header holds a line break")
            }
            head += "\(name): \(value)\r\n"
        }
        if bodyCount > 0 || method == "PUT" || method == "POST" { head += "Content-Length: \(bodyCount)\r\n" }
        head += "\r\n"
        return Array(head.utf8)
    }

    static func parseHead(_ bytes: ArraySlice<UInt8>) throws -> (status: Int, headers: [String: String]) {
        var lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]), (100...599).contains(status) else {
            throw HTTPClientError("not an HTTP response: '\(statusLine.prefix(80))'")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers)
    }

    /// One connection, plain or TLS: bytes out, bytes in, under the client's deadline.
    final class Exchange {
        let socket: Int32
        let stream: TLSStream?
        let deadline: Double
        private var ended = false

        init(_ client: HTTPClient, _ url: URLParts) throws {
            deadline = Date().timeIntervalSince1970 + client.timeout
            socket = try HTTPClient.connect(url.host, url.port, deadline: deadline)
            do {
                if url.tls {
                    let stream = try (client.tls ?? TLSContext.client()).stream(host: url.host)
                    try stream.start()
                    self.stream = stream
                } else {
                    stream = nil
                }
            } catch {
                close(socket)
                throw error
            }
        }

        deinit { close(socket) }

        func send(_ bytes: [UInt8]) throws {
            guard let stream else { return try HTTPClient.send(socket, bytes, deadline: deadline) }
            try stream.send(bytes)
            try HTTPClient.send(socket, stream.takeOutput(), deadline: deadline)
        }

        /// Some bytes of the answer, or none at its end.
        func receive() throws -> [UInt8] {
            while !ended {
                let chunk = try HTTPClient.receive(socket, deadline: deadline)
                if chunk.isEmpty { ended = true; break }
                guard let stream else { return chunk }
                let (plain, closed) = try stream.receive(chunk)
                ended = closed
                try HTTPClient.send(socket, stream.takeOutput(), deadline: deadline)
                if !plain.isEmpty { return plain }
            }
            return []
        }
    }
}
