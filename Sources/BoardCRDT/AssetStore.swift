import BoardModel
import Foundation

/// Asset bytes by content hash. Bytes are stored once however many stickers show them.
public struct AssetStore: Sendable {
    private var blobs: [AssetHash: Data] = [:]

    public init() {}

    /// Stores `data` and returns its hash.
    @discardableResult
    public mutating func insert(_ data: Data) -> AssetHash {
        let hash = AssetHash.of(data)
        blobs[hash] = data
        return hash
    }

    /// Stores `data` under `hash`, which the caller computed from it.
    mutating func insert(_ data: Data, hash: AssetHash) {
        blobs[hash] = data
    }

    /// Forgets the bytes of `hash` (a rolled-back transaction's images).
    mutating func remove(_ hash: AssetHash) {
        blobs[hash] = nil
    }

    /// Stores bytes that arrived under a claimed hash; throws when they do not match it, and then
    /// stores nothing.
    public mutating func insert(_ data: Data, claimedHash: AssetHash) throws {
        let actual = AssetHash.of(data)
        guard actual == claimedHash else {
            throw AssetStoreError.hashMismatch(claimed: claimedHash, actual: actual)
        }
        blobs[actual] = data
    }

    public func data(for hash: AssetHash) -> Data? { blobs[hash] }

    public func contains(_ hash: AssetHash) -> Bool { blobs[hash] != nil }

    public var hashes: [AssetHash] { blobs.keys.sorted() }

    public var count: Int { blobs.count }

    /// Total bytes held.
    public var byteCount: Int { blobs.values.reduce(0) { $0 + $1.count } }
}

public enum AssetStoreError: Error, Equatable, CustomStringConvertible {
    case hashMismatch(claimed: AssetHash, actual: AssetHash)

    public var description: String {
        switch self {
        case .hashMismatch(let claimed, let actual):
            return "asset bytes do not match their hash: claimed \(claimed.hex), bytes hash to \(actual.hex)"
        }
    }
}
