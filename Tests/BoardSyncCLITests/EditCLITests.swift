import BoardModel
import Foundation
import Testing

/// Every edit the library has, from the command line: images, stroke style, canvas, background,
/// paint order between two items.
@Suite struct EditCLITests {
    /// Issue 23, finding 1: a number a board cannot hold is refused with its flag named (exit
    /// 64) and nothing changes; it is never clamped or rounded away silently.
    /// Issue 23, finding 10: a mistyped subcommand or option gets the closest real one.
    @Test func aMistypedNameGetsDidYouMean() throws {
        let workspace = try Workspace()
        let cases: [([String], String)] = [
            (["mvoe"], "did you mean move?"), (["sycn"], "did you mean sync?"), (["help", "stroek"], "did you mean stroke?"),
            (["serve", "--data", "d", "--max-conections", "3"], "did you mean --max-connections?"),
            (["move", "X.boardpkg", "--too", "1,1"], "did you mean --to?"),
        ]
        for (arguments, hint) in cases {
            let result = try workspace.cli.run(arguments)
            #expect(result.status == 64 && result.stderr.contains(hint), "\(arguments): \(result.stderr)")
        }
        let unknown = try workspace.cli.run(["zzzz"])
        #expect(unknown.status == 64 && !unknown.stderr.contains("did you mean"), "no wild guesses: \(unknown.stderr)")
    }

