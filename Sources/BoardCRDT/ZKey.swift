/// A fractional paint-order key: the bytes are the digits of a number in [0, 1) written in base
/// 256, compared lexicographically. There is always room for a key between two different keys,
/// so reordering one item never rewrites another's key. A key never ends in a zero byte, which
/// keeps the encoding of each number unique.
public struct ZKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// The longest key the codec accepts (and so the longest any replica may write).
    public static let maxLength = 1024

    /// The longest key any local edit writes (creations, reorders, undo and redo), whatever keys
    /// peers wrote: where a longer key would be needed the replica re-keys a window of
    /// neighbouring items instead (`Replica.placement(of:at:)`).
    public static let comfortableLength = 32

    /// Nil when `bytes` is empty or ends in a zero byte (such a key would have a twin).
    public init?(bytes: [UInt8]) {
        guard let last = bytes.last, last != 0 else { return nil }
        self.bytes = bytes
    }

    private init(unchecked bytes: [UInt8]) {
        self.bytes = bytes
    }

    public static func < (lhs: ZKey, rhs: ZKey) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }

    /// A key strictly between `lower` and `upper`; nil bounds mean 0 and 1. Requires
    /// `lower < upper` when both are given.
    public static func between(_ lower: ZKey?, _ upper: ZKey?) -> ZKey {
        precondition(lower == nil || upper == nil || lower! < upper!, "ZKey.between needs lower < upper")
        return ZKey(unchecked: midpoint(lower?.bytes ?? [], upper?.bytes[...]))
    }

    /// The key of the first item on a board: `80 01`.
    public static let initial = ZKey(unchecked: [0x80, 0x01])

    /// A short key above `key` (the initial key when there is none).
    ///
    /// Keys from `80` to `fe` start an "integer" of `first - 0x7f` bytes, so stacking items keeps
    /// keys short: each new top item increments that integer, and only every 255, 65,025, ...
    /// items does it gain a byte (three bytes cover 65,025 items). Bisecting toward 1 instead would
    /// grow the key by a byte every eight items.
    public static func after(_ key: ZKey?) -> ZKey {
        guard let key else { return initial }
        let head = key.bytes[0]
        if head < 0x80 { return initial }
        if head == 0xFF { return between(key, nil) }
        let length = Int(head) - 0x7F
        var digits = Array(key.bytes.dropFirst().prefix(length))
        digits += [UInt8](repeating: 0, count: length - digits.count)
        var index = length - 1
        while index >= 0 {
            if digits[index] < 0xFF {
                digits[index] += 1
                break
            }
            digits[index] = 0
            index -= 1
        }
        if index < 0 {
            return ZKey(unchecked: [head + 1, 1])
        }
        while digits.last == 0 { digits.removeLast() }
        return ZKey(unchecked: [head] + digits)
    }

    /// A short key below `key` (the initial key when there is none): the mirror of `after`.
    ///
    /// Keys from `7f` down to `01` start an integer of `0x80 - first` bytes that counts down, so
    /// repeated send-to-back gains a byte only every 255, 65,025, ... moves (halving toward zero
    /// instead grew the key by a byte every eight moves, and the 8,192nd move passed the codec's
    /// limit). Keys starting with `00` (never made this way) fall back to halving; callers keep
    /// results short with `Replica`'s rebalancing.
    public static func before(_ key: ZKey?) -> ZKey {
        guard let key else { return initial }
        let head = key.bytes[0]
        if head >= 0x80 { return ZKey(unchecked: [0x7F, 0xFF]) }
        if head == 0x00 { return between(nil, key) }
        let length = 0x80 - Int(head)
        var digits = Array(key.bytes.dropFirst().prefix(length))
        digits += [UInt8](repeating: 0, count: length - digits.count)
        var index = length - 1
        while index >= 0 {
            if digits[index] > 0 {
                digits[index] -= 1
                break
            }
            digits[index] = 0xFF
            index -= 1
        }
        if index < 0 {
            // This length is used up: the next head down, starting at its largest short value.
            if head == 0x01 { return between(nil, key) }
            return ZKey(unchecked: [head - 1, 0xFF])
        }
        while digits.last == 0 { digits.removeLast() }
        return ZKey(unchecked: [head] + digits)
    }

    private static func midpoint(_ a: [UInt8], _ b: ArraySlice<UInt8>?) -> [UInt8] {
        var a = a[...]
        var prefix: [UInt8] = []
        if let b {
            // Copy the common prefix (a padded with zeros), then split the first differing digit.
            var index = 0
            while index < b.count, (index < a.count ? a[a.startIndex + index] : 0) == b[b.startIndex + index] {
                index += 1
            }
            prefix = Array(b.prefix(index))
            a = a.count > index ? a.dropFirst(index) : []
            let rest = b.dropFirst(index)
            return prefix + split(a, rest)
        }
        return split(a, nil)
    }

    private static func split(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>?) -> [UInt8] {
        let digitA = Int(a.first ?? 0)
        let digitB = b.map { Int($0.first ?? 0) } ?? 256
        if digitB - digitA > 1 {
            return [UInt8((digitA + digitB) / 2)]
        }
        // Adjacent digits. If b continues past this digit, b's first digit alone lies between.
        if let b, b.count > 1 {
            return [b[b.startIndex]]
        }
        return [UInt8(digitA)] + split(a.dropFirst(), nil)
    }

    public var description: String {
        bytes.map { byte in
            let hex = String(byte, radix: 16)
            return hex.count == 1 ? "0" + hex : hex
        }.joined()
    }
}
