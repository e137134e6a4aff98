/// RESP, the Redis serialization protocol (RESP2 and RESP3), sans-IO: values in and out as
/// bytes, with limits on every length a server (or whoever answers on its port) can claim.
/// The scale-out layer's Redis client (issue 13) is built on this; it never reads a socket.
public indirect enum RESPValue: Equatable, Sendable {
    /// `+OK`
    case simpleString(String)
    /// `-ERR ...` (also RESP3's `!` bulk errors, whose text may hold any bytes).
    case error(String)
    /// `:42`
    case integer(Int64)
    /// `$5 hello`, or the RESP2 null bulk string (`$-1`).
    case bulkString([UInt8]?)
    /// `*2 ...`, or the RESP2 null array (`*-1`).
    case array([RESPValue]?)
    /// RESP3 `_`
    case null
    /// RESP3 `#t` / `#f`
    case boolean(Bool)
    /// RESP3 `,3.14` (also `inf`, `-inf`, `nan`)
    case double(Double)
    /// RESP3 `(3492890328409238509324850943850943825024385`
    case bigNumber(String)
    /// RESP3 `=15 txt:Some string` (the format, then the text)
    case verbatim(format: String, [UInt8])
    /// RESP3 `%` (pairs in the order sent)
    case map([RESPPair])
    /// RESP3 `~`
    case set([RESPValue])
    /// RESP3 `>`: out-of-band data (pub/sub messages on a RESP3 connection)
    case push([RESPValue])

    public static func == (a: RESPValue, b: RESPValue) -> Bool {
        switch (a, b) {
        case (.simpleString(let x), .simpleString(let y)), (.error(let x), .error(let y)), (.bigNumber(let x), .bigNumber(let y)):
            return x == y
        case (.integer(let x), .integer(let y)): return x == y
        case (.bulkString(let x), .bulkString(let y)): return x == y
        case (.array(let x), .array(let y)): return x == y
        case (.null, .null): return true
        case (.boolean(let x), .boolean(let y)): return x == y
        case (.double(let x), .double(let y)): return x == y || (x.isNaN && y.isNaN)
        case (.verbatim(let f, let x), .verbatim(let g, let y)): return f == g && x == y
        case (.map(let x), .map(let y)): return x == y
        case (.set(let x), .set(let y)), (.push(let x), .push(let y)): return x == y
        default: return false
        }
    }

    /// A bulk string's bytes as text (nil for anything else or invalid UTF-8).
    public var text: String? {
        switch self {
        case .simpleString(let text): return text
        case .bulkString(let bytes?): return String(validating: bytes, as: UTF8.self)
        case .verbatim(_, let bytes): return String(validating: bytes, as: UTF8.self)
        default: return nil
        }
    }
}

public struct RESPPair: Equatable, Sendable {
    public var key: RESPValue
    public var value: RESPValue

    public init(_ key: RESPValue, _ value: RESPValue) {
        self.key = key
        self.value = value
    }
}

/// Why bytes are not RESP (the connection is then unusable: close it and reconnect).
public struct RESPError: Error, Equatable, Sendable, CustomStringConvertible {
    public var reason: String
    public var offset: Int

    public var description: String { "malformed RESP at byte \(offset): \(reason)" }
}

public struct RESPLimits: Sendable {
    /// Largest bulk string (Redis's own proto-max-bulk-len default is 512 MiB).
    public var maxBulk = 64 << 20
    /// Elements of one array, set, map or push.
    public var maxElements = 1 << 20
    /// Arrays inside arrays.
    public var maxDepth = 32
    /// A simple line (`+`, `-`, `:`, ...).
    public var maxLine = 64 << 10

    public init() {}
}

/// Decodes replies from a byte stream, in any split: `append` bytes, then take `next()` until
/// it returns nil (more bytes needed). A malformed stream throws `RESPError` once and stays
/// failed.
public struct RESPDecoder: Sendable {
    public let limits: RESPLimits
    private var buffer: [UInt8] = []
    private var start = 0
    private var failure: RESPError?

    public init(limits: RESPLimits = RESPLimits()) {
        self.limits = limits
    }

    /// Bytes received and not yet decoded.
    public var bufferedCount: Int { buffer.count - start }

    public mutating func append(_ bytes: [UInt8]) {
        if start > 0, start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer += bytes
    }

    public mutating func next() throws(RESPError) -> RESPValue? {
        if let failure { throw failure }
        var offset = start
        do {
            guard let value = try parse(&offset, depth: 0) else { return nil }
            start = offset
            return value
        } catch {
            failure = error
            throw error
        }
    }

    private func fail(_ reason: String, _ offset: Int) -> RESPError {
        RESPError(reason: reason, offset: offset)
    }

