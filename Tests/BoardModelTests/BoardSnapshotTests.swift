import BoardModel
import Foundation
import Testing

/// The seed's model exactly as the founding document declares it: a reader that knows nothing
/// of BoardSync's additions.
private struct SeedBoardSnapshot: Codable {
    var schemaVersion: Int
    var canvasSize: SeedSize
    var backgroundPNG: Data?
    var strokes: [SeedStroke]
    var stickers: [SeedSticker]
}
private struct SeedSize: Codable { var width: Double; var height: Double }
private struct SeedPoint: Codable { var x: Double; var y: Double }
private struct SeedColor: Codable { var red: Double; var green: Double; var blue: Double; var alpha: Double }
private struct SeedStroke: Codable { var id: UUID; var color: SeedColor; var width: Double; var points: [SeedPoint] }
private struct SeedSticker: Codable {
    var id: UUID; var imagePNG: Data; var position: SeedPoint; var scale: Double; var rotationRadians: Double
}

@Suite struct BoardSnapshotTests {
    static let strokeID = UUID(uuidString: "00000000-0000-0001-0000-000000000002")!
    static let stickerID = UUID(uuidString: "00000000-0000-0001-0000-000000000003")!

    static func sample() -> BoardSnapshot {
        let image = Data([0x89, 0x50, 0x4E, 0x47, 1, 2, 3])
        return BoardSnapshot(
            canvasSize: CodableSize(width: 800, height: 600),
            backgroundPNG: Data([0x89, 0x50, 0x4E, 0x47, 9]),
            strokes: [InkStroke(id: strokeID, color: RGBAColor(red: 1, green: 0.5, blue: 0, alpha: 1), width: 2.5,
                                points: [CodablePoint(x: 1, y: 2), CodablePoint(x: 3.0625, y: -4)])],
            stickers: [PlacedSticker(id: stickerID, imagePNG: image, position: CodablePoint(x: 10, y: 20), scale: 2,
                                     rotationRadians: 0.5, imageSHA256: AssetHash.of(image).hex)],
            backgroundSHA256: AssetHash.of(Data([0x89, 0x50, 0x4E, 0x47, 9])).hex,
            paintOrder: [strokeID, stickerID]
        )
    }

    @Test func canonicalJSONIsStableAndRoundTrips() throws {
        let board = Self.sample()
        let first = try board.canonicalJSON()
        let second = try board.canonicalJSON()
        #expect(first == second)
        let decoded = try JSONDecoder().decode(BoardSnapshot.self, from: first)
        #expect(decoded == board)
        #expect(try decoded.canonicalJSON() == first)
    }

    @Test func canonicalJSONWritesNegativeZeroAsZero() throws {
        var a = Self.sample()
        var b = Self.sample()
        a.stickers[0].rotationRadians = -0.0
        b.stickers[0].rotationRadians = 0.0
        #expect(try a.canonicalJSON() == b.canonicalJSON())
    }

    @Test func manifestDecodesWithASeedOnlyReader() throws {
        let board = Self.sample()
        let manifest = try board.manifestJSON(prettyPrinted: true)
        let seed = try JSONDecoder().decode(SeedBoardSnapshot.self, from: manifest)
        #expect(seed.schemaVersion == BoardSnapshot.currentSchemaVersion)
        #expect(seed.canvasSize.width == 800)
        #expect(seed.backgroundPNG == nil)
        #expect(seed.strokes.map(\.id) == [Self.strokeID])
        #expect(seed.strokes[0].points.map(\.x) == [1, 3.0625])
        #expect(seed.stickers.map(\.id) == [Self.stickerID])
        #expect(seed.stickers[0].imagePNG.isEmpty)
        #expect(seed.stickers[0].rotationRadians == 0.5)
    }

    @Test func seedManifestDecodesWithOurReader() throws {
        // A manifest written by a seed app: schema 1, none of our optional keys.
        let json = """
        {"schemaVersion":1,"canvasSize":{"width":1600,"height":1200},
         "strokes":[{"id":"\(Self.strokeID.uuidString)","color":{"red":0,"green":0,"blue":0,"alpha":1},
                     "width":3,"points":[{"x":1,"y":1}]}],
         "stickers":[{"id":"\(Self.stickerID.uuidString)","imagePNG":"","position":{"x":5,"y":6},
                      "scale":1,"rotationRadians":0}]}
        """
        let board = try JSONDecoder().decode(BoardSnapshot.self, from: Data(json.utf8))
        #expect(board.schemaVersion == 1)
        #expect(board.paintOrder == nil)
        #expect(board.backgroundSHA256 == nil)
        #expect(board.stickers[0].imageSHA256 == nil)
        #expect(!board.stickers[0].isPending, "a seed sticker without a hash is not pending")
    }

    @Test func pendingAssetsAreReported() {
        var board = Self.sample()
        board.stickers[0].imagePNG = Data()
        board.backgroundPNG = nil
        #expect(board.pendingStickerIDs == [Self.stickerID])
        #expect(board.isBackgroundPending)
    }
}
