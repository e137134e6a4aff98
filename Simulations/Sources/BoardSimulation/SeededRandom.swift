/// SplitMix64: a tiny, fast generator whose whole state is one word, so a seed replays a run
/// bit for bit on every platform. Not for cryptography.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    public private(set) var state: UInt64

    public init(seed: UInt64) {
        self.state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    public mutating func chance(_ p: Double) -> Bool {
        Double.random(in: 0..<1, using: &self) < p
    }

    /// A random element; the collection must not be empty.
    public mutating func pick<C: Collection>(_ collection: C) -> C.Element {
        collection.randomElement(using: &self)!
    }
}
