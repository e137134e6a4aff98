import Foundation
import Testing

/// The programs under Examples/ run as a user would run them (built by bin/test).
@Suite struct ExampleProgramTests {
    /// `LiveBoardExample`: two live boards on an embedded server; alice sees bob's move, and
    /// both close with every edit acknowledged.
    @Test func theLiveBoardExampleRunsAndClosesAcknowledged() throws {
        let workspace = try Workspace()
        var example = workspace.cli
        example.program = URL(fileURLWithPath: CLI.binary).deletingLastPathComponent().appendingPathComponent("LiveBoardExample").path
        let result = try example.run([])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("alice sees") && $0.contains("500") }, "alice saw the sticker moved to x 500: \(result.stdout)")
        #expect(lines.filter { $0.hasPrefix("closed") && $0.hasSuffix("every edit acknowledged") }.count == 2, "\(result.stdout)")
    }
}
