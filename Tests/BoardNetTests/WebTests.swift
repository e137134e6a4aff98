import BoardNet
import Foundation
import Testing

/// The HTTP request parser (limits, and refusals of what request smuggling relies on) and the
/// WebSocket handshake and framing (RFC 6455): fragmentation at every split, masking, control
/// frames between fragments, oversized frames, bad UTF-8, the close handshake.
@Suite struct HTTPParserTests {
    static let upgrade = "GET /ws/plans?token=a%2Bb&x HTTP/1.1\r\nHost: 127.0.0.1:7421\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

    @Test func aRequestHeadArrivesInAnySplitAndLeavesWhatFollows() throws {
        let bytes = Array(Self.upgrade.utf8) + [0x81, 0x80]
        for split in 0...bytes.count {
            var parser = HTTPRequestParser()
            var request = try parser.append(Array(bytes[..<split]))
            if request == nil { request = try parser.append(Array(bytes[split...])) } else { _ = try parser.append(Array(bytes[split...])) }
            let parsed = try #require(request, "split \(split)")
            #expect(parsed.method == "GET" && parsed.path == "/ws/plans" && parsed.version == "HTTP/1.1")
            #expect(parsed.query == ["token": "a+b", "x": ""])
            #expect(parsed.tokens("connection") == ["keep-alive", "upgrade"])
            #expect(parser.takeRemaining() == [0x81, 0x80], "the first WebSocket bytes stay for the next protocol")
        }
    }

    @Test func malformedRequestsAreRefusedWithTheirStatus() throws {
        func status(_ text: String, limits: HTTPLimits = HTTPLimits()) -> Int? {
            var parser = HTTPRequestParser(limits: limits)
            do {
                _ = try parser.append(Array(text.utf8))
                return nil
            } catch {
                return error.status
            }
        }
        #expect(status("GET / HTTP/1.1\r\nHost: a\r\n\r\n") == nil)
        #expect(status("GET / HTTP/1.0\r\n\r\n") == nil, "HTTP/1.0 needs no Host")
        #expect(status("GET / HTTP/1.1\r\n\r\n") == 400, "HTTP/1.1 without Host")
        #expect(status("GET / HTTP/2.0\r\nHost: a\r\n\r\n") == 505)
        #expect(status("GET / FTP/1.1\r\nHost: a\r\n\r\n") == 400)
        #expect(status("GET /  HTTP/1.1\r\nHost: a\r\n\r\n") == 400, "two spaces")
        #expect(status("GET http://evil/ HTTP/1.1\r\nHost: a\r\n\r\n") == 400, "absolute form")
        #expect(status("G(T / HTTP/1.1\r\nHost: a\r\n\r\n") == 400, "method not a token")
        #expect(status("GET / HTTP/1.1\nHost: a\r\n\r\n") == 400, "bare LF")
        #expect(status("GET / HTTP/1.1\r\nHost : a\r\n\r\n") == 400, "space before the colon")
        #expect(status("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n") == 400, "obsolete folding")
        #expect(status("GET / HTTP/1.1\r\nHost a\r\n\r\n") == 400, "no colon")
        #expect(status("GET / HTTP/1.1\r\nHost: a\u{1}b\r\n\r\n") == 400, "control byte")
        #expect(status("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n") == 501)
        #expect(status("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n") == 400, "two lengths")
        #expect(status("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n") == 400)
        #expect(status("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n") == 413, "no bodies by default")
        #expect(status("GET /" + String(repeating: "a", count: 9000)) == 414, "a request line that never ends")
        #expect(status("GET / HTTP/1.1\r\nHost: a\r\n" + String(repeating: "X: y\r\n", count: 65) + "\r\n") == 431)
        #expect(status("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "y", count: 17_000)) == 431, "a head that never ends")
    }

    @Test func responsesCarryTheirLength() {
        let text = String(decoding: HTTPResponse(status: 404, headers: [("Content-Type", "text/plain")], body: Array("no".utf8)).encoded(), as: UTF8.self)
        #expect(text == "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nno")
    }
}

