import BoardCRDT
import BoardSimulation
import Testing

@Suite struct ZKeyTests {
    @Test func betweenIsStrictlyBetweenAndNeverEndsInZero() {
        var rng = SeededRandom(seed: 42)
        var keys: [ZKey] = [ZKey.between(nil, nil)]
        for step in 0..<2000 {
            let sorted = keys.sorted()
            let position = Int.random(in: 0...sorted.count, using: &rng)
            let lower = position == 0 ? nil : sorted[position - 1]
            let upper = position == sorted.count ? nil : sorted[position]
            let key = ZKey.between(lower, upper)
            if let lower { #expect(lower < key, "step \(step)") }
            if let upper { #expect(key < upper, "step \(step)") }
            #expect(key.bytes.last != 0)
            #expect(ZKey(bytes: key.bytes) == key)
            keys.append(key)
        }
        #expect(Set(keys).count == keys.count)
    }

    @Test func repeatedBringToFrontGrowsSlowly() {
        var top: ZKey? = nil
        for _ in 0..<800 { top = ZKey.after(top) }
        #expect(top!.bytes.count <= 101)
    }

    @Test func keysThatCouldHaveTwinsAreRejected() {
        #expect(ZKey(bytes: []) == nil)
        #expect(ZKey(bytes: [5, 0]) == nil)
        #expect(ZKey(bytes: [0, 5]) != nil)
    }
}
