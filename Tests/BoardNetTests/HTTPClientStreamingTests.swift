@testable import BoardNet
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `HTTPClient.request(..., streamingTo:)` (restores from S3, admin exports) against a peer on
/// loopback that answers whatever a hostile or broken S3 endpoint or server might: each is a
/// clear error, never a trap, a hang or an unbounded buffer.
@Suite struct HTTPClientStreamingTests {
    /// Answers one connection with `answer` after reading the request head, then closes.
    static func serveOnce(_ answer: [UInt8]) -> HTTPClient.URLParts {
        let listening = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listening, $0, length) } }
        listen(listening, 4)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listening, $0, &length) } }
        let port = UInt16(bigEndian: address.sin_port)
        Thread {
            let client = accept(listening, nil, nil)
            close(listening)
            guard client >= 0 else { return }
            var buffer = [UInt8](repeating: 0, count: 65536)
            var request: [UInt8] = []
            while request.firstRange(of: Array("\r\n\r\n".utf8)) == nil {
                let count = recv(client, &buffer, buffer.count, 0)
                if count <= 0 { break }
                request += buffer[0..<count]
            }
            _ = answer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            shutdown(client, Int32(SHUT_WR))
            close(client)
        }.start()
        return try! HTTPClient.URLParts("http://127.0.0.1:\(port)/object")
    }

    /// The pieces handed on and the answer, or the error's words.
    static func fetch(_ answer: String, extra: [UInt8] = [], maxBody: Int = 1000) -> (pieces: [[UInt8]], response: HTTPClient.Response?, error: String?) {
        let url = serveOnce(Array(answer.utf8) + extra)
        var pieces: [[UInt8]] = []
        do {
            let response = try HTTPClient(timeout: 10, maxResponseBytes: 100).request("GET", url, maxBody: maxBody) { pieces.append($0) }
            return (pieces, response, nil)
        } catch {
            return (pieces, nil, "\(error)")
        }
    }

    @Test func wholeBodiesArriveInPiecesByEveryFraming() {
        let length = Self.fetch("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        #expect(length.pieces.joined().elementsEqual(Array("hello".utf8)) && length.response?.status == 200, "\(length)")
        let chunked = Self.fetch("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        #expect(chunked.pieces.joined().elementsEqual(Array("abcde".utf8)), "\(chunked)")
        let untilClose = Self.fetch("HTTP/1.1 200 OK\r\n\r\nrest of it")
        #expect(untilClose.pieces.joined().elementsEqual(Array("rest of it".utf8)), "\(untilClose)")
        // A refusal's body is kept for its words, never handed on.
        let refused = Self.fetch("HTTP/1.1 403 Forbidden\r\nContent-Length: 7\r\n\r\ndenied!")
        #expect(refused.pieces.isEmpty && refused.response?.status == 403 && refused.response?.body == Array("denied!".utf8))
    }

    @Test func hostileAnswersAreClearErrors() {
        let cases: [(String, [UInt8], String)] = [
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\n", [], "over the limit of 1000"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n", [], "bad chunk size"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", [UInt8](repeating: 65, count: 5000), "bad chunk size"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n", [], "over the limit of 1000"),
            ("HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n", [], "bad Content-Length"),
            ("HTTP/1.1 200 OK\r\n\r\n", [UInt8](repeating: 66, count: 1001), "over the limit of 1000"),
            ("HTTP/1.1 500 Oops\r\n\r\n", [UInt8](repeating: 67, count: 101), "over the limit of 100"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", [], "cut short (5 of 10 bytes)"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc", [], "a chunked response was cut short"),
            (String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: 9) + "HTTP/1.1 200 OK\r\n\r\n", [], "more than 8 interim"),
            ("HTTP/1.1 200 OK\r\nX: ", [UInt8](repeating: 68, count: 70_000), "head is over 64 KiB"),
            ("SSH-2.0-OpenSSH\r\n\r\n", [], "not an HTTP response"),
            ("", [], "closed the connection before a whole response"),
        ]
        for (answer, extra, message) in cases {
            let result = Self.fetch(answer, extra: extra)
            #expect(result.error?.contains(message) == true, "\(answer.prefix(60)): \(String(describing: result.error)) \(String(describing: result.response?.status))")
            #expect(result.pieces.joined().count <= 1000)
        }
    }
}