@Suite struct WebSocketTests {
    static let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]

    @Test func theHandshakeAnswersWithRFC6455sAcceptValue() throws {
        // RFC 6455 §1.3's example.
        #expect(WebSocket.acceptValue(for: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        var parser = HTTPRequestParser()
        let request = try #require(try parser.append(Array(HTTPParserTests.upgrade.utf8)))
        let response = try WebSocket.handshake(request).get()
        let text = String(decoding: response.encoded(), as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 101 Switching Protocols\r\n"))
        #expect(text.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"))
        #expect(!text.contains("Content-Length"))
        func refused(_ edit: (String) -> String) throws -> Int? {
            var parser = HTTPRequestParser()
            let request = try #require(try parser.append(Array(edit(HTTPParserTests.upgrade).utf8)))
            if case .failure(let error) = WebSocket.handshake(request) { return error.status }
            return nil
        }
        #expect(try refused { $0.replacingOccurrences(of: "Version: 13", with: "Version: 8") } == 426)
        #expect(try refused { $0.replacingOccurrences(of: "Upgrade: websocket", with: "Upgrade: h2c") } == 400)
        #expect(try refused { $0.replacingOccurrences(of: "keep-alive, Upgrade", with: "keep-alive") } == 400)
        #expect(try refused { $0.replacingOccurrences(of: "dGhlIHNhbXBsZSBub25jZQ==", with: "c2hvcnQ=") } == 400)
        #expect(try refused { $0.replacingOccurrences(of: "GET", with: "POST") } == 405)
    }

    @Test func messagesArriveWhateverTheSplitWithControlFramesBetweenFragments() {
        let big = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let stream = WebSocket.frame(.text, Array("héllo ".utf8), fin: false, mask: Self.mask)
            + WebSocket.frame(.ping, [1, 2], mask: Self.mask)
            + WebSocket.frame(.continuation, Array("wörld".utf8), mask: Self.mask)
            + WebSocket.frame(.binary, Array(big[..<300]), mask: Self.mask)
            + WebSocket.frame(.binary, big, mask: Self.mask)
        for split in [0, 1, 2, 5, 9, 20, 40, 300, 1000, stream.count - 1, stream.count] {
            var connection = WebSocketConnection()
            let events = connection.receive(Array(stream[..<split])) + connection.receive(Array(stream[split...]))
            #expect(events == [.text("héllo wörld"), .binary(Array(big[..<300])), .binary(big)], "split \(split)")
            #expect(connection.takeOutput() == WebSocket.frame(.pong, [1, 2]), "a PING is answered, unmasked")
        }
    }

    @Test func theCloseHandshakeIsAnswered() {
        var connection = WebSocketConnection()
        connection.send(text: "bye soon")
        let events = connection.receive(WebSocket.frame(.close, [0x03, 0xE8] + Array("done".utf8), mask: Self.mask))
        #expect(events == [.closed(code: 1000, reason: "done")])
        #expect(connection.takeOutput() == WebSocket.frame(.text, Array("bye soon".utf8)) + WebSocket.frame(.close, [0x03, 0xE8]))
        #expect(connection.isClosed)
        connection.send(text: "too late")
        #expect(connection.takeOutput().isEmpty)
    }

    @Test func violationsCloseWithTheirCode() {
        func failure(_ bytes: [UInt8], maxMessage: Int = 1 << 20) -> WebSocket.CloseCode? {
            var connection = WebSocketConnection(maxMessage: maxMessage)
            for event in connection.receive(bytes) {
                if case .failed(let code, _) = event {
                    let output = connection.takeOutput()
                    #expect(output.first == 0x88, "a close frame is sent")
                    #expect(connection.receive(WebSocket.frame(.text, [65], mask: Self.mask)).isEmpty, "nothing more is read")
                    return code
                }
            }
            return nil
        }
        #expect(failure(WebSocket.frame(.text, Array("hi".utf8))) == .protocolError, "unmasked")
        #expect(failure([0x83, 0x80] + Self.mask) == .protocolError, "reserved opcode")
        #expect(failure([0xC1, 0x80] + Self.mask) == .protocolError, "RSV1 without an extension")
        #expect(failure(WebSocket.frame(.ping, [], fin: false, mask: Self.mask)) == .protocolError, "fragmented control frame")
        #expect(failure([0x89, 0xFE, 0x00, 0x7E] + Self.mask + [UInt8](repeating: 0, count: 126)) == .protocolError, "control frame over 125")
        #expect(failure(WebSocket.frame(.continuation, [1], mask: Self.mask)) == .protocolError, "continuation of nothing")
        #expect(failure(WebSocket.frame(.text, [65], fin: false, mask: Self.mask) + WebSocket.frame(.text, [66], mask: Self.mask)) == .protocolError,
                "a new message inside a fragmented one")
        #expect(failure([0x81, 0xFE, 0x00, 0x05] + Self.mask + [1, 2, 3, 4, 5]) == .protocolError, "non-minimal 16-bit length")
        #expect(failure([0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0]) == .protocolError, "64-bit length with its top bit set")
        #expect(failure(WebSocket.frame(.text, [0xC3, 0x28], mask: Self.mask)) == .invalidPayload, "bad UTF-8")
        #expect(failure(WebSocket.frame(.close, [0x03, 0xED], mask: Self.mask)) == .protocolError, "close code 1005 may not be sent")
        #expect(failure(WebSocket.frame(.close, [0x03], mask: Self.mask)) == .protocolError, "one-byte close body")
        // A frame announcing more than the limit is refused from its header, before its body.
        #expect(failure([0x82, 0xFF, 0, 0, 0, 0, 0x40, 0, 0, 0], maxMessage: 1 << 20) == .tooBig)
        #expect(failure(WebSocket.frame(.binary, [UInt8](repeating: 7, count: 600), fin: false, mask: Self.mask)
                        + WebSocket.frame(.continuation, [UInt8](repeating: 7, count: 600), mask: Self.mask), maxMessage: 1000) == .tooBig,
                "fragments adding up past the limit")
    }
}
