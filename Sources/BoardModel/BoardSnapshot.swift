import Foundation

/// The whole board frozen into a value: what a writer persists and a renderer draws.
///
/// Field names and meanings follow the seed document model, so a reader that knows only
/// `schemaVersion`, `canvasSize`, `backgroundPNG`, `strokes` and `stickers` decodes our
/// manifests. BoardSync adds optional fields that such a reader ignores:
///
/// - `backgroundSHA256`: content hash of the background; with `backgroundPNG == nil` it means the
///   background is *pending* (known, bytes not received yet).
/// - `paintOrder`: every visible item's id, bottom to top, across strokes and stickers. The seed's
///   two arrays keep paint order within each kind; this keeps it across kinds.
public struct BoardSnapshot: Codable, Equatable, Sendable {
    /// The schema this build writes. Version 1 is the seed's; version 2 adds the optional fields.
    public static let currentSchemaVersion = 2
    /// The canvas of a new board, as in the seed.
    public static let defaultCanvasSize = CodableSize(width: 1600, height: 1200)

    public var schemaVersion: Int
    public var canvasSize: CodableSize
    public var backgroundPNG: Data?
    public var strokes: [InkStroke]
    public var stickers: [PlacedSticker]
    public var backgroundSHA256: String?
    public var paintOrder: [UUID]?

    public init(
        schemaVersion: Int = BoardSnapshot.currentSchemaVersion,
        canvasSize: CodableSize = BoardSnapshot.defaultCanvasSize,
        backgroundPNG: Data? = nil,
        strokes: [InkStroke] = [],
        stickers: [PlacedSticker] = [],
        backgroundSHA256: String? = nil,
        paintOrder: [UUID]? = nil
    ) {
        self.schemaVersion = schemaVersion
        self.canvasSize = canvasSize
        self.backgroundPNG = backgroundPNG
        self.strokes = strokes
        self.stickers = stickers
        self.backgroundSHA256 = backgroundSHA256
        self.paintOrder = paintOrder
    }

    /// True when the background's hash is known but its bytes are not here yet.
    public var isBackgroundPending: Bool { backgroundPNG == nil && backgroundSHA256 != nil }

    /// Ids of stickers whose image bytes have not arrived.
    public var pendingStickerIDs: [UUID] { stickers.filter(\.isPending).map(\.id) }
}
