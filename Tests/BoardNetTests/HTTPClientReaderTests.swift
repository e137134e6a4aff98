@testable import BoardNet
import Foundation
import Testing

/// The server's HTTP client (S3 backups, webhooks) against an endpoint that trickles: found by
/// review, a body of millions of 1-byte chunks was parsed again from its start after every read
/// (quadratic) and the deadline was looked at only when no byte was waiting, so a backup run
/// never ended. The response is now read as it comes (`HTTPClient.ResponseReader`, linear) and
/// the deadline checked on every read.
@Suite struct HTTPClientReaderTests {
    /// Feeds `raw` to a reader in the given piece sizes (cycled), then ends the connection.
    static func read(_ raw: [UInt8], pieces: [Int], limit: Int = 1 << 30) throws -> HTTPClient.Response? {
        var reader = HTTPClient.ResponseReader(limit: limit)
        var offset = 0
        var piece = 0
        while offset < raw.count {
            let count = min(max(pieces[piece % pieces.count], 1), raw.count - offset)
            piece += 1
            if let response = try reader.feed(raw[offset..<(offset + count)]) { return response }
            offset += count
        }
        return try reader.finish()
    }

    /// An endpoint that sends 1-byte chunks as fast as it can, without end: the request fails
    /// with a timeout (not a completed body, not "cut short" when the endpoint gives up).
    @Test func aTricklingEndpointTimesOut() throws {
        let endpoint = try FakeHTTPEndpoint { _, send in
            guard send(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)[...]) else { return }
            let piece = Array(String(repeating: "1\r\nA\r\n", count: 2000).utf8)
            let end = Date().addingTimeInterval(120)
            while Date() < end, send(piece[...]) {}
        }
        defer { endpoint.stop() }
        let client = HTTPClient(timeout: 0.5, maxResponseBytes: 1 << 40)
        var caught: HTTPClientError?
        do {
            let response = try client.request("GET", try HTTPClient.URLParts(endpoint.url + "/bucket?list-type=2"))
            Issue.record("a response of \(response.body.count) bytes from an endpoint that never ends one")
        } catch let error as HTTPClientError {
            caught = error
        }
        #expect(caught?.timedOut == true, "\(String(describing: caught))")
    }

    /// A large body of 1-byte chunks, with chunk extensions and trailers, decodes to its bytes
    /// whether it arrives whole, a byte at a time or in reads of 64 KiB.
    @Test func aLargeBodyOfOneByteChunksDecodes() throws {
        var body: [UInt8] = []
        var raw = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        for index in 0..<200_000 {
            let byte = UInt8(truncatingIfNeeded: index &* 31 &+ 7)
            body.append(byte)
            raw += Array((index % 7 == 0 ? "1;ext=\"v\"\r\n" : "1\r\n").utf8) + [byte] + [13, 10]
        }
        raw += Array("0;last\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n".utf8)
        #expect(try HTTPClient.parse(raw, limit: 1 << 20, complete: false)?.body == body)
        #expect(try Self.read(raw, pieces: [65536])?.body == body)
        #expect(try Self.read(raw, pieces: [1])?.body == body)
        // Trailers are read to their end before the response is whole.
        #expect(try HTTPClient.parse(Array(raw.dropLast(2)), limit: 1 << 20, complete: false) == nil)
        #expect(throws: HTTPClientError.self) { try HTTPClient.parse(Array(raw.dropLast(2)), limit: 1 << 20, complete: true) }
    }

    /// What the reader refuses, each with an error: a chunk not ended by CRLF, a bad or endless
    /// chunk-size line, a head without end, a body past the limit, a cut-short body.
    @Test func malformedBodiesAreRefused() throws {
        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        let cases: [(String, [UInt8])] = [
            ("no CRLF after a chunk", Array((head + "1\r\nAB\r\n0\r\n\r\n").utf8)),
            ("a size that is not hex", Array((head + "zz\r\nA\r\n0\r\n\r\n").utf8)),
            ("no size at all", Array((head + ";ext\r\nA\r\n0\r\n\r\n").utf8)),
            ("an endless size line", Array((head + String(repeating: "0", count: 5000)).utf8)),
            ("a body past the limit", Array((head + "401\r\n").utf8)),
            ("a head without end", Array(("HTTP/1.1 200 OK\r\n" + String(repeating: "X: y\r\n", count: 20_000)).utf8)),
            ("a length past the limit", Array("HTTP/1.1 200 OK\r\nContent-Length: 1025\r\n\r\n".utf8)),
        ]
        for (what, raw) in cases {
            #expect(throws: HTTPClientError.self, "\(what)") { try HTTPClient.parse(raw, limit: 1024, complete: false) }
            #expect(throws: HTTPClientError.self, "\(what), a byte at a time") { try Self.read(raw, pieces: [1], limit: 1024) }
        }
        let short = Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".utf8)
        #expect(try HTTPClient.parse(short, limit: 1024, complete: false) == nil)
        #expect(throws: HTTPClientError.self) { try HTTPClient.parse(short, limit: 1024, complete: true) }
        // A leading-zero size is still a size; a size exactly at the limit is allowed.
        let exact = Array((head + "0400\r\n" + String(repeating: "A", count: 1024) + "\r\n0\r\n\r\n").utf8)
        #expect(try HTTPClient.parse(exact, limit: 1024, complete: false)?.body.count == 1024)
    }

    /// One random response (a length, chunks with extensions and trailers, a body to the end of
    /// the connection, a 204; after 0-3 interim answers), delivered in random read sizes, reads
    /// as it does whole.
    @Test(arguments: [UInt64(1), 2, 3, 42, 0xB0A2D])
    func randomSplitsReadTheSame(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        for round in 0..<60 {
            var raw: [UInt8] = []
            for _ in 0..<Int.random(in: 0...3, using: &random) { raw += Array("HTTP/1.1 100 Continue\r\n\r\n".utf8) }
            let body = (0..<Int.random(in: 0...3000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            let kind = Int.random(in: 0...3, using: &random)
            var expected = body
            switch kind {
            case 0:
                raw += Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body
            case 1:
                raw += Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
                var offset = 0
                while offset < body.count {
                    let size = min(Int.random(in: 1...300, using: &random), body.count - offset)
                    let extensions = Bool.random(using: &random) ? ";a=b;c" : ""
                    raw += Array((String(size, radix: 16, uppercase: Bool.random(using: &random)) + extensions + "\r\n").utf8)
                    raw += body[offset..<(offset + size)] + [13, 10]
                    offset += size
                }
                raw += Array(("0\r\n" + (Bool.random(using: &random) ? "X-Trailer: t\r\n" : "") + "\r\n").utf8)
            case 2:
                raw += Array("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8) + body
            default:
                raw += Array("HTTP/1.1 204 No Content\r\n\r\n".utf8)
                expected = []
            }
            let whole = try HTTPClient.parse(raw, limit: 1 << 20, complete: true)
            let pieces = (0..<16).map { _ in Int.random(in: 1...(Bool.random(using: &random) ? 8 : 700), using: &random) }
            let split = try Self.read(raw, pieces: pieces, limit: 1 << 20)
            #expect(whole?.body == expected, "seed \(seed) round \(round) kind \(kind)")
            #expect(split?.body == expected && split?.status == whole?.status && split?.headers == whole?.headers,
                    "seed \(seed) round \(round) kind \(kind) pieces \(pieces)")
        }
    }
}
