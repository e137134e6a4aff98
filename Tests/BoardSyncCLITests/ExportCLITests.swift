import BoardModel
import Foundation
import Testing

/// `board-sync export` as a real process: PNG, PDF and SVG files by extension, scale, warnings
/// for images that have not arrived, and refusals that write nothing.
@Suite struct ExportCLITests {
    func bytes(_ workspace: Workspace, _ name: String) throws -> [UInt8] {
        try [UInt8](Data(contentsOf: URL(fileURLWithPath: workspace.path + "/" + name)))
    }

    @Test func aBoardExportsToPNGPDFAndSVG() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "B.boardpkg", "--canvas", "300x200")
        try cli.run("stroke", "B.boardpkg", "--points", "10,10 290,190", "--color", "#0000FFFF", "--width", "6")
        try cli.run("sticker", "B.boardpkg", "--image", "red.png", "--at", "150,100", "--scale", "4")
        let png = try cli.run("export", "B.boardpkg", "board.png")
        #expect(png.status == 0 && png.stdout.contains("wrote board.png (PNG"), "\(png.stderr)")
        let pngBytes = try bytes(workspace, "board.png")
        #expect(pngBytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
        func be32(_ b: [UInt8], _ at: Int) -> Int { Int(b[at]) << 24 | Int(b[at + 1]) << 16 | Int(b[at + 2]) << 8 | Int(b[at + 3]) }
        #expect(be32(pngBytes, 16) == 300 && be32(pngBytes, 20) == 200, "one pixel per point")
        let scaled = try cli.run("export", "B.boardpkg", "big.png", "--scale", "2.5", "--json")
        let info = try #require(try JSONSerialization.jsonObject(with: Data(scaled.stdout.utf8)) as? [String: Any], "\(scaled.stdout)")
        #expect(info["contentType"] as? String == "public.png" && (info["warnings"] as? [String])?.isEmpty == true)
        let big = try bytes(workspace, "big.png")
        #expect(be32(big, 16) == 750 && be32(big, 20) == 500)

        let pdf = try cli.run("export", "B.boardpkg", "board.pdf")
        #expect(pdf.status == 0, "\(pdf.stderr)")
        let pdfText = String(decoding: try bytes(workspace, "board.pdf"), as: UTF8.self)
        #expect(pdfText.hasPrefix("%PDF-1.4") && pdfText.contains("/MediaBox [0 0 300 200]"))
        let svg = try cli.run("export", "B.boardpkg", "board.SVG", "--transparent")
        #expect(svg.status == 0, "\(svg.stderr)")
        let svgText = String(decoding: try bytes(workspace, "board.SVG"), as: UTF8.self)
        #expect(svgText.contains("<polyline") && svgText.contains("<image") && !svgText.contains("id=\"paper\""))
        // Exporting again gives the same bytes.
        try cli.run("export", "B.boardpkg", "again.png")
        #expect(try bytes(workspace, "again.png") == pngBytes)
    }

    @Test func pendingImagesAreWarnedAboutAndBadRequestsWriteNothing() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "P.boardpkg")
        try cli.run("sticker", "P.boardpkg", "--image", "red.png", "--at", "50,50")
        // The image file goes missing from the package (as if it had not arrived).
        let stickers = workspace.path + "/P.boardpkg/stickers"
        for file in try FileManager.default.contentsOfDirectory(atPath: stickers) {
            try FileManager.default.removeItem(atPath: stickers + "/" + file)
        }
        let assets = workspace.path + "/P.boardpkg/sync/assets"
        for file in (try? FileManager.default.contentsOfDirectory(atPath: assets)) ?? [] {
            try FileManager.default.removeItem(atPath: assets + "/" + file)
        }
        let pending = try cli.run("export", "P.boardpkg", "p.png")
        #expect(pending.status == 0, "\(pending.stderr)")
        #expect(pending.stderr.contains("warning: sticker") && pending.stderr.contains("placeholder"), "\(pending.stderr)")

        for (arguments, code, words) in [
            (["export", "P.boardpkg", "p.jpg"], Int32(64), "must end in .png, .pdf or .svg"),
            (["export", "P.boardpkg", "copy.boardpkg"], 64, "must end in"),
            (["export", "P.boardpkg", "P.boardpkg/inside.png"], 64, "inside the package"),
            (["export", "P.boardpkg", "q.png", "--scale", "0"], 64, "--scale"),
            (["export", "P.boardpkg", "q.png", "--scale", "abc"], 64, "--scale"),
            (["export", "Missing.boardpkg", "q.png"], 1, "no board package"),
            (["export", "P.boardpkg"], 64, "<output>"),
        ] {
            let result = try cli.run(arguments)
            #expect(result.status == code, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(words), "\(arguments): \(result.stderr)")
        }
        // Too large: refused before anything is drawn or written.
        try cli.run("new", "Huge.boardpkg", "--canvas", "20000x20000")
        let huge = try cli.run("export", "Huge.boardpkg", "huge.png", "--scale", "2")
        #expect(huge.status == 1 && huge.stderr.contains("larger than"), "\(huge.stderr)")
        for name in ["q.png", "huge.png", "P.boardpkg/inside.png", "p.jpg"] {
            #expect(!FileManager.default.fileExists(atPath: workspace.path + "/" + name), "\(name)")
        }
        // A folder in the way is not replaced.
        try FileManager.default.createDirectory(atPath: workspace.path + "/folder.png", withIntermediateDirectories: false)
        let folder = try cli.run("export", "P.boardpkg", "folder.png")
        #expect(folder.status == 1 && folder.stderr.contains("folder"), "\(folder.stderr)")
    }
}
