/// HMAC-SHA256 (RFC 2104) over our SHA-256, and a comparison that takes the same time wherever
/// two byte strings differ.
public enum HMAC {
    public static func sha256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        let blockSize = 64
        var key = key.count > blockSize ? SHA256.hash(key) : key
        key += [UInt8](repeating: 0, count: blockSize - key.count)
        var inner = SHA256()
        inner.update(key.map { $0 ^ 0x36 })
        inner.update(message)
        var outer = SHA256()
        outer.update(key.map { $0 ^ 0x5C })
        outer.update(inner.finalize())
        return outer.finalize()
    }

    /// True when `a` equals `b`; the time depends only on the lengths, never on where they differ.
    public static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