    /// The line starting at `offset` (without CRLF), moving past it; nil when incomplete.
    private func line(_ offset: inout Int) throws(RESPError) -> ArraySlice<UInt8>? {
        var index = offset
        while index < buffer.count {
            if buffer[index] == 13 {
                guard index + 1 < buffer.count else { return nil }
                guard buffer[index + 1] == 10 else { throw fail("a CR not followed by LF", index) }
                let result = buffer[offset..<index]
                offset = index + 2
                return result
            }
            if buffer[index] == 10 { throw fail("a bare LF", index) }
            index += 1
            if index - offset > limits.maxLine { throw fail("a line longer than \(limits.maxLine) bytes", offset) }
        }
        if buffer.count - offset > limits.maxLine { throw fail("a line longer than \(limits.maxLine) bytes", offset) }
        return nil
    }

    private func integer(_ text: ArraySlice<UInt8>, at offset: Int) throws(RESPError) -> Int64 {
        guard !text.isEmpty, text.count <= 20, let value = Int64(String(decoding: text, as: UTF8.self)),
              text.allSatisfy({ $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "+") || ($0 >= 48 && $0 <= 57) }) else {
            throw fail("'\(String(decoding: text.prefix(24), as: UTF8.self))' is not an integer", offset)
        }
        return value
    }

    /// A length field: -1 (null) or 0...limit.
    private func length(_ text: ArraySlice<UInt8>, at offset: Int, limit: Int, _ what: String) throws(RESPError) -> Int? {
        let value = try integer(text, at: offset)
        if value == -1 { return nil }
        guard value >= 0 else { throw fail("a negative \(what) length \(value)", offset) }
        guard value <= Int64(limit) else { throw fail("a \(what) of \(value) (at most \(limit))", offset) }
        return Int(value)
    }

    private func parse(_ offset: inout Int, depth: Int) throws(RESPError) -> RESPValue? {
        guard offset < buffer.count else { return nil }
        let at = offset
        let kind = buffer[offset]
        var cursor = offset + 1
        guard let header = try line(&cursor) else { return nil }
        func text() throws(RESPError) -> String {
            guard let string = String(validating: header, as: UTF8.self) else { throw fail("a line that is not UTF-8", at) }
            return string
        }
        func bytes(_ count: Int) throws(RESPError) -> [UInt8]? {
            guard buffer.count - cursor >= count + 2 else { return nil }
            guard buffer[cursor + count] == 13, buffer[cursor + count + 1] == 10 else {
                throw fail("a bulk string not ended by CRLF", cursor + count)
            }
            let result = Array(buffer[cursor..<(cursor + count)])
            cursor += count + 2
            return result
        }
        func elements(_ count: Int) throws(RESPError) -> [RESPValue]? {
            guard depth < limits.maxDepth else { throw fail("nesting deeper than \(limits.maxDepth)", at) }
            // Each element takes at least three bytes: no count can reserve more than the input holds.
            var values: [RESPValue] = []
            values.reserveCapacity(min(count, (buffer.count - cursor) / 3))
            for _ in 0..<count {
                guard let value = try parse(&cursor, depth: depth + 1) else { return nil }
                values.append(value)
            }
            return values
        }
        let value: RESPValue
        switch kind {
        case UInt8(ascii: "+"): value = .simpleString(try text())
        case UInt8(ascii: "-"): value = .error(try text())
        case UInt8(ascii: ":"): value = .integer(try integer(header, at: at))
        case UInt8(ascii: "$"):
            guard let count = try length(header, at: at, limit: limits.maxBulk, "bulk string") else {
                value = .bulkString(nil)
                break
            }
            guard let data = try bytes(count) else { return nil }
            value = .bulkString(data)
        case UInt8(ascii: "!"):
            guard let count = try length(header, at: at, limit: limits.maxBulk, "bulk error") else { throw fail("a null bulk error", at) }
            guard let data = try bytes(count) else { return nil }
            value = .error(String(decoding: data, as: UTF8.self))
        case UInt8(ascii: "="):
            guard let count = try length(header, at: at, limit: limits.maxBulk, "verbatim string") else { throw fail("a null verbatim string", at) }
            guard let data = try bytes(count) else { return nil }
            guard data.count >= 4, data[3] == UInt8(ascii: ":"), data[0..<3].allSatisfy({ $0 > 32 && $0 < 127 }) else {
                throw fail("a verbatim string without its three-letter format", at)
            }
            value = .verbatim(format: String(decoding: data[0..<3], as: UTF8.self), Array(data[4...]))
        case UInt8(ascii: "*"), UInt8(ascii: "~"), UInt8(ascii: ">"):
            guard let count = try length(header, at: at, limit: limits.maxElements, "aggregate") else {
                guard kind == UInt8(ascii: "*") else { throw fail("a null set or push", at) }
                value = .array(nil)
                break
            }
            guard let items = try elements(count) else { return nil }
            value = kind == UInt8(ascii: "*") ? .array(items) : kind == UInt8(ascii: "~") ? .set(items) : .push(items)
        case UInt8(ascii: "%"):
            guard let count = try length(header, at: at, limit: limits.maxElements / 2, "map") else { throw fail("a null map", at) }
            guard let items = try elements(count * 2) else { return nil }
            value = .map(stride(from: 0, to: items.count, by: 2).map { RESPPair(items[$0], items[$0 + 1]) })
        case UInt8(ascii: "_"):
            guard header.isEmpty else { throw fail("a null with a body", at) }
            value = .null
        case UInt8(ascii: "#"):
            guard header.count == 1, header.first == UInt8(ascii: "t") || header.first == UInt8(ascii: "f") else {
                throw fail("a boolean that is not t or f", at)
            }
            value = .boolean(header.first == UInt8(ascii: "t"))
        case UInt8(ascii: ","):
            let string = try text()
            switch string {
            case "inf": value = .double(.infinity)
            case "-inf": value = .double(-.infinity)
            case "nan": value = .double(.nan)
            default:
                guard let number = Double(string), string.allSatisfy({ "0123456789+-.eE".contains($0) }) else {
                    throw fail("'\(string.prefix(24))' is not a double", at)
                }
                value = .double(number)
            }
        case UInt8(ascii: "("):
            let string = try text()
            let digits = string.hasPrefix("-") || string.hasPrefix("+") ? string.dropFirst() : Substring(string)
            guard !digits.isEmpty, digits.allSatisfy(\.isNumber), digits.allSatisfy(\.isASCII) else {
                throw fail("'\(string.prefix(24))' is not a big number", at)
            }
            value = .bigNumber(string)
        case UInt8(ascii: "|"):
            // Attributes: metadata for the reply that follows, which is what is returned.
            guard let count = try length(header, at: at, limit: limits.maxElements / 2, "attribute") else { throw fail("a null attribute", at) }
            guard try elements(count * 2) != nil, let reply = try parse(&cursor, depth: depth + 1) else { return nil }
            value = reply
        default:
            throw fail("unknown type byte 0x\(String(kind, radix: 16))", at)
        }
        offset = cursor
        return value
    }
}

