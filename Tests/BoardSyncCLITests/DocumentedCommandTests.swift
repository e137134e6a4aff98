import BoardModel
import Foundation
import Testing

/// The README's command blocks are tests (issue 23): each shell block runs as written, in
/// order, in one temp directory holding the images the examples name, with `bin/board-sync`
/// the binary `bin/test` built. A block that cannot run here (it starts a server that runs
/// until stopped, needs Redis, or runs the suite itself) is marked in the README, on the line
/// before it, `<!-- doc-test: skip (why) -->`, and skipped by that mark: an unmarked block
/// that fails fails the suite, so the docs cannot drift from what the tool does.
@Suite struct DocumentedCommandTests {
    struct Block {
        var line: Int
        var text: String
        var skipped: String?
    }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The fenced blocks of a Markdown file with the skip mark before each, if any.
    static func blocks(of file: String) throws -> [Block] {
        let lines = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8).components(separatedBy: "\n")
        var blocks: [Block] = []
        var index = 0
        while index < lines.count {
            guard lines[index].hasPrefix("```") else { index += 1; continue }
            let start = index
            var body: [String] = []
            index += 1
            while index < lines.count, !lines[index].hasPrefix("```") { body.append(lines[index]); index += 1 }
            index += 1
            let before = start > 0 ? lines[start - 1].trimmingCharacters(in: .whitespaces) : ""
            var skipped: String?
            if before.hasPrefix("<!-- doc-test: skip") { skipped = before }
            blocks.append(Block(line: start + 1, text: body.joined(separator: "\n"), skipped: skipped))
        }
        return blocks
    }

    /// A block of commands (every line a `bin/` command, a variable set from one, or a comment),
    /// as opposed to code or file contents.
    static func isShell(_ block: Block) -> Bool {
        let lines = block.text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return !lines.isEmpty && lines.allSatisfy { line in
            line.hasPrefix("bin/") || line.hasPrefix("#") || line.range(of: #"^[A-Za-z_]+=(\$\()?bin/"#, options: .regularExpression) != nil
                || line.range(of: #"^[A-Z_]+=\S+ bin/"#, options: .regularExpression) != nil
        }
    }

    @Test func theReadmesCommandBlocksRunAsWritten() throws {
        let blocks = try Self.blocks(of: "README.md")
        let shell = blocks.filter(Self.isShell)
        #expect(shell.count >= 5, "the README's command blocks were found")
        let workspace = try Workspace()
        for (name, size) in [("cat.png", (20, 14)), ("dog.png", (12, 18))] {
            try Data(PNGEncoder.solid(width: size.0, height: size.1, red: 200, green: 120, blue: 40))
                .write(to: URL(fileURLWithPath: workspace.path + "/" + name))
        }
        try FileManager.default.createDirectory(atPath: workspace.path + "/bin", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: workspace.path + "/bin/board-sync", withDestinationPath: CLI.binary)
        var ran = 0
        for block in shell {
            if let mark = block.skipped {
                print("DocumentedCommandTests: README.md line \(block.line) skipped: \(mark)")
                continue
            }
            let script = "set -euo pipefail\n" + block.text + "\n"
            let bash = CLI(directory: workspace.path, program: "/bin/bash")
            let result = try bash.run(["-c", script])
            #expect(result.status == 0, "README.md line \(block.line) failed (\(result.status)):\n\(block.text)\n\(result.stderr)")
            ran += 1
        }
        #expect(ran >= 3, "ran \(ran) blocks")
        // What the blocks made is there: the package and the pictures.
        for file in ["Weekend.boardpkg/manifest.json", "weekend.png", "weekend.pdf", "weekend.svg"] {
            #expect(FileManager.default.fileExists(atPath: workspace.path + "/" + file), "\(file) was made")
        }
    }

    /// Every block that is skipped says why, and every shell block in the README either runs
    /// or is skipped by its mark (none is silently left out).
    @Test func everySkippedBlockSaysWhy() throws {
        for block in try Self.blocks(of: "README.md") where block.skipped != nil {
            #expect(block.skipped!.contains("("), "README.md line \(block.line): a skip mark gives its reason in parentheses")
        }
    }
}
