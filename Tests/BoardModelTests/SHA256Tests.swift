import BoardModel
import Testing

@Suite struct SHA256Tests {
    // NIST FIPS 180-4 example vectors and the empty message.
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        ("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"),
    ])
    func nistVectors(message: String, expected: String) {
        #expect(AssetHash.of(Array(message.utf8)).hex == expected)
    }

    @Test func millionAs() {
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(AssetHash.of(message).hex == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func incrementalMatchesOneShotAtEveryBlockBoundary() {
        let message = (0..<200).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let whole = SHA256.hash(message)
        for split in [0, 1, 55, 56, 63, 64, 65, 127, 128, 199, 200] {
            var hasher = SHA256()
            hasher.update(message[..<split])
            hasher.update(message[split...])
            #expect(hasher.finalize() == whole, "split at \(split)")
        }
    }

    @Test func hexRoundTripAndRejects() throws {
        let hash = AssetHash.of(Array("abc".utf8))
        #expect(AssetHash(hex: hash.hex) == hash)
        #expect(AssetHash(hex: hash.hex.uppercased()) == hash)
        #expect(AssetHash(hex: String(hash.hex.dropLast())) == nil)
        #expect(AssetHash(hex: String(hash.hex.dropLast()) + "g") == nil)
        #expect(AssetHash(digest: hash.digest) == hash)
        #expect(AssetHash(digest: [UInt8](repeating: 0, count: 31)) == nil)
    }
}

@Suite struct CRC32Tests {
    /// The byte-at-a-time definition, to check the fast version against.
    static func reference(_ bytes: [UInt8]) -> UInt32 {
        var value: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            value ^= UInt32(byte)
            for _ in 0..<8 { value = value & 1 != 0 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        }
        return ~value
    }

    @Test func standardCheckValue() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
    }

    @Test func matchesTheDefinitionAtEveryLengthAndSplit() {
        let data = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ 7) }
        for length in 0...data.count {
            let prefix = Array(data[..<length])
            #expect(CRC32.checksum(prefix) == Self.reference(prefix), "length \(length)")
        }
        let split = CRC32.checksum(data[100...], continuing: CRC32.checksum(data[..<100]))
        #expect(split == Self.reference(data))
    }
}