    @Test func numbersABoardCannotHoldAreRefusedWithTheFlagNamed() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "N.boardpkg")
        let sticker = try cli.run("sticker", "N.boardpkg", "--image", "red.png", "--at", "10,10").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let stroke = try cli.run("stroke", "N.boardpkg", "--points", "1,1 2,2").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let before = try workspace.board("N.boardpkg")
        let cases: [([String], String)] = [
            (["move", "N.boardpkg", sticker, "--to", "1e300,2"], "--to '1e300' is outside"),
            (["move", "N.boardpkg", sticker, "--to", "2,-2000000000000"], "--to '-2000000000000' is outside"),
            (["sticker", "N.boardpkg", "--image", "red.png", "--at", "1,1", "--scale", "0"], "--scale '0' must be positive"),
            (["transform", "N.boardpkg", sticker, "--scale", "-1"], "--scale '-1' must be positive"),
            (["stroke", "N.boardpkg", "--points", "1,1", "--width", "0"], "--width '0' must be positive"),
            (["style", "N.boardpkg", stroke, "--width", "-3"], "--width '-3' must be positive"),
            (["stroke", "N.boardpkg", "--points", "1,1 5e12,1"], "--points '5e12' is outside"),
            (["canvas", "N.boardpkg", "--size", "1600x"], "is not a size WxH"),
            (["canvas", "N.boardpkg", "--size", "3e12x10"], "the most a board holds"),
            (["serve", "--data", "d", "--max-connections", "2.5"], "--max-connections '2.5' must be a whole number"),
        ]
        for (arguments, message) in cases {
            let result = try cli.run(arguments)
            #expect(result.status == 64 && result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        #expect(try workspace.board("N.boardpkg") == before, "nothing changed")
    }

    @Test func imagesStylesCanvasBackgroundAndBetween() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try Data(PNGEncoder.solid(width: 5, height: 5, red: 0, green: 0, blue: 255)).write(to: URL(fileURLWithPath: workspace.path + "/blue.png"))
        try cli.run("new", "E.boardpkg")
        let sticker = try cli.run("sticker", "E.boardpkg", "--image", "red.png", "--at", "10,10").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let low = try cli.run("stroke", "E.boardpkg", "--points", "1,1 2,2").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let high = try cli.run("stroke", "E.boardpkg", "--points", "3,3 4,4").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let red = Data(PNGEncoder.solid(width: 8, height: 8, red: 255, green: 0, blue: 0))
        let blue = try Data(contentsOf: URL(fileURLWithPath: workspace.path + "/blue.png"))

        #expect(try cli.run("image", "E.boardpkg", sticker, "--image", "blue.png").status == 0)
        var board = try workspace.board("E.boardpkg")
        // `show --json` names images by hash (the manifest's shape).
        #expect(board.stickers.first?.imageSHA256 == AssetHash.of(blue).hex && board.stickers.first?.position == CodablePoint(x: 10, y: 10))

        #expect(try cli.run("style", "E.boardpkg", low, "--color", "#00FF0080", "--width", "7").status == 0)
        board = try workspace.board("E.boardpkg")
        let styled = try #require(board.strokes.first { $0.id.uuidString == low })
        #expect(styled.width == 7 && styled.color.green == 1 && abs(styled.color.alpha - 128.0 / 255) < 0.01)
        // One undo step for both fields.
        try cli.run("undo", "E.boardpkg")
        board = try workspace.board("E.boardpkg")
        let unstyled = try #require(board.strokes.first { $0.id.uuidString == low })
        #expect(unstyled.width == 2 && unstyled.color == RGBAColor.black)

        #expect(try cli.run("canvas", "E.boardpkg", "--size", "640x480").status == 0)
        #expect(try workspace.board("E.boardpkg").canvasSize == CodableSize(width: 640, height: 480))
        #expect(try cli.run("background", "E.boardpkg", "--image", "red.png").status == 0)
        #expect(try workspace.board("E.boardpkg").backgroundSHA256 == AssetHash.of(red).hex)
        #expect(try cli.run("background", "E.boardpkg", "--none").status == 0)
        #expect(try workspace.board("E.boardpkg").backgroundSHA256 == nil)

        // Paint order: sticker, low, high → put the sticker between low and high.
        #expect(try cli.run("between", "E.boardpkg", sticker, "--above", low, "--below", high).status == 0)
        let order = try #require(try workspace.board("E.boardpkg").paintOrder).map(\.uuidString)
        #expect(order == [low, sticker, high], "\(order)")

        // Refusals change nothing.
        let before = try cli.run("show", "E.boardpkg", "--json").stdout
        let refused: [([String], Int32)] = [
            (["style", "E.boardpkg", sticker, "--width", "3"], 1),            // a sticker has no ink
            (["image", "E.boardpkg", low, "--image", "blue.png"], 1),          // a stroke has no image
            (["style", "E.boardpkg", low], 64),
            (["style", "E.boardpkg", low, "--width", "-1"], 64),
            (["image", "E.boardpkg", sticker, "--image", "missing.png"], 1),
            (["canvas", "E.boardpkg", "--size", "0x10"], 64),
            (["background", "E.boardpkg", "--image", "red.png", "--none"], 64),
            (["background", "E.boardpkg"], 64),
            (["between", "E.boardpkg", sticker, "--above", sticker, "--below", high], 1),
            (["between", "E.boardpkg", sticker, "--above", low], 64),
        ]
        for (arguments, code) in refused {
            let result = try cli.run(arguments)
            #expect(result.status == code, "\(arguments): \(result.stderr)")
            #expect(result.stderr.hasPrefix("Error:"), "\(arguments): \(result.stderr)")
        }
        #expect(try cli.run("show", "E.boardpkg", "--json").stdout == before)

        // `log --json` carries every field: points, whole hashes, z keys, colours, canvas.
        let log = try cli.run("log", "E.boardpkg", "--json")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(log.stdout.utf8)) as? [[String: Any]])
        let begin = try #require(entries.first { $0["kind"] as? String == "beginStroke" && $0["item"] as? String == high })
        #expect(begin["points"] as? [[Double]] == [[3, 3], [4, 4]])
        #expect(begin["color"] as? String == "#000000FF" && begin["width"] as? Double == 2)
        #expect((begin["z"] as? String)?.isEmpty == false)
        let replaced = try #require(entries.last { $0["kind"] as? String == "set" && $0["field"] as? String == "asset" })
        #expect(replaced["value"] as? String == AssetHash.of(blue).hex, "the whole hash")
        let resized = try #require(entries.last { $0["kind"] as? String == "setBoard" && $0["field"] as? String == "canvas" })
        #expect(resized["value"] as? [Double] == [640, 480])
        let cleared = try #require(entries.last { $0["kind"] as? String == "setBoard" && $0["field"] as? String == "background" })
        #expect(cleared["value"] is NSNull)
    }
}