extension RESPValue {
    /// The value's bytes (RESP3 types as RESP3; a client sends only arrays of bulk strings).
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    func encode(into out: inout [UInt8]) {
        func line(_ kind: Character, _ text: String) {
            out.append(UInt8(ascii: kind.unicodeScalars.first!))
            out += Array(text.utf8)
            out += [13, 10]
        }
        func aggregate(_ kind: Character, _ items: [RESPValue]) {
            line(kind, String(items.count))
            for item in items { item.encode(into: &out) }
        }
        switch self {
        case .simpleString(let text):
            // A simple string cannot hold CR or LF: anything else goes as a bulk string.
            if text.utf8.contains(13) || text.utf8.contains(10) { RESPValue.bulkString(Array(text.utf8)).encode(into: &out) } else { line("+", text) }
        case .error(let text):
            if text.utf8.contains(13) || text.utf8.contains(10) {
                line("!", String(text.utf8.count))
                out += Array(text.utf8) + [13, 10]
            } else {
                line("-", text)
            }
        case .integer(let value): line(":", String(value))
        case .bulkString(nil): line("$", "-1")
        case .bulkString(let bytes?):
            line("$", String(bytes.count))
            out += bytes + [13, 10]
        case .array(nil): line("*", "-1")
        case .array(let items?): aggregate("*", items)
        case .null: line("_", "")
        case .boolean(let flag): line("#", flag ? "t" : "f")
        case .double(let value):
            line(",", value.isNaN ? "nan" : value == .infinity ? "inf" : value == -.infinity ? "-inf" : String(value))
        case .bigNumber(let text): line("(", text)
        case .verbatim(let format, let bytes):
            let body = Array(format.utf8.prefix(3)) + Array(repeating: UInt8(ascii: " "), count: max(0, 3 - format.utf8.count)) + [UInt8(ascii: ":")] + bytes
            line("=", String(body.count))
            out += body + [13, 10]
        case .map(let pairs):
            line("%", String(pairs.count))
            for pair in pairs {
                pair.key.encode(into: &out)
                pair.value.encode(into: &out)
            }
        case .set(let items): aggregate("~", items)
        case .push(let items): aggregate(">", items)
        }
    }

    /// A command as a client sends it: an array of bulk strings.
    public static func command(_ parts: [[UInt8]]) -> [UInt8] {
        RESPValue.array(parts.map { .bulkString($0) }).encoded()
    }

    public static func command(_ parts: String...) -> [UInt8] {
        command(parts.map { Array($0.utf8) })
    }
}
