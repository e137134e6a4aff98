import BoardCRDT
import BoardModel

/// What one replica is doing on a board right now: who (a display name and colour), where its
/// pointer is, what it has selected and the stroke it is drawing (with the points so far, so
/// others see ink before the operations land).
///
/// Ephemeral: never logged, never in an op log or a package. Hubs relay it to every other
/// session of the board (latest wins per replica) and forget it when it expires (`ttl` seconds
/// after it was sent, unless refreshed) or when the session that brought it closes. A presence
/// with `ttl` 0 says "gone". Sent only to peers whose HELLO announced `Capabilities.presence`.
public struct Presence: Equatable, Sendable {
    /// The replica this presence describes (a session may announce only its own, unless it is a
    /// trusted relay or the server runs without access control).
    public var replica: ReplicaID
    /// A display name, up to `Presence.maxName` bytes of UTF-8.
    public var name: String
    public var color: Color8
    /// The pointer on the board (grid units), if it is over the board.
    public var pointer: GridPoint?
    /// Items selected, up to `Presence.maxSelection`.
    public var selection: [ItemID]
    /// The stroke being drawn, if any.
    public var stroke: InkPreview?
    /// Seconds until receivers forget this presence unless a newer one arrives (0: gone now).
    public var ttl: Double
    /// Orders one replica's presences: a hub takes one only when its clock is above the one it
    /// holds (a "gone" also when equal), so a presence relayed around a mesh cycle stops where
    /// it was seen. A replica's clock must grow across its restarts (`SyncEndpoint` starts it
    /// from `Options.presenceClockStart`; the CLI gives wall-clock milliseconds).
    public var clock: UInt64

    public init(replica: ReplicaID, name: String, color: Color8, pointer: GridPoint? = nil,
                selection: [ItemID] = [], stroke: InkPreview? = nil, ttl: Double = Presence.defaultTTL, clock: UInt64 = 0) {
        self.replica = replica
        self.name = name
        self.color = color
        self.pointer = pointer
        self.selection = selection
        self.stroke = stroke
        self.ttl = ttl
        self.clock = clock
    }

    /// `name` cut to at most `maxName` bytes of UTF-8 on a character boundary.
    public static func clipped(_ name: String) -> String {
        var result = ""
        for character in name {
            guard result.utf8.count + character.utf8.count <= maxName else { break }
            result.append(character)
        }
        return result
    }

    /// A presence that says the replica left.
    public static func gone(_ replica: ReplicaID, clock: UInt64) -> Presence {
        Presence(replica: replica, name: "", color: .black, ttl: 0, clock: clock)
    }

    public var isGone: Bool { ttl == 0 }

    public static let defaultTTL: Double = 10
    /// Longest time-to-live a receiver honours (longer ones are cut to it).
    public static let maxTTL: Double = 60
    public static let maxName = 64
    public static let maxSelection = 256
    public static let maxStrokePoints = 4096
}

/// A stroke still being drawn: its item id once the stroke exists (nil before the first
/// operation), colour, width (grid units) and the points so far.
public struct InkPreview: Equatable, Sendable {
    public var item: ItemID?
    public var color: Color8
    public var width: Int64
    public var points: [GridPoint]

    public init(item: ItemID? = nil, color: Color8, width: Int64, points: [GridPoint]) {
        self.item = item
        self.color = color
        self.width = width
        self.points = points
    }
}

/// Optional features a peer announces in its HELLO (`Hello.capabilities`).
public enum Capabilities {
    /// The peer understands PRESENCE messages.
    public static let presence: UInt64 = 1 << 0
    /// The peer reads operation batches in format 2 (packed points). A peer without it gets
    /// format 1, so builds from before format 2 still sync with this one.
    public static let packedPoints: UInt64 = 1 << 1
    /// The peer reads linked batches (format 3): live operations encoded against what the
    /// connection already carried, about a quarter of a self-contained batch's bytes
    /// (docs/PROTOCOL.md, "Linked batches"). A peer without it gets self-contained batches.
    public static let linkedBatches: UInt64 = 1 << 2
    /// The peer reads REFUSED: a server with access control says which operations of a batch it
    /// dropped (docs/PROTOCOL.md, "Refused operations"). A peer without it is not told.
    public static let refusalNotices: UInt64 = 1 << 3
    /// The peer reads label operations (named versions, operation kind 15: docs/PROTOCOL.md,
    /// "Named versions"). A peer without it is sent batches without them
    /// (`OperationBatch.withoutLabels`): they never change the board.
    public static let labels: UInt64 = 1 << 4
    /// The peer speaks HISTORY_REQUEST and HISTORY: it may ask for the history the other side
    /// holds, and answers such requests (docs/PROTOCOL.md, "History on demand"). Neither is
    /// sent to a peer without it.
    public static let history: UInt64 = 1 << 5
    /// What this version of BoardSync speaks.
    public static let supported: UInt64 = presence | packedPoints | linkedBatches | refusalNotices | labels | history
}

