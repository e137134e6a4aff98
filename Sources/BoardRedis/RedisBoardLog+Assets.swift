import BoardModel
import Foundation

/// Images: an image a hub stored goes to `bs:asset:{sha256}` (in chunks past `assetChunkBytes`,
/// the marker naming them written last), and an image no session can offer is fetched from
/// there, asked again until `assetWait` has passed.
extension RedisBoardLog {
    /// What an image's key holds when its bytes are in chunks (`<marker><count>:<size>`); no
    /// PNG starts like this.
    static let chunkMarker = "BSCHUNKS:"

    static func chunkCounts(_ bytes: [UInt8]) -> (Int, Int)? {
        let parts = String(decoding: bytes.dropFirst(chunkMarker.utf8.count), as: UTF8.self).split(separator: ":")
        guard parts.count == 2, let count = Int(parts[0]), let size = Int(parts[1]),
              count > 0, count <= 1 << 16, size > 0, size <= 1 << 30 else { return nil }
        return (count, size)
    }

    /// A hub's `.storeAsset`.
    func storeAsset(_ hash: AssetHash, _ data: Data) {
        assetSets[hash] = (data, false, 0)
        pump()
    }

    /// A hub's `.fetchAsset`.
    func fetchAsset(_ hash: AssetHash, for board: String) {
        var entry = assetGets[hash] ?? (boards: [], giveUpAt: now + options.assetWait, sent: false, notBefore: 0)
        entry.boards.insert(board)
        assetGets[hash] = entry
        pump()
    }

    /// Image stores, then fetches, not sent yet and due (`pump`).
    func sendAssetCommands() {
        for hash in assetSets.keys.sorted(by: { $0.hex < $1.hex }) {
            guard let entry = assetSets[hash], !entry.sent, entry.notBefore <= now else { continue }
            let bytes = [UInt8](entry.data)
            var value = bytes
            if bytes.count > options.assetChunkBytes {
                // Chunks first, then the marker naming them: a reader never sees a marker
                // before its chunks.
                let chunks = stride(from: 0, to: bytes.count, by: options.assetChunkBytes).map {
                    Array(bytes[$0..<min($0 + options.assetChunkBytes, bytes.count)])
                }
                for (index, chunk) in chunks.enumerated() {
                    send(.setChunk(hash), [Array("SET".utf8), Array("\(assetKey(hash)):\(index)".utf8), chunk])
                }
                value = Array("\(Self.chunkMarker)\(chunks.count):\(bytes.count)".utf8)
            }
            send(.setAsset(hash), [Array("SET".utf8), Array(assetKey(hash).utf8), value, Array("NX".utf8)])
            assetSets[hash]?.sent = true
        }
        for hash in assetGets.keys.sorted(by: { $0.hex < $1.hex }) {
            guard let entry = assetGets[hash], !entry.sent, entry.notBefore <= now else { continue }
            send(.getAsset(hash), strings: ["GET", assetKey(hash)])
            assetGets[hash]?.sent = true
        }
    }

    /// Redis stored an image's marker.
    func assetStored(_ hash: AssetHash) {
        // Replies come in order: a chunk refused before this marker left `sent` false, and
        // the whole image goes again (the marker's NX keeps the first).
        if assetSets[hash]?.sent == true { assetSets[hash] = nil }
    }

    /// An image's key (`GET`): the image, the marker of its chunks (fetched next), or nothing.
    func assetRead(_ hash: AssetHash, _ value: RESPValue) {
        guard let entry = assetGets[hash] else { return }
        if case .bulkString(let bytes?) = value, bytes.starts(with: Array(Self.chunkMarker.utf8)),
           let (count, size) = Self.chunkCounts(bytes), up.contains(.commands) {
            let keys = (0..<count).map { Array("\(assetKey(hash)):\($0)".utf8) }
            send(.getChunks(hash, size: size), [Array("MGET".utf8)] + keys)
            return
        }
        if case .bulkString(let bytes?) = value {
            deliver(hash, Data(bytes), to: entry.boards)
        } else {
            // Not there yet (another server may still be storing it): ask again shortly.
            askAgainShortly(hash)
        }
    }

    /// An image's chunks (`MGET`).
    func chunksRead(_ hash: AssetHash, size: Int, _ value: RESPValue) {
        guard let entry = assetGets[hash] else { return }
        var bytes: [UInt8] = []
        if case .array(let parts?) = value {
            for part in parts {
                guard case .bulkString(let chunk?) = part else { bytes = []; break }
                bytes += chunk
            }
        }
        guard bytes.count == size else {
            // A chunk is missing: ask again shortly (the hash is checked on arrival anyway).
            askAgainShortly(hash)
            return
        }
        deliver(hash, Data(bytes), to: entry.boards)
    }

    private func askAgainShortly(_ hash: AssetHash) {
        let at = now + 0.5
        assetGets.modify(hash) { entry in
            entry.sent = false
            entry.notBefore = at
        }
    }

    /// Fetches waited on past `assetWait` are answered "not in Redis" (`handleTimers`).
    func expireAssetFetches() {
        for (hash, entry) in assetGets where !entry.sent && now >= entry.giveUpAt {
            options.log("image \(hash) is not in Redis after \(Int(options.assetWait)) s; giving up")
            deliver(hash, nil, to: entry.boards)
        }
    }

    /// Hands a fetched image (or nil: not in Redis) to the hubs that asked for it.
    func deliver(_ hash: AssetHash, _ data: Data?, to waiting: Set<String>) {
        assetGets[hash] = nil
        for board in waiting.sorted() {
            boards[board]?.hub.assetFetched(hash, data)
        }
    }
}
