import BoardRedis
import Testing

/// RESP2 and RESP3 values through the encoder and the decoder, at every split of the stream, and
/// the refusals that keep a bad answer from costing memory or confusing the client.
@Suite struct RESPTests {
    static let values: [RESPValue] = [
        .simpleString("OK"), .error("ERR unknown command 'FLY'"), .integer(0), .integer(-9_223_372_036_854_775_808),
        .integer(1_700_000_000_000), .bulkString(Array("1700000000000-0".utf8)), .bulkString([]), .bulkString([0, 13, 10, 255]),
        .bulkString(nil), .array(nil), .array([]),
        .array([.bulkString(Array("bs:plans:log".utf8)), .array([.array([.bulkString(Array("1-0".utf8)),
                                                                           .array([.bulkString(Array("b".utf8)), .bulkString([1, 2, 3])])])])]),
        .null, .boolean(true), .boolean(false), .double(3.25), .double(-0.5), .double(.infinity), .double(-.infinity), .double(.nan),
        .bigNumber("3492890328409238509324850943850943825024385"), .bigNumber("-12"),
        .verbatim(format: "txt", Array("Some string".utf8)),
        .map([RESPPair(.simpleString("server"), .bulkString(Array("redis".utf8))), RESPPair(.simpleString("proto"), .integer(3))]),
        .set([.integer(1), .simpleString("two")]),
        .push([.bulkString(Array("message".utf8)), .bulkString(Array("bs:plans:presence".utf8)), .bulkString([9, 9])]),
        .error("multi\r\nline error from a bulk error"),
    ]

    @Test func everyValueSurvivesItsBytesInAnySplit() throws {
        let stream = Self.values.flatMap { $0.encoded() }
        for split in Array(0...min(stream.count, 60)) + [stream.count / 2, stream.count - 1, stream.count] {
            var decoder = RESPDecoder()
            var decoded: [RESPValue] = []
            for part in [Array(stream[..<split]), Array(stream[split...])] {
                decoder.append(part)
                while let value = try decoder.next() { decoded.append(value) }
            }
            #expect(decoded == Self.values, "split at \(split)")
            #expect(decoder.bufferedCount == 0)
        }
        // Byte by byte, too.
        var decoder = RESPDecoder()
        var decoded: [RESPValue] = []
        for byte in stream {
            decoder.append([byte])
            while let value = try decoder.next() { decoded.append(value) }
        }
        #expect(decoded == Self.values)
    }

    @Test func commandsAreArraysOfBulkStrings() {
        #expect(RESPValue.command("XADD", "bs:plans:log", "*", "b", "x") == Array("*5\r\n$4\r\nXADD\r\n$12\r\nbs:plans:log\r\n$1\r\n*\r\n$1\r\nb\r\n$1\r\nx\r\n".utf8))
        #expect(RESPValue.command([Array("SET".utf8), [0, 13, 10]]) == Array("*2\r\n$3\r\nSET\r\n$3\r\n".utf8) + [0, 13, 10, 13, 10])
    }

    @Test func attributesAreSkippedForTheReplyTheyDescribe() throws {
        var decoder = RESPDecoder()
        decoder.append(Array("|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*1\r\n:2\r\n".utf8))
        #expect(try decoder.next() == .array([.integer(2)]))
    }

    @Test func malformedOrAbsurdRepliesFailOnceAndStayFailed() {
        func refusal(_ text: String, limits: RESPLimits = RESPLimits()) -> String? {
            var decoder = RESPDecoder(limits: limits)
            decoder.append(Array(text.utf8))
            do {
                while try decoder.next() != nil {}
                return nil
            } catch {
                // The decoder stays failed: the connection is not usable after this.
                #expect(throws: RESPError.self) { _ = try decoder.next() }
                return error.reason
            }
        }
        #expect(refusal("?what\r\n")?.contains("unknown type byte") == true)
        #expect(refusal(":12a\r\n")?.contains("not an integer") == true)
        #expect(refusal(":99999999999999999999999\r\n")?.contains("not an integer") == true, "overflow")
        #expect(refusal("$-2\r\n")?.contains("negative") == true)
        #expect(refusal("$3\r\nabcd\r\n")?.contains("not ended by CRLF") == true)
        #expect(refusal("+OK\n")?.contains("bare LF") == true)
        #expect(refusal("+OK\rX")?.contains("CR not followed by LF") == true)
        #expect(refusal("#x\r\n")?.contains("boolean") == true)
        #expect(refusal(",1.2.3x\r\n")?.contains("double") == true)
        #expect(refusal("(12a\r\n")?.contains("big number") == true)
        #expect(refusal("_x\r\n")?.contains("null with a body") == true)
        #expect(refusal("~-1\r\n")?.contains("null set") == true)
        #expect(refusal("=5\r\nab:cd\r\n")?.contains("format") == true)
        // Lengths past the limits are refused from the header, before any byte of the body.
        var small = RESPLimits()
        small.maxBulk = 1000
        small.maxElements = 10
        small.maxDepth = 4
        small.maxLine = 64
        #expect(refusal("$1001\r\n", limits: small)?.contains("at most 1000") == true)
        #expect(refusal("*11\r\n", limits: small)?.contains("at most 10") == true)
        #expect(refusal("%6\r\n", limits: small)?.contains("at most 5") == true)
        #expect(refusal(String(repeating: "*1\r\n", count: 6) + ":1\r\n", limits: small)?.contains("deeper") == true)
        #expect(refusal("+" + String(repeating: "a", count: 100), limits: small)?.contains("longer than 64") == true,
                "a line that never ends")
        // A huge count with few bytes behind it reserves nothing and waits for more.
        var decoder = RESPDecoder()
        decoder.append(Array("*1000000\r\n:1\r\n".utf8))
        #expect((try? decoder.next()) == .some(nil))
    }
}
