/// A last-writer-wins register: the value with the greatest timestamp wins.
///
/// `writer` is the operation that wrote the current value when that operation did nothing else
/// (a plain set). When such a value is overwritten, its operation no longer affects any state and
/// the replica drops it from the log. Values written by a creation have no `writer`: the creation
/// itself must stay.
struct Register<Value: Sendable & Equatable>: Sendable {
    var value: Value
    var stamp: Timestamp
    var writer: OpID?

    enum Outcome {
        /// The write won; the displaced value's plain-set operation, if any, is now dead.
        case won(displaced: OpID?)
        case lost
    }

    mutating func write(_ value: Value, stamp: Timestamp, writer: OpID?) -> Outcome {
        guard stamp > self.stamp else { return .lost }
        let displaced = self.writer
        self = Register(value: value, stamp: stamp, writer: writer)
        return .won(displaced: displaced)
    }
}
