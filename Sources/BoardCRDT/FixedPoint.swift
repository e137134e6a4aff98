import BoardModel

/// Board coordinates and lengths are stored as integers in 1/16 of a point.
///
/// Every replica, the author included, rounds an input value to this grid when the edit is made,
/// so the author sees exactly what every peer sees and the binary codec can write small integer
/// deltas. 1/16 point is finer than any pointing device reports on a board.
public enum FixedPoint {
    public static let unitsPerPoint: Double = 16
    /// Coordinates beyond ±2^40 points are clamped: no board is that large, and the bound keeps
    /// every delta inside an `Int64`.
    public static let limit: Int64 = 1 << 44

    /// Rounds `value` (points) to the grid; nil when it is not finite.
    public static func units(_ value: Double) -> Int64? {
        guard value.isFinite else { return nil }
        let scaled = (value * unitsPerPoint).rounded()
        let clamped = min(max(scaled, -Double(limit)), Double(limit))
        return Int64(clamped)
    }

    public static func points(_ units: Int64) -> Double {
        Double(units) / unitsPerPoint
    }
}

/// A point on the 1/16-point grid.
public struct GridPoint: Hashable, Sendable {
    public var x: Int64
    public var y: Int64

    public init(x: Int64, y: Int64) {
        self.x = x
        self.y = y
    }

    /// Rounds a board point to the grid; nil when a coordinate is not finite.
    public init?(_ point: CodablePoint) {
        guard let x = FixedPoint.units(point.x), let y = FixedPoint.units(point.y) else { return nil }
        self.init(x: x, y: y)
    }

    public var codable: CodablePoint {
        CodablePoint(x: FixedPoint.points(x), y: FixedPoint.points(y))
    }
}

/// A colour stored with 8 bits per channel (the `#RRGGBBAA` precision).
public struct Color8: Hashable, Sendable {
    public var red: UInt8
    public var green: UInt8
    public var blue: UInt8
    public var alpha: UInt8

    public init(red: UInt8, green: UInt8, blue: UInt8, alpha: UInt8) {
        self.red = red
        self.green = green
        self.blue = blue
        self.alpha = alpha
    }

    /// Rounds each channel (clamped to 0...1) to 8 bits; nil when a channel is not finite.
    public init?(_ color: RGBAColor) {
        func channel(_ value: Double) -> UInt8? {
            guard value.isFinite else { return nil }
            return UInt8((min(max(value, 0), 1) * 255).rounded())
        }
        guard let r = channel(color.red), let g = channel(color.green),
              let b = channel(color.blue), let a = channel(color.alpha) else { return nil }
        self.init(red: r, green: g, blue: b, alpha: a)
    }

    /// Parses `#RRGGBB` or `#RRGGBBAA` (the `#` is optional).
    public init?(hex: String) {
        var digits = Substring(hex)
        if digits.hasPrefix("#") { digits = digits.dropFirst() }
        guard digits.count == 6 || digits.count == 8, let value = UInt32(digits, radix: 16) else { return nil }
        let full = digits.count == 6 ? value << 8 | 0xFF : value
        self.init(red: UInt8(full >> 24), green: UInt8(truncatingIfNeeded: full >> 16),
                  blue: UInt8(truncatingIfNeeded: full >> 8), alpha: UInt8(truncatingIfNeeded: full))
    }

    public static let black = Color8(red: 0, green: 0, blue: 0, alpha: 255)

    public var rgba: RGBAColor {
        RGBAColor(red: Double(red) / 255, green: Double(green) / 255, blue: Double(blue) / 255, alpha: Double(alpha) / 255)
    }
}
