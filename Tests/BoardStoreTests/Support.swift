import BoardCRDT
import BoardModel
import BoardStore
import Foundation
import Testing

let pngRed = Data(PNGEncoder.solid(width: 4, height: 3, red: 255, green: 0, blue: 0))
let pngBlue = Data(PNGEncoder.solid(width: 2, height: 2, red: 0, green: 0, blue: 255))
let pngGreen = Data(PNGEncoder.solid(width: 5, height: 5, red: 0, green: 200, blue: 0))

func pt(_ x: Double, _ y: Double) -> CodablePoint { CodablePoint(x: x, y: y) }

/// Hands out distinct replica ids deterministically.
final class IDSource: @unchecked Sendable {  // used from one test's thread only
    private var next: UInt64
    init(start: UInt64 = 0x1000) { next = start }
    func make() -> ReplicaID {
        next += 1
        return ReplicaID(next)
    }
}

/// The seed's model exactly as the founding document declares it.
struct SeedBoardSnapshot: Codable {
    struct Size: Codable { var width: Double; var height: Double }
    struct Point: Codable { var x: Double; var y: Double }
    struct Color: Codable { var red: Double; var green: Double; var blue: Double; var alpha: Double }
    struct Stroke: Codable { var id: UUID; var color: Color; var width: Double; var points: [Point] }
    struct Sticker: Codable { var id: UUID; var imagePNG: Data; var position: Point; var scale: Double; var rotationRadians: Double }
    var schemaVersion: Int
    var canvasSize: Size
    var backgroundPNG: Data?
    var strokes: [Stroke]
    var stickers: [Sticker]
}

/// A temp directory removed at the end of the test.
final class TempDirectory {
    let path: String
    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("boardsync-test-\(UUID().uuidString)").path
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Builds a package with two stickers and a stroke on `fileSystem` at `/boards/Test.boardpkg`.
func makeSamplePackage(_ fileSystem: any FileSystem, ids: IDSource, path: String = "/boards/Test.boardpkg") throws -> (BoardPackage, sticker: ItemID, other: ItemID, stroke: ItemID) {
    let package = try BoardPackage.create(at: path, fileSystem: fileSystem, replicaID: ids.make())
    let sticker = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(10, 10)) }.item!
    let other = try package.commit { try $0.addSticker(imagePNG: pngBlue, at: pt(50, 50)) }.item!
    let stroke = try package.commit { replica in
        let edit = try replica.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 0), width: 2, points: [pt(0, 0), pt(5, 5)])
        replica.finishStroke()
        return edit
    }.item!
    _ = try package.commit { try $0.setBackground(imagePNG: pngGreen) }
    try package.save()
    return (package, sticker, other, stroke)
}
