@testable import BoardNet
import Foundation
import Testing

/// What a hostile webhook receiver or S3 endpoint can send the server's HTTP client (found by
/// review): a chunk size near Int.max, and interim responses without end. Each is refused with
/// an error; neither traps nor recurses without bound.
@Suite struct HTTPClientParseTests {
    @Test func aChunkSizeNearIntMaxIsRefusedNotATrap() throws {
        let raw = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nA\r\n7fffffffffffffff\r\n".utf8)
        #expect(throws: HTTPClientError.self) { try HTTPClient.parse(raw, limit: 1 << 20, complete: false) }
        let fine = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nA\r\n0\r\n\r\n".utf8)
        #expect(try HTTPClient.parse(fine, limit: 1 << 20, complete: false)?.body == Array("A".utf8))
    }

    @Test func interimResponsesAreSkippedAFewAtMost() throws {
        let interim = "HTTP/1.1 100 Continue\r\n\r\n"
        let final = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
        let two = Array((String(repeating: interim, count: 2) + final).utf8)
        #expect(try HTTPClient.parse(two, limit: 1 << 20, complete: false)?.status == 204)
        let flood = Array((String(repeating: interim, count: 10_000) + final).utf8)
        #expect(throws: HTTPClientError.self) { try HTTPClient.parse(flood, limit: 1 << 20, complete: false) }
    }
}
