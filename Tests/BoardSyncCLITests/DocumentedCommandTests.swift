import BoardModel
import Foundation
import Testing

/// Documented commands are tests (issue 23): every command block of README.md and docs/*.md
/// runs as written, block after block in the file's order, in one temp directory per file
/// (the images the examples name, `Simulations/` for scenario files, and `bin/board-sync` and
/// `bin/board-sim` being the binaries `bin/test` built). An unmarked block that fails fails the
/// suite, so the docs cannot drift from what the tools do. Files run in parallel.
///
/// A command block is a fenced block (no language, or `sh`/`bash`/`shell`) whose lines are all
/// commands (`bin/…`, or a program in `programs` such as `openssl` or `redis-server`, maybe after
/// `VAR=`), comments, or continuations of a line ending in `\`. Any other fenced block (code,
/// grammars, diagrams, file contents) is not run; a block that mixes commands with other lines,
/// or quotes a shell prompt (`$ bin/…`), is an error: split it into commands and their output.
///
/// Marks, on the line right before a block, `;`-separated inside one comment:
/// - `<!-- doc-test: skip (why) -->`: not run (servers that run until stopped, remote hosts,
///   systemd, fuzzing; `skip (long: run by hand)` for long runs); the reason is printed.
/// - `<!-- doc-test: needs PROGRAM -->`: runs only where PROGRAM (`redis-server`, `chromium`,
///   `openssl`) is installed (`.ci/run` installs them); elsewhere printed as SKIPPED, loudly.
/// - `<!-- doc-test: exit N -->`: the block is meant to fail: it runs without `set -e` and its
///   last command must exit N.
/// - `<!-- doc-test: output -->` before a ```` ```text ```` block right after a command block: the
///   output the doc quotes. Each of its lines must be a line of that block's output (stdout and
///   stderr together), in order, others allowed between them; `...` lines are for the reader and
///   left out; inside a line `…` stands for any text and `~` before a number (`~0.48 s`) for any
///   number, because timings are never the same twice: deterministic figures are written as
///   printed and checked exactly.
///
/// Failures DEPLOYMENT.md quotes in prose (TLS) are checked against its own throwaway
/// certificate (`checkTLSFailures`). Figures quoted in prose are not typed but written by
/// `bin/doc-figures` (marked spans; see that script), which `DocumentFigureTests` runs with
/// `--check`.
@Suite struct DocumentedCommandTests {
    struct Block {
        var file: String
        var line: Int
        /// The fence's info string (`text`, `swift`, or empty).
        var info: String
        var text: String
        /// The doc-test marks on the line before it (`skip (why)`, `needs redis-server`, ...).
        var marks: [String]

