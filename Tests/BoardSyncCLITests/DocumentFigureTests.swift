import Foundation
import Testing

/// The figures docs quote in prose are made, not typed: `bin/doc-figures` runs the seeded command
/// each `<!-- figure: COMMAND | WHAT -->` span names and writes what it printed between the
/// marks; here it runs with `--check` (and with the debug builds `bin/test` made), so a figure
/// that drifts from its command fails the suite. Long figures (`figure (long)`) are left to
/// `bin/doc-figures --long`, by hand.
@Suite struct DocumentFigureTests {
    static func docFigures(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let built = URL(fileURLWithPath: CLI.binary).deletingLastPathComponent()
        let process = Process()
        process.executableURL = DocumentedCommandTests.root.appendingPathComponent("bin/doc-figures")
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["BOARD_SIM"] = built.appendingPathComponent("board-sim").path
        environment["BOARD_SYNC"] = built.appendingPathComponent("board-sync").path
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// The figures the docs quote in prose (`<!-- figure: COMMAND | WHAT -->`) are what their
    /// commands print now: `bin/doc-figures --check` over every doc, with the debug builds.
    @Test func theProseFiguresAreWhatTheirCommandsPrint() throws {
        let started = Date()
        let result = try Self.docFigures(["--check"])
        print("DocumentFigureTests: bin/doc-figures --check took \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("every figure matches its command"), "\(result.output)")
        var figures = 0
        for file in DocumentedCommandTests.documents {
            figures += try String(contentsOf: DocumentedCommandTests.root.appendingPathComponent(file), encoding: .utf8).components(separatedBy: "<!-- figure: ").count - 1
        }
        #expect(figures >= 4, "the figures were found (\(figures))")
    }

    /// `bin/doc-figures` itself: `--check` fails on a figure that drifted and names it, the
    /// default mode writes the printed value between the marks (and nothing else), and then
    /// `--check` passes; a figure whose command prints no such value is an error.
    @Test func docFiguresRewritesAndChecksMarkedSpans() throws {
        let workspace = try Workspace()
        let doc = workspace.path + "/doc.md"
        let report = try CLI(directory: workspace.path, program: URL(fileURLWithPath: CLI.binary).deletingLastPathComponent()
            .appendingPathComponent("board-sim").path).run(["--seed", "1", "--peers", "1", "--edits", "2"])
        let operations = try #require(report.stdout.split(separator: "\n").first { $0.hasPrefix("operations ") }?
            .dropFirst("operations ".count).prefix { $0.isNumber }, "\(report.stdout)")
        let figure = "<!-- figure: bin/board-sim --seed 1 --peers 1 --edits 2 | operations -->"
        let drifted = "# Doc\nA seed makes \(figure)999999<!-- /figure --> operations, \(figure)999999<!-- /figure --> again.\nThe end."
        try Data(drifted.utf8).write(to: URL(fileURLWithPath: doc))
        let check = try Self.docFigures(["--check", doc])
        #expect(check.status == 1, "\(check.output)")
        #expect(check.output.contains("doc.md:2: `bin/board-sim --seed 1 --peers 1 --edits 2` (operations) gives '\(operations)', the doc says '999999'"),
                "\(check.output)")
        #expect(try String(contentsOfFile: doc, encoding: .utf8) == drifted, "--check writes nothing")
        let write = try Self.docFigures([doc])
        #expect(write.status == 0, "\(write.output)")
        #expect(try String(contentsOfFile: doc, encoding: .utf8) == drifted.replacingOccurrences(of: "999999", with: String(operations)))
        #expect(try Self.docFigures(["--check", doc]).status == 0)
        try Data("\(figure.replacingOccurrences(of: "operations", with: "failed"))1 of 2<!-- /figure -->\n".utf8).write(to: URL(fileURLWithPath: doc))
        let missing = try Self.docFigures(["--check", doc])
        #expect(missing.status == 1 && missing.output.contains("printed no 'failed'"), "\(missing.output)")
    }

}
