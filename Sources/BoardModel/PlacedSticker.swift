import Foundation

/// An image placed on the board, centred at `position`, scaled and rotated about its centre.
///
/// `imageSHA256` is BoardSync's addition to the seed's fields: the lowercase hex SHA-256 of the
/// image bytes. A sticker whose hash is known but whose bytes have not arrived yet is *pending*:
/// `imagePNG` is empty and `isPending` is true. Writers never store a pending sticker as an empty
/// image.
public struct PlacedSticker: Codable, Equatable, Sendable, Identifiable {
    public var id: UUID
    public var imagePNG: Data
    public var position: CodablePoint
    public var scale: Double
    public var rotationRadians: Double
    public var imageSHA256: String?

    public init(
        id: UUID,
        imagePNG: Data,
        position: CodablePoint,
        scale: Double = 1,
        rotationRadians: Double = 0,
        imageSHA256: String? = nil
    ) {
        self.id = id
        self.imagePNG = imagePNG
        self.position = position
        self.scale = scale
        self.rotationRadians = rotationRadians
        self.imageSHA256 = imageSHA256
    }

    /// True when the image's hash is known but its bytes are not here yet.
    public var isPending: Bool { imagePNG.isEmpty && imageSHA256 != nil }
}
