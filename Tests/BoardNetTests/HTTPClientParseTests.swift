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

    /// The Host header (and the host SigV4 signs) leaves out only the scheme's own default
    /// port: https://HOST and https://HOST:443 both say HOST; any other port is named.
    @Test func theHostHeaderLeavesOutOnlyTheSchemesDefaultPort() throws {
        #expect(try HTTPClient.URLParts("https://s3.eu-west-1.amazonaws.com").hostHeader == "s3.eu-west-1.amazonaws.com")
        let explicit = try HTTPClient.URLParts("https://s3.example:443")
        #expect(explicit.port == 443 && explicit.tls && explicit.hostHeader == "s3.example")
        #expect(try HTTPClient.URLParts("https://minio.internal:9000").hostHeader == "minio.internal:9000")
        #expect(try HTTPClient.URLParts("http://minio.internal:443").hostHeader == "minio.internal:443")
        #expect(try HTTPClient.URLParts("https://minio.internal:80").hostHeader == "minio.internal:80")
        #expect(try HTTPClient.URLParts("http://minio.internal").hostHeader == "minio.internal")
        #expect(try HTTPClient.URLParts("https://[::1]").hostHeader == "[::1]")
        #expect(try HTTPClient.URLParts("https://[::1]:8443").hostHeader == "[::1]:8443")
        let target = try S3BackupTarget(endpoint: "https://s3.example:443", bucket: "boards", prefix: "p", region: "us-east-1",
                                        credentials: S3Credentials(accessKey: "AKIDEXAMPLE", secretKey: "x"))
        let signed = target.signed("GET", key: "k", query: [], payloadHash: SigV4.emptyPayloadHash)
        #expect(signed.url.hostHeader == "s3.example" && signed.url.port == 443 && signed.url.tls)
        #expect(signed.headers.contains { $0.0 == "Authorization" && $0.1.contains("SignedHeaders=host;") })
    }
}