extension Presence {
    // Layout (docs/PROTOCOL.md, "Presence"): replica fixed64, clock varint, name (length-prefixed UTF-8),
    // colour 4 bytes, flags (1 pointer, 2 stroke, 4 stroke item), [pointer x, y zigzag],
    // selection count + (high, low fixed64) each, [stroke: item (high, low fixed64), colour,
    // width varint, point count, points as zigzag deltas from the origin then each other],
    // ttl in milliseconds (varint).

    func write(_ w: inout ByteWriter) {
        w.write(fixed64: replica.rawValue)
        w.write(varint: clock)
        w.write(lengthPrefixed: Array(Presence.clipped(name).utf8))
        for byte in [color.red, color.green, color.blue, color.alpha] { w.write(byte: byte) }
        var flags: UInt8 = 0
        if pointer != nil { flags |= 1 }
        if stroke != nil { flags |= 2 }
        if stroke?.item != nil { flags |= 4 }
        w.write(byte: flags)
        if let pointer {
            w.write(zigzag: pointer.x)
            w.write(zigzag: pointer.y)
        }
        let selected = selection.prefix(Presence.maxSelection)
        w.write(varint: UInt64(selected.count))
        for item in selected {
            w.write(fixed64: item.high)
            w.write(fixed64: item.low)
        }
        if let stroke {
            if let item = stroke.item {
                w.write(fixed64: item.high)
                w.write(fixed64: item.low)
            }
            for byte in [stroke.color.red, stroke.color.green, stroke.color.blue, stroke.color.alpha] { w.write(byte: byte) }
            w.write(varint: UInt64(clamping: max(0, stroke.width)))
            let points = stroke.points.suffix(Presence.maxStrokePoints)
            w.write(varint: UInt64(points.count))
            var previous = GridPoint(x: 0, y: 0)
            for point in points {
                w.write(zigzag: point.x &- previous.x)
                w.write(zigzag: point.y &- previous.y)
                previous = point
            }
        }
        let milliseconds = ttl.isFinite ? min(max(ttl, 0), Presence.maxTTL) * 1000 : 0
        w.write(varint: UInt64(milliseconds.rounded()))
    }

    static func read(_ r: inout ByteReader) throws -> Presence {
        let replica = ReplicaID(try r.readFixed64())
        let clock = try r.readVarint()
        let nameBytes = try r.readLengthPrefixed(max: Presence.maxName, "presence name")
        guard let name = String(validating: nameBytes, as: UTF8.self) else {
            throw SessionError(.malformedFrame, "presence name is not UTF-8")
        }
        let color = Color8(red: try r.readByte(), green: try r.readByte(), blue: try r.readByte(), alpha: try r.readByte())
        let flags = try r.readByte()
        guard flags & ~7 == 0, flags & 4 == 0 || flags & 2 != 0 else {
            throw SessionError(.malformedFrame, "presence flags \(flags) are not defined")
        }
        func coordinate() throws -> Int64 {
            let value = try r.readZigzag()
            guard value.magnitude <= UInt64(FixedPoint.limit) else {
                throw SessionError(.malformedFrame, "a presence coordinate is beyond ±\(FixedPoint.limit) units")
            }
            return value
        }
        let pointer = flags & 1 != 0 ? GridPoint(x: try coordinate(), y: try coordinate()) : nil
        let count = try r.readCount(max: Presence.maxSelection, minimumSize: 16, "selected items")
        var selection: [ItemID] = []
        for _ in 0..<count { selection.append(ItemID(high: try r.readFixed64(), low: try r.readFixed64())) }
        var stroke: InkPreview?
        if flags & 2 != 0 {
            let item = flags & 4 != 0 ? ItemID(high: try r.readFixed64(), low: try r.readFixed64()) : nil
            let color = Color8(red: try r.readByte(), green: try r.readByte(), blue: try r.readByte(), alpha: try r.readByte())
            let width = try r.readVarint(max: UInt64(FixedPoint.limit), "stroke width")
            let pointCount = try r.readCount(max: Presence.maxStrokePoints, minimumSize: 2, "stroke points")
            var points: [GridPoint] = []
            points.reserveCapacity(pointCount)
            var previous = GridPoint(x: 0, y: 0)
            for _ in 0..<pointCount {
                // Each point is a delta; the sum must stay on the board's grid.
                let dx = try r.readZigzag(), dy = try r.readZigzag()
                let (x, xOverflow) = previous.x.addingReportingOverflow(dx)
                let (y, yOverflow) = previous.y.addingReportingOverflow(dy)
                guard !xOverflow, !yOverflow, x.magnitude <= UInt64(FixedPoint.limit), y.magnitude <= UInt64(FixedPoint.limit) else {
                    throw SessionError(.malformedFrame, "a presence stroke point is beyond ±\(FixedPoint.limit) units")
                }
                previous = GridPoint(x: x, y: y)
                points.append(previous)
            }
            stroke = InkPreview(item: item, color: color, width: Int64(width), points: points)
        }
        let milliseconds = try r.readVarint(max: UInt64(Presence.maxTTL * 1000), "presence time-to-live")
        return Presence(replica: replica, name: name, color: color, pointer: pointer, selection: selection,
                        stroke: stroke, ttl: Double(milliseconds) / 1000, clock: clock)
    }
}
