extension RedisBoardLog {
    /// One stream entry: its id, the node that wrote it and its batch's bytes.
    typealias StreamEntry = (id: String, node: String?, bytes: [UInt8]?)

    /// Stream entries from an XRANGE reply or one stream of an XREAD reply.
    static func entries(_ value: RESPValue) -> [StreamEntry] {
        guard case .array(let items?) = value else { return [] }
        return items.compactMap { item in
            guard case .array(let pair?) = item, pair.count == 2, let id = pair[0].text,
                  case .array(let fields?) = pair[1] else { return nil }
            var node: String?
            var bytes: [UInt8]?
            var index = 0
            while index + 1 < fields.count {
                switch fields[index].text {
                case "n": node = fields[index + 1].text
                case "o": if case .bulkString(let b?) = fields[index + 1] { bytes = b }
                default: break
                }
                index += 2
            }
            return (id, node, bytes)
        }
    }

    /// A field-value reply (HGETALL: a RESP2 array or a RESP3 map) as a dictionary of bytes.
    static func fields(_ value: RESPValue) -> [String: [UInt8]] {
        var result: [String: [UInt8]] = [:]
        func bytes(_ value: RESPValue) -> [UInt8]? {
            if case .bulkString(let b?) = value { return b }
            return value.text.map { Array($0.utf8) }
        }
        switch value {
        case .array(let items?):
            var index = 0
            while index + 1 < items.count {
                if let key = items[index].text, let b = bytes(items[index + 1]) { result[key] = b }
                index += 2
            }
        case .map(let pairs):
            for pair in pairs { if let key = pair.key.text, let b = bytes(pair.value) { result[key] = b } }
        default: break
        }
        return result
    }

    /// A stream id's two numbers ("ms-seq"), for comparing ids; malformed ones sort first.
    static func streamID(_ text: String) -> (UInt64, UInt64) {
        let parts = text.split(separator: "-")
        guard parts.count == 2, let ms = UInt64(parts[0]), let seq = UInt64(parts[1]) else { return (0, 0) }
        return (ms, seq)
    }
}
