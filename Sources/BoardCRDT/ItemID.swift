import Foundation

/// Names a stroke or sticker. 128 bits, shown and stored as a UUID.
///
/// Items a replica creates are named after the operation that created them: the high 64 bits are
/// the creator's replica id and the low 64 bits the creating operation's sequence number. That is
/// unique without randomness, and lets the binary codec write most item references in 2-4 bytes.
/// Items imported from elsewhere may carry any UUID.
public struct ItemID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let high: UInt64
    public let low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The id of the item created by operation `op`.
    public init(createdBy op: OpID) {
        self.init(high: op.replica.rawValue, low: op.seq)
    }

    public init(uuid: UUID) {
        let b = uuid.uuid
        let bytes = [b.0, b.1, b.2, b.3, b.4, b.5, b.6, b.7, b.8, b.9, b.10, b.11, b.12, b.13, b.14, b.15]
        var high: UInt64 = 0
        var low: UInt64 = 0
        for index in 0..<8 {
            high = high << 8 | UInt64(bytes[index])
            low = low << 8 | UInt64(bytes[index + 8])
        }
        self.init(high: high, low: low)
    }

    /// Parses a UUID string in either case.
    public init?(uuidString: String) {
        guard let uuid = UUID(uuidString: uuidString) else { return nil }
        self.init(uuid: uuid)
    }

    public var uuid: UUID {
        func byte(_ word: UInt64, _ index: Int) -> UInt8 { UInt8(truncatingIfNeeded: word >> UInt64(56 - 8 * index)) }
        let h = high
        let l = low
        return UUID(uuid: (
            byte(h, 0), byte(h, 1), byte(h, 2), byte(h, 3), byte(h, 4), byte(h, 5), byte(h, 6), byte(h, 7),
            byte(l, 0), byte(l, 1), byte(l, 2), byte(l, 3), byte(l, 4), byte(l, 5), byte(l, 6), byte(l, 7)
        ))
    }

    public static func < (lhs: ItemID, rhs: ItemID) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }

    /// The UUID spelling, uppercase, as sticker file names use it.
    public var description: String { uuid.uuidString }
}
