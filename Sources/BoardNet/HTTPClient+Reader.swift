extension HTTPClient {
    /// Reads one response as its bytes arrive, in time linear in them: the head is scanned once
    /// (never again after a read), a body of known length copied once, and a chunked body decoded
    /// as it comes (each chunk-size line, chunk and trailer looked at once), however the bytes are
    /// split across reads. A hostile endpoint sending millions of 1-byte chunks costs what their
    /// bytes cost, and the request's deadline (checked on every read) ends it.
    struct ResponseReader {
        /// Longest response head, and longest trailer section, read.
        static let maxHeadBytes = 65536
        /// Longest chunk-size line (the size and any `;extensions`).
        static let maxChunkLineBytes = 4096

        private enum State {
            case head
            /// A body of known length: the bytes still to come.
            case body(Int)
            case chunkLine
            case chunkData(Int)
            /// The CRLF after a chunk's data: how many of its bytes came.
            case chunkEnd(Int)
            case trailers
            case untilClose
            case done
        }

        let limit: Int
        private var state = State.head
        private var interim = 0
        /// The head (or chunk-size line, or trailer section) read so far.
        private var pending: [UInt8] = []
        /// Bytes of `pending` already scanned for its end.
        private var scanned = 0
        private var status = 0
        private var headers: [String: String] = [:]
        private var body: [UInt8] = []

        init(limit: Int) { self.limit = limit }

        /// The response once its last byte is in (bytes after it are ignored), else nil.
        mutating func feed(_ bytes: ArraySlice<UInt8>) throws -> Response? {
            var index = bytes.startIndex
            while index < bytes.endIndex {
                switch state {
                case .done:
                    return response
                case .head:
                    // Up to the blank line; beyond it, what is left is fed again.
                    guard let end = try take(bytes, &index, until: [13, 10, 13, 10], max: Self.maxHeadBytes, what: "the response head is over 64 KiB") else { continue }
                    try readHead(Array(pending[..<end]))
                    pending = []
                    scanned = 0
                case .body(let left):
                    let count = min(left, bytes.endIndex - index)
                    body += bytes[index..<(index + count)]
                    index += count
                    state = left - count == 0 ? .done : .body(left - count)
                case .chunkLine:
                    guard let end = try take(bytes, &index, until: [13, 10], max: Self.maxChunkLineBytes, what: "a chunk-size line in the response is over \(Self.maxChunkLineBytes) bytes") else { continue }
                    let size = try chunkSize(pending[..<end])
                    pending = []
                    scanned = 0
                    state = size == 0 ? .trailers : .chunkData(size)
                case .chunkData(let left):
                    let count = min(left, bytes.endIndex - index)
                    body += bytes[index..<(index + count)]
                    index += count
                    state = left - count == 0 ? .chunkEnd(0) : .chunkData(left - count)
                case .chunkEnd(let seen):
                    guard bytes[index] == (seen == 0 ? 13 : 10) else { throw HTTPClientError("a chunk in the response does not end with CRLF") }
                    index += 1
                    state = seen == 0 ? .chunkEnd(1) : .chunkLine
                case .trailers:
                    // Trailer fields (ignored) up to a blank line: the section ends with CRLF
                    // when there are none, else with CRLF CRLF.
                    pending.append(bytes[index])
                    index += 1
                    if pending.count == 2, pending == [13, 10] { state = .done; break }
                    if pending.count >= 4, pending.suffix(4).elementsEqual([13, 10, 13, 10]) { state = .done; break }
                    guard pending.count <= Self.maxHeadBytes else { throw HTTPClientError("the response's trailers are over 64 KiB") }
                case .untilClose:
                    let count = bytes.endIndex - index
                    guard count <= limit - body.count else { throw HTTPClientError("the response body is over the limit of \(limit) bytes") }
                    body += bytes[index...]
                    index = bytes.endIndex
                }
            }
            if case .done = state { return response }
            return nil
        }

        /// The connection ended: the response, nil when none began, or an error when one was
        /// cut short.
        mutating func finish() throws -> Response? {
            switch state {
            case .done, .untilClose: return response
            case .head:
                if pending.count > Self.maxHeadBytes { throw HTTPClientError("the response head is over 64 KiB") }
                return nil
            case .body(let left):
                throw HTTPClientError("the response body was cut short (\(body.count) of \(body.count + left) bytes)")
            case .chunkLine, .chunkData, .chunkEnd, .trailers:
                throw HTTPClientError("a chunked response was cut short")
            }
        }

        private var response: Response { Response(status: status, headers: headers, body: body) }

        /// Moves bytes into `pending` up to and including `terminator`; the offset in `pending`
        /// where the terminator begins, or nil when `bytes` ran out first. Each byte is scanned
        /// once, across calls; `pending` never grows past `max` and the terminator.
        private mutating func take(_ bytes: ArraySlice<UInt8>, _ index: inout Int, until terminator: [UInt8], max: Int, what: String) throws -> Int? {
            let room = Swift.max(max + terminator.count - pending.count, 0)
            let count = Swift.min(bytes.endIndex - index, room)
            pending += bytes[index..<(index + count)]
            // Resume the scan a terminator's length back (it may straddle two reads).
            var position = Swift.max(scanned - (terminator.count - 1), 0)
            while position + terminator.count <= pending.count {
                if pending[position] == terminator[0], pending[position..<(position + terminator.count)].elementsEqual(terminator) {
                    let consumed = position + terminator.count
                    // What followed the terminator is left for the next state.
                    index += count - (pending.count - consumed)
                    pending.removeSubrange(consumed...)
                    scanned = consumed
                    return position
                }
                position += 1
            }
            scanned = pending.count
            index += count
            guard pending.count <= max else { throw HTTPClientError(what) }
            return nil
        }

        /// A chunk-size line's size (hex digits, then optional whitespace and `;extensions`),
        /// refused past what the body may still hold (never computed past it: no overflow).
        private func chunkSize(_ line: ArraySlice<UInt8>) throws -> Int {
            var size = 0
            var digits = 0
            var index = line.startIndex
            while index < line.endIndex, line[index] == 32 || line[index] == 9 { index += 1 }
            while index < line.endIndex {
                let byte = line[index]
                let value: Int
                switch byte {
                case 48...57: value = Int(byte) - 48
                case 97...102: value = Int(byte) - 87
                case 65...70: value = Int(byte) - 55
                default: value = -1
                }
                if value < 0 { break }
                let room = limit - body.count - value
                guard room >= 0, size <= room / 16 else { throw HTTPClientError("the response body is over the limit of \(limit) bytes") }
                size = size * 16 + value
                digits += 1
                index += 1
            }
            while index < line.endIndex, line[index] == 32 || line[index] == 9 { index += 1 }
            guard digits > 0, index == line.endIndex || line[index] == UInt8(ascii: ";") else { throw HTTPClientError("bad chunk size in the response") }
            return size
        }

        private mutating func readHead(_ head: [UInt8]) throws {
            let (status, headers) = try HTTPClient.parseHead(head[...])
            if (100..<200).contains(status) {
                // An interim response (100 Continue): skip it, a few at most.
                guard interim < HTTPClient.maxInterimResponses else { throw HTTPClientError("more than \(HTTPClient.maxInterimResponses) interim (1xx) responses") }
                interim += 1
                return
            }
            self.status = status
            self.headers = headers
            if let length = headers["content-length"] {
                guard let count = Int(length), count >= 0 else { throw HTTPClientError("bad Content-Length '\(length)'") }
                guard count <= limit else { throw HTTPClientError("the response body is \(count) bytes, over the limit of \(limit)") }
                state = count == 0 ? .done : .body(count)
            } else if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
                state = .chunkLine
            } else if status == 204 || status == 304 {
                state = .done
            } else {
                state = .untilClose
            }
        }
    }
}