        var skip: String? { marks.first { $0.hasPrefix("skip") } }
        var needs: [String] { marks.filter { $0.hasPrefix("needs ") }.map { String($0.dropFirst(6)).trimmingCharacters(in: .whitespaces) } }
        var exit: Int32? { marks.first { $0.hasPrefix("exit ") }.flatMap { Int32($0.dropFirst(5).trimmingCharacters(in: .whitespaces)) } }
        var isOutput: Bool { marks.contains("output") }
        var place: String { "\(file) line \(line)" }
    }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// README.md and every docs/*.md (a new doc is covered without touching this file).
    static let documents: [String] = {
        let docs = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)) ?? []
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }()

    /// Programs a command line may start with besides `bin/…`.
    static let programs = ["openssl", "redis-server", "redis-cli", "swift", "python3", "curl", "systemctl", "journalctl", "useradd", "sudo",
                           "chmod", "chgrp", "cp", "mkdir", "cd", "ls", "cat", "rm"]

    /// The fenced blocks of a Markdown text with the marks before each.
    static func blocks(of text: String, file: String) -> [Block] {
        let lines = text.components(separatedBy: "\n")
        var blocks: [Block] = []
        var index = 0
        while index < lines.count {
            guard lines[index].hasPrefix("```") else { index += 1; continue }
            let start = index
            let info = lines[index].dropFirst(3).trimmingCharacters(in: .whitespaces)
            var body: [String] = []
            index += 1
            while index < lines.count, !lines[index].hasPrefix("```") { body.append(lines[index]); index += 1 }
            index += 1
            let before = start > 0 ? lines[start - 1].trimmingCharacters(in: .whitespaces) : ""
            var marks: [String] = []
            if before.hasPrefix("<!-- doc-test:"), before.hasSuffix("-->") {
                marks = splitMarks(String(before.dropFirst("<!-- doc-test:".count).dropLast(3)))
            }
            blocks.append(Block(file: file, line: start + 1, info: info, text: body.joined(separator: "\n"), marks: marks))
        }
        return blocks
    }

    /// The marks of one comment, split at `;` outside parentheses (a reason may hold `;`).
    static func splitMarks(_ text: String) -> [String] {
        var marks: [String] = []
        var current = ""
        var depth = 0
        for character in text {
            if character == "(" { depth += 1 } else if character == ")" { depth = max(0, depth - 1) }
            if character == ";", depth == 0 {
                marks.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        marks.append(current)
        return marks.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    static func blocks(of file: String) throws -> [Block] {
        blocks(of: try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8), file: file)
    }

    /// Whether a line (trimmed) is a command: `bin/…` or a known program, maybe after `VAR=value `
    /// or `VAR=$(`.
    static func isCommand(_ line: String) -> Bool {
        var rest = Substring(line)
        while let match = rest.range(of: #"^[A-Za-z_][A-Za-z0-9_]*=(\$\(|\S+\s+)"#, options: .regularExpression) {
            rest = rest[match.upperBound...]
        }
        if rest.hasPrefix("bin/") { return true }
        let word = rest.prefix { !$0.isWhitespace }
        return programs.contains(String(word))
    }

    /// A block of commands (see the header), as opposed to code, grammars or file contents.
    static func isCommands(_ block: Block) -> Bool {
        guard ["", "sh", "bash", "shell"].contains(block.info) else { return false }
        var continued = false
        var any = false
        for raw in block.text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            defer { continued = line.hasSuffix("\\") }
            if line.isEmpty || continued || line.hasPrefix("#") { continue }
            guard isCommand(line) else { return false }
            any = true
        }
        return any
    }

    /// Whether a block looks like commands without being a command block (a prompt, or a mix).
    static func looksLikeCommands(_ block: Block) -> Bool {
        guard ["", "sh", "bash", "shell", "console"].contains(block.info) else { return false }
        return block.text.split(separator: "\n").contains { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            return trimmed.hasPrefix("$ ") || trimmed.hasPrefix("bin/")
        }
    }

    // MARK: Quoted output

    /// A pattern for one quoted line: `…` any text, `~N` any number, the rest literal.
    static func pattern(for quoted: String) -> NSRegularExpression {
        var regex = "^"
        var literal = ""
        func flush() { regex += NSRegularExpression.escapedPattern(for: literal); literal = "" }
        var characters = Substring(quoted.trimmingCharacters(in: .whitespaces))
        while let character = characters.first {
            if character == "…" {
                flush(); regex += ".*"; characters = characters.dropFirst()
            } else if character == "~", let number = characters.dropFirst().range(of: #"^[0-9][0-9,]*(\.[0-9]+)?"#, options: .regularExpression) {
                flush(); regex += #"[0-9][0-9,]*(\.[0-9]+)?"#; characters = characters[number.upperBound...]
            } else {
                literal.append(character); characters = characters.dropFirst()
            }
        }
        flush()
        regex += "$"
        return try! NSRegularExpression(pattern: regex)
    }

    /// The first quoted line that the output does not have (in order), or nil when all match.
    static func unmatched(quoted: String, output: String) -> String? {
        let lines = output.components(separatedBy: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        var next = 0
        for quotedLine in quoted.components(separatedBy: "\n") {
            let trimmed = quotedLine.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed == "..." { continue }
            let regex = pattern(for: trimmed)
            guard let found = lines[next...].firstIndex(where: { regex.firstMatch(in: $0, range: NSRange($0.startIndex..., in: $0)) != nil }) else {
                return quotedLine
            }
            next = found + 1
        }
        return nil
    }

    // MARK: Running

    static func installed(_ program: String) -> Bool {
        let names = program == "chromium" ? ["chromium", "chromium-browser"] : [program]
        return names.contains { name in ["/usr/bin/", "/usr/local/bin/", "/bin/"].contains { FileManager.default.isExecutableFile(atPath: $0 + name) } }
    }

    /// A temp directory like the one a reader has: the images the examples name, the
    /// repository's `Simulations/` (scenario files), and `bin/` with the tools `bin/test` built.
    static func workspace() throws -> Workspace {
        let workspace = try Workspace()
        for (name, size) in [("cat.png", (20, 14)), ("dog.png", (12, 18))] {
            try Data(PNGEncoder.solid(width: size.0, height: size.1, red: 200, green: 120, blue: 40))
                .write(to: URL(fileURLWithPath: workspace.path + "/" + name))
        }
        let fileManager = FileManager.default
        try fileManager.createDirectory(atPath: workspace.path + "/bin", withIntermediateDirectories: true)
        let built = URL(fileURLWithPath: CLI.binary).deletingLastPathComponent()
        for tool in ["board-sync", "board-sim"] {
            try fileManager.createSymbolicLink(atPath: workspace.path + "/bin/" + tool, withDestinationPath: built.appendingPathComponent(tool).path)
        }
        try fileManager.createSymbolicLink(atPath: workspace.path + "/Simulations", withDestinationPath: root.appendingPathComponent("Simulations").path)
        return workspace
    }

    /// Runs a block with bash in `directory` (at most 10 minutes), stdout and stderr together.
    static func run(_ block: Block, in directory: String) throws -> (status: Int32, output: String) {
        let options = block.exit == nil ? "set -euo pipefail" : "set -uo pipefail"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        process.arguments = ["-k", "5", "600", "/bin/bash", "-c", options + "\n" + block.text + "\n"]
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Every command block of one file runs as written (or is skipped by its mark, saying so),
    /// and every output it quotes is what it printed.
    @Test(arguments: documents)
    func theCommandBlocksRunAsWritten(_ file: String) throws {
        let blocks = try Self.blocks(of: file)
        let workspace = try Self.workspace()
        let started = Date()
        var ran = 0
        var last: (block: Block, output: String?)?
        for block in blocks {
            if block.isOutput {
                guard let (command, output) = last else {
                    Issue.record("\(block.place): an output block follows no command block")
                    continue
                }
                if let output, let missing = Self.unmatched(quoted: block.text, output: output) {
                    Issue.record("\(block.place): the output it quotes is not what \(command.place) printed; no line matches\n  \(missing)\nprinted:\n\(output.suffix(3000))")
                }
                continue
            }
            guard Self.isCommands(block) else { last = nil; continue }
            if let skip = block.skip {
                print("DocumentedCommandTests: \(block.place) skipped: \(skip)")
                last = (block, nil)
                continue
            }
            if let missing = block.needs.first(where: { !Self.installed($0) }) {
                print("DocumentedCommandTests: SKIPPED \(block.place): needs \(missing), which is not installed (.ci/run installs it)")
                last = (block, nil)
                continue
            }
            let blockStarted = Date()
            let result = try Self.run(block, in: workspace.path)
            let expected = block.exit ?? 0
            #expect(result.status == expected, "\(block.place) exited \(result.status), not \(expected):\n\(block.text)\n\(result.output.suffix(3000))")
            print("DocumentedCommandTests: \(block.place) ran in \(String(format: "%.1f", Date().timeIntervalSince(blockStarted))) s")
            last = (block, result.output)
            ran += 1
        }
        print("DocumentedCommandTests: \(file): \(ran) blocks ran in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        if file == "docs/DEPLOYMENT.md" { try Self.checkTLSFailures(in: workspace) }
        if file == "README.md" {
            #expect(ran >= 3, "ran \(ran) blocks")
            // What the blocks made is there: the package and the pictures.
            for made in ["Weekend.boardpkg/manifest.json", "weekend.png", "weekend.pdf", "weekend.svg"] {
                #expect(FileManager.default.fileExists(atPath: workspace.path + "/" + made), "\(made) was made")
            }
        }
    }

    /// DEPLOYMENT.md quotes what a client prints when TLS fails ("Clear failures"); each quote
    /// must be what the guide's own throwaway certificate (made by its `openssl` block, in this
    /// workspace) gives: an untrusted certificate ("an untrusted certificate gives `…`"), a wrong
    /// name ("a wrong name `…`"), a plain client meeting a TLS server ("is told to `…`") and a
    /// TLS client meeting a plain one ("asks `…`").
    static func checkTLSFailures(in workspace: Workspace) throws {
        guard FileManager.default.fileExists(atPath: workspace.path + "/cert.pem") else {
            print("DocumentedCommandTests: SKIPPED DEPLOYMENT.md's TLS failures: its openssl block did not run (no openssl)")
            return
        }
        let text = try String(contentsOf: root.appendingPathComponent("docs/DEPLOYMENT.md"), encoding: .utf8)
        let bullet = try #require(text.components(separatedBy: "\n- ").first { $0.hasPrefix("**Clear failures**") },
                                  "DEPLOYMENT.md has its **Clear failures** bullet")
        let prose = bullet.replacingOccurrences(of: "\n  ", with: " ")
        func quote(after phrase: String) throws -> String {
            let start = try #require(prose.range(of: phrase + " `"), "DEPLOYMENT.md's Clear failures bullet quotes what \(phrase) `…`")
            return String(prose[start.upperBound...].prefix { $0 != "`" })
        }
        let quotes = try ["an untrusted certificate gives", "a wrong name", "is told to", "asks"].map(quote(after:))
        let cli = workspace.cli
        try cli.run("new", "Team.boardpkg")
        let tls = try Daemon(["serve", "--data", "tls-boards", "--listen", "127.0.0.1:0", "--tls-cert", "cert.pem", "--tls-key", "key.pem"], in: workspace.path)
        let tlsAddress = try #require(tls.listeningAddress(), "\(tls.log)")
        let plain = try Daemon(["serve", "--data", "plain-boards", "--listen", "127.0.0.1:0"], in: workspace.path)
        let plainAddress = try #require(plain.listeningAddress(), "\(plain.log)")
        let sync = ["sync", "Team.boardpkg", "--board", "team", "--timeout", "10", "--server"]
        let cases: [(String, [String])] = [
            ("an untrusted certificate", sync + [tlsAddress, "--tls"]),
            ("a wrong name", sync + [tlsAddress, "--tls-ca", "cert.pem", "--tls-name", "boards.example.com"]),
            ("a plain client meeting a TLS server", sync + [tlsAddress]),
            ("a TLS client meeting a plain server", sync + [plainAddress, "--tls-ca", "cert.pem"]),
        ]
        for ((what, arguments), quote) in zip(cases, quotes) {
            let result = try cli.run(arguments)
            #expect(result.status == 1 && result.stderr.contains(quote),
                    "DEPLOYMENT.md says \(what) gives `\(quote)`; `board-sync \(arguments.joined(separator: " "))` printed: \(result.stderr)")
        }
        #expect(try cli.run(sync + [tlsAddress, "--tls-ca", "cert.pem"]).status == 0, "the certificate works for clients that trust it")
        _ = tls.terminate()
        _ = plain.terminate()
    }

    /// Every block is accounted for: marks are ones the runner knows, a skip says why, an output
    /// block follows a command block and is `text`, and nothing that looks like commands escapes
    /// being run (a prompt or a mixed block must be split).
    @Test func everyBlockIsAccountedFor() throws {
        var commandBlocks = 0
        for file in Self.documents {
            let blocks = try Self.blocks(of: file)
            for (index, block) in blocks.enumerated() {
                for mark in block.marks {
                    let known = mark.hasPrefix("skip (") && mark.hasSuffix(")") || mark.hasPrefix("needs ") || block.exit != nil && mark.hasPrefix("exit ") || mark == "output"
                    #expect(known, "\(block.place): unknown doc-test mark '\(mark)' (skip (why), needs PROGRAM, exit N, output)")
                }
                if block.isOutput {
                    #expect(block.info == "text", "\(block.place): an output block is ```text")
                    #expect(index > 0 && Self.isCommands(blocks[index - 1]), "\(block.place): an output block follows a command block")
                } else if Self.isCommands(block) {
                    commandBlocks += 1
                } else {
                    #expect(!Self.looksLikeCommands(block), "\(block.place): a block with commands and other lines (a prompt, output): split it into a command block and an output block")
                    #expect(block.marks.isEmpty, "\(block.place): marks only go on command blocks")
                }
            }
        }
        #expect(commandBlocks >= 15, "the command blocks were found (\(commandBlocks))")
    }

    /// The rules the checks rely on, on examples: what counts as a command block, and how quoted
    /// output matches.
    @Test func blocksAndQuotedOutputFollowTheConventions() {
        let text = """
        <!-- doc-test: needs redis-server; exit 1 -->
        ```
        bin/board-sim --seed 1    # a comment
        id=$(bin/board-sync new A.boardpkg)
        openssl req -x509 \\
            -out cert.pem
        ```
        <!-- doc-test: output -->
        ```text
        seed 1: …
        ```
        ```
        frame := length:u32 LE
        ```
        ```
        $ bin/board-sim --seed 1
        hash: 1234
        ```
        """
        let blocks = Self.blocks(of: text, file: "example")
        #expect(blocks.count == 4)
        #expect(Self.isCommands(blocks[0]) && blocks[0].needs == ["redis-server"] && blocks[0].exit == 1 && blocks[0].skip == nil)
        #expect(blocks[1].isOutput && !Self.isCommands(blocks[1]))
        #expect(!Self.isCommands(blocks[2]) && !Self.looksLikeCommands(blocks[2]), "a grammar is not commands")
        #expect(!Self.isCommands(blocks[3]) && Self.looksLikeCommands(blocks[3]), "a transcript must be split")

        let output = "seed 4: planned 1999 edit\noperations 1854, deliveries 6356, wall 8.93 s\nconverged 2.00 s after the heal\nhash: ea43b145a8dfd0e4"
        #expect(Self.unmatched(quoted: "operations 1854, deliveries 6356, wall ~0.48 s\n...\nhash: ea43b145a8dfd0e4", output: output) == nil)
        #expect(Self.unmatched(quoted: "seed 4: …\nconverged ~2 s after the heal", output: output) == nil)
        #expect(Self.unmatched(quoted: "operations 1893, deliveries 6356, wall ~0.48 s", output: output) != nil, "counts are exact")
        #expect(Self.unmatched(quoted: "hash: ea43b145a8dfd0e4\nseed 4: …", output: output) != nil, "in order")
        #expect(Self.unmatched(quoted: "operations 1854", output: output) != nil, "whole lines, unless … says more")
        #expect(Self.unmatched(quoted: "wall 8.93 s", output: output) != nil)
    }
}
