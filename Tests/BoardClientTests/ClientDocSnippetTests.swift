import BoardClient
import BoardModel
import Foundation
import Testing

// docs/CLIENT.md, "Apps: the observable model" → "The save path": the function below holds that
// snippet line for line, so the snippet compiles with the tests; the test compares the two, so
// they cannot drift apart. Compiled, never run (it would write into the working directory).
@MainActor func clientDocSaveSnippet(photoPNG: Data, stickerPNG: Data) async throws {
// CLIENT.md save snippet begins
let model = LiveBoardModel(board: try LiveBoard.open(storage: .memory))
try await model.start(from: .photoBoard(photoPNG))                 // or .blankBoard
model.edit { try $0.addSticker(imagePNG: stickerPNG, at: CodablePoint(x: 40, y: 40)) }
model.autosave = { model in print("unsaved changes") }           // after every change (isDirty)
try await model.write(to: "Copy.boardpkg", configuration: WriteConfiguration(contentType: .boardPackage))
try await model.write(to: "Copy.png", configuration: WriteConfiguration(contentType: .png))
// By hand, as the seed's document does (the writer's disk work is yours to move off the main actor):
await model.flush()
let snapshot = try model.snapshot(contentType: .boardPackage)      // Sendable
let writer = model.writer(configuration: WriteConfiguration(contentType: .boardPackage))
try writer.write(content: snapshot, to: "Copy.boardpkg", previous: nil)
model.markSaved()
// CLIENT.md save snippet ends
    _ = await model.board.close()
}

@Suite struct ClientDocSnippetTests {
    @Test func theClientDocSaveSnippetIsTheCompiledOne() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("docs/CLIENT.md"), encoding: .utf8)
        let source = try String(contentsOf: here, encoding: .utf8)
        let lines = source.components(separatedBy: "\n")
        let start = try #require(lines.firstIndex(of: "// CLIENT.md save snippet begins"))
        let end = try #require(lines.firstIndex(of: "// CLIENT.md save snippet ends"))
        let compiled = lines[(start + 1)..<end].joined(separator: "\n")
        let section = try #require(doc.range(of: "### The save path"))
        let block = try #require(doc.range(of: "```swift\n", range: section.upperBound..<doc.endIndex))
        let close = try #require(doc.range(of: "\n```", range: block.upperBound..<doc.endIndex))
        #expect(String(doc[block.upperBound..<close.lowerBound]) == compiled)
    }
}
