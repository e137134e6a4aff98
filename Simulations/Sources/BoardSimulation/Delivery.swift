import BoardCRDT

extension SeededRandom {
    /// Shuffles `operations`, duplicates some, and cuts them into random batches: how an
    /// unreliable network with retries would deliver them.
    public mutating func messyBatches(of operations: [Op], duplicateRate: Double = 0.2, maxBatch: Int = 8) -> [[Op]] {
        var stream = operations
        for op in operations where chance(duplicateRate) { stream.append(op) }
        stream.shuffle(using: &self)
        var batches: [[Op]] = []
        var index = 0
        while index < stream.count {
            let size = Int.random(in: 1...maxBatch, using: &self)
            batches.append(Array(stream[index..<min(index + size, stream.count)]))
            index += size
        }
        return batches
    }
}
