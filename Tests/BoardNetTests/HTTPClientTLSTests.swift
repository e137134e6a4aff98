@testable import BoardNet
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The HTTP client's TLS paths against a hostile or broken HTTPS server (a FakeHTTPEndpoint
/// behind the TLS-terminating proxy): a body of no stated length is whole only with the peer's
/// close_notify; a body cut short of its Content-Length is an error over TLS as over TCP;
/// answers split across many TLS records come back whole.
@Suite(.serialized) struct HTTPClientTLSTests {
    static let body = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }

    /// Answers 200 with `body`, its length stated or not, `cut` bytes short, in pieces of
    /// `piece` bytes (each its own TLS record at the proxy).
    static func endpoint(statesLength: Bool, cut: Int = 0, piece: Int = 65536) throws -> FakeHTTPEndpoint {
        try FakeHTTPEndpoint { _, send in
            let head = "HTTP/1.1 200 OK\r\nConnection: close\r\n" + (statesLength ? "Content-Length: \(body.count)\r\n" : "") + "\r\n"
            guard send(Array(head.utf8)[...]) else { return }
            var offset = 0
            let end = body.count - cut
            while offset < end {
                let next = min(offset + piece, end)
                guard send(body[offset..<next]) else { return }
                offset = next
                if piece < 65536 { usleep(200) }  // separate reads, separate records
            }
        }
    }

    static func get(_ proxy: TLSTerminatingProxy, ca: String, streamed: Bool) throws -> [UInt8] {
        let client = HTTPClient(timeout: 20, tls: try TLSContext.client(ca: ca))
        let url = try HTTPClient.URLParts(proxy.endpoint + "/object")
        if !streamed { return try client.request("GET", url).body }
        var bytes: [UInt8] = []
        let response = try client.request("GET", url, maxBody: 1 << 20) { bytes += $0 }
        #expect(response.status == 200)
        return bytes
    }

    @Test func aBodyOfNoStatedLengthIsWholeOnlyWithCloseNotify() throws {
        guard let pki = try TestPKI.make() else { return }
        let upstream = try Self.endpoint(statesLength: false)
        defer { upstream.stop() }
        let orderly = try TLSTerminatingProxy(certificate: pki.server.cert, key: pki.server.key, upstreamPort: upstream.port)
        defer { orderly.stop() }
        #expect(try Self.get(orderly, ca: pki.ca, streamed: true) == Self.body)
        #expect(try Self.get(orderly, ca: pki.ca, streamed: false) == Self.body)

        // The same bytes, the TCP connection ended without close_notify: the streamed answer
        // (a restore's, an export's) is refused, not taken as whole.
        let cut = try TLSTerminatingProxy(certificate: pki.server.cert, key: pki.server.key, upstreamPort: upstream.port, closeNotify: false)
        defer { cut.stop() }
        do {
            let bytes = try Self.get(cut, ca: pki.ca, streamed: true)
            Issue.record("a body ended without close_notify was taken whole (\(bytes.count) bytes)")
        } catch {
            #expect("\(error)".contains("without close_notify after 100000 bytes"), "\(error)")
        }
    }

    @Test func aBodyCutShortOfItsLengthIsAnErrorOverTLS() throws {
        guard let pki = try TestPKI.make() else { return }
        let upstream = try Self.endpoint(statesLength: true, cut: 1000)
        defer { upstream.stop() }
        for closeNotify in [true, false] {
            let proxy = try TLSTerminatingProxy(certificate: pki.server.cert, key: pki.server.key, upstreamPort: upstream.port, closeNotify: closeNotify)
            defer { proxy.stop() }
            for streamed in [true, false] {
                do {
                    _ = try Self.get(proxy, ca: pki.ca, streamed: streamed)
                    Issue.record("a cut body was taken (close_notify \(closeNotify), streamed \(streamed))")
                } catch {
                    #expect("\(error)".contains("cut short (99000 of 100000 bytes)"), "\(error)")
                }
            }
        }
    }

    @Test func anAnswerInManySmallRecordsComesBackWhole() throws {
        guard let pki = try TestPKI.make() else { return }
        for statesLength in [true, false] {
            let upstream = try Self.endpoint(statesLength: statesLength, piece: 997)
            defer { upstream.stop() }
            let proxy = try TLSTerminatingProxy(certificate: pki.server.cert, key: pki.server.key, upstreamPort: upstream.port)
            defer { proxy.stop() }
            #expect(try Self.get(proxy, ca: pki.ca, streamed: true) == Self.body, "length stated: \(statesLength)")
            #expect(try Self.get(proxy, ca: pki.ca, streamed: false) == Self.body, "length stated: \(statesLength)")
            #expect(proxy.errors.isEmpty, "\(proxy.errors)")
        }
    }
}
