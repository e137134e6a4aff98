/// Names one replica for its whole life. Chosen by the caller (at random, once, by whoever
/// creates the replica: the CRDT itself never draws randomness).
public struct ReplicaID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(_ rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// Parses the 16-hex-digit form that `description` prints.
    public init?(hex: String) {
        guard hex.utf8.count == 16, let value = UInt64(hex, radix: 16) else { return nil }
        self.rawValue = value
    }

    public static func < (lhs: ReplicaID, rhs: ReplicaID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// 16 lowercase hex digits.
    public var description: String {
        let hex = String(rawValue, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// One operation's identity: the replica that made it and its position in that replica's
/// contiguous sequence (1, 2, 3, ...).
public struct OpID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let replica: ReplicaID
    public let seq: UInt64

    public init(replica: ReplicaID, seq: UInt64) {
        self.replica = replica
        self.seq = seq
    }

    public static func < (lhs: OpID, rhs: OpID) -> Bool {
        (lhs.replica, lhs.seq) < (rhs.replica, rhs.seq)
    }

    public var description: String { "\(replica)#\(seq)" }
}

/// The total order that decides every last-writer-wins choice: Lamport counter first, replica id
/// to break ties. Wall clocks never take part.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let lamport: UInt64
    public let replica: ReplicaID

    public init(lamport: UInt64, replica: ReplicaID) {
        self.lamport = lamport
        self.replica = replica
    }

    /// Earlier than every timestamp an operation can carry (operations start at lamport 1).
    public static let zero = Timestamp(lamport: 0, replica: ReplicaID(0))

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        (lhs.lamport, lhs.replica) < (rhs.lamport, rhs.replica)
    }

    public var description: String { "\(lamport)@\(replica)" }
}
