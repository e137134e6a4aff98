import Foundation

extension BoardSnapshot {
    /// The canonical bytes of this board: JSON with sorted keys, no insignificant whitespace,
    /// base64 for bytes, and `-0.0` written as `0`. Two equal snapshots always give the same
    /// bytes, so replicas compare boards by comparing these.
    ///
    /// Throws `EncodingError` only for non-finite numbers, which the replica never produces.
    public func canonicalJSON() throws -> Data {
        try BoardSnapshot.canonicalEncoder().encode(self.normalizingNegativeZero())
    }

    /// The same layout as `canonicalJSON()`, for a manifest: background bytes left out and each
    /// sticker's `imagePNG` empty (the bytes live in their own files).
    public func manifestJSON(prettyPrinted: Bool = false) throws -> Data {
        var manifest = self.normalizingNegativeZero()
        manifest.backgroundPNG = nil
        for index in manifest.stickers.indices {
            manifest.stickers[index].imagePNG = Data()
        }
        let encoder = BoardSnapshot.canonicalEncoder()
        if prettyPrinted {
            encoder.outputFormatting.insert(.prettyPrinted)
        }
        return try encoder.encode(manifest)
    }

    private static func canonicalEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dataEncodingStrategy = .base64
        return encoder
    }

    private func normalizingNegativeZero() -> BoardSnapshot {
        func n(_ value: Double) -> Double { value == 0 ? 0 : value }
        func n(_ point: CodablePoint) -> CodablePoint { CodablePoint(x: n(point.x), y: n(point.y)) }
        var copy = self
        copy.canvasSize = CodableSize(width: n(canvasSize.width), height: n(canvasSize.height))
        for index in copy.strokes.indices {
            copy.strokes[index].width = n(copy.strokes[index].width)
            copy.strokes[index].points = copy.strokes[index].points.map(n)
        }
        for index in copy.stickers.indices {
            copy.stickers[index].position = n(copy.stickers[index].position)
            copy.stickers[index].scale = n(copy.stickers[index].scale)
            copy.stickers[index].rotationRadians = n(copy.stickers[index].rotationRadians)
        }
        return copy
    }
}
