import BoardCRDT
import BoardSimulation
import Testing

@Suite struct ZKeyTests {
    @Test func betweenIsStrictlyBetweenAndNeverEndsInZero() {
        var rng = SeededRandom(seed: 42)
        var sorted: [ZKey] = [ZKey.between(nil, nil)]
        for step in 0..<2000 {
            let position = Int.random(in: 0...sorted.count, using: &rng)
            let lower = position == 0 ? nil : sorted[position - 1]
            let upper = position == sorted.count ? nil : sorted[position]
            let key = ZKey.between(lower, upper)
            if let lower { #expect(lower < key, "step \(step)") }
            if let upper { #expect(key < upper, "step \(step)") }
            #expect(key.bytes.last != 0)
            #expect(ZKey(bytes: key.bytes) == key)
            sorted.insert(key, at: position)
        }
        #expect(Set(sorted).count == sorted.count)
    }

    @Test func stackingItemsKeepsKeysShort() {
        var top = ZKey.after(nil)
        for step in 0..<70_000 {
            let next = ZKey.after(top)
            if !(top < next) {
                Issue.record("after() not above its input at step \(step): \(top) -> \(next)")
                return
            }
            top = next
        }
        // 255 two-byte keys, 65,025 three-byte keys, then four bytes.
        #expect(top.bytes.count == 4)
    }

    @Test func mixedReordersStayOrdered() {
        var rng = SeededRandom(seed: 7)
        var sorted: [ZKey] = [ZKey.initial]
        for step in 0..<2000 {
            let key: ZKey
            switch Int.random(in: 0..<3, using: &rng) {
            case 0:
                key = ZKey.after(sorted.last)
                #expect(sorted.last! < key, "step \(step)")
            case 1:
                key = ZKey.before(sorted.first)
                #expect(key < sorted.first!, "step \(step)")
            default:
                let index = Int.random(in: 0..<sorted.count, using: &rng)
                let upper = index + 1 < sorted.count ? sorted[index + 1] : nil
                key = ZKey.between(sorted[index], upper)
                #expect(sorted[index] < key, "step \(step)")
                if let upper { #expect(key < upper, "step \(step)") }
            }
            #expect(key.bytes.last != 0, "step \(step)")
            sorted.insert(key, at: sorted.firstIndex { key < $0 } ?? sorted.endIndex)
        }
        #expect(sorted == sorted.sorted())
    }

    @Test func keysThatCouldHaveTwinsAreRejected() {
        #expect(ZKey(bytes: []) == nil)
        #expect(ZKey(bytes: [5, 0]) == nil)
        #expect(ZKey(bytes: [0, 5]) != nil)
    }
}
