import BoardClient
import Foundation
import Testing

// README.md, "Using the library" → "Live client": the function below holds that snippet line
// for line (after its `import BoardClient`), so the snippet compiles with the tests; the test
// compares the two, so they cannot drift apart. Compiled, never run (it would dial 7420).
@Sendable func readmeLiveClientSnippet() async throws {
// README snippet begins
let board = try LiveBoard.open(storage: .package(path: "Weekend.boardpkg"),
                               sync: LiveBoard.Sync(server: "127.0.0.1:7420", board: "weekend"))
let running = Task { try await board.run() }
for await update in board.updates where update.isRemote { print(update.changes) }
// README snippet ends
    running.cancel()
}

@Suite struct ReadmeSnippetTests {
    @Test func theReadmeLiveClientSnippetIsTheCompiledOne() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: here, encoding: .utf8)
        let lines = source.components(separatedBy: "\n")
        let start = try #require(lines.firstIndex(of: "// README snippet begins"))
        let end = try #require(lines.firstIndex(of: "// README snippet ends"))
        let compiled = (["import BoardClient", ""] + lines[(start + 1)..<end]).joined(separator: "\n")
        let section = try #require(readme.range(of: "### Live client"))
        let block = try #require(readme.range(of: "```swift\n", range: section.upperBound..<readme.endIndex))
        let close = try #require(readme.range(of: "\n```", range: block.upperBound..<readme.endIndex))
        #expect(String(readme[block.upperBound..<close.lowerBound]) == compiled)
    }
}
