import BoardModel
import Foundation
import Testing

/// Runs the real `board-sync` binary (built by `bin/test` into .build/debug) on temp directories.
struct CLI {
    static let binary: String = {
        if let override = ProcessInfo.processInfo.environment["BOARD_SYNC_BIN"] { return override }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/board-sync").path
    }()

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    let directory: String
    /// The program to run (board-sync unless a test runs another of the package's tools).
    var program: String = CLI.binary

    @discardableResult
    func run(_ arguments: String...) throws -> Result {
        try run(arguments)
    }

    func run(_ arguments: [String]) throws -> Result {
        guard FileManager.default.isExecutableFile(atPath: program) else {
            throw Failure("\(program) is not built: run bin/test (or swift build) first")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                      stderr: String(decoding: stderr, as: UTF8.self))
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

final class Workspace {
    let path: String
    let cli: CLI

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("boardsync-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        cli = CLI(directory: path)
        try Data(PNGEncoder.solid(width: 8, height: 8, red: 255, green: 0, blue: 0)).write(to: URL(fileURLWithPath: path + "/red.png"))
        try Data(PNGEncoder.solid(width: 16, height: 12, red: 0, green: 0, blue: 255)).write(to: URL(fileURLWithPath: path + "/photo.png"))
        try Data("GIF89a, not a PNG".utf8).write(to: URL(fileURLWithPath: path + "/fake.png"))
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Every file under `relative` with its bytes: to prove a failed command changed nothing.
    func contents(of relative: String) throws -> [String: Data] {
        var result: [String: Data] = [:]
        let base = path + "/" + relative
        guard let enumerator = FileManager.default.enumerator(atPath: base) else { return [:] }
        for case let file as String in enumerator {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: base + "/" + file, isDirectory: &isDirectory), !isDirectory.boolValue {
                result[file] = try Data(contentsOf: URL(fileURLWithPath: base + "/" + file))
            }
        }
        return result
    }

    func board(_ package: String) throws -> BoardSnapshot {
        let result = try cli.run("show", package, "--json")
        return try JSONDecoder().decode(BoardSnapshot.self, from: Data(result.stdout.utf8))
    }
}

@Suite struct CLITests {
    static let commands = ["demo", "serve", "sync", "peer", "token", "new", "stroke", "sticker", "move", "transform", "image", "style", "canvas",
                           "background", "between", "delete", "restore", "front", "back", "undo", "redo", "show", "export", "log", "history", "repair"]

    @Test func everyCommandHasHelp() throws {
        let workspace = try Workspace()
        for command in Self.commands {
            for form in [[command, "--help"], ["help", command], [command, "-h"]] {
                let result = try workspace.cli.run(form)
                #expect(result.status == 0, "\(form)")
                #expect(result.stdout.contains("USAGE: board-sync \(command)"), "\(form): \(result.stdout)")
                #expect(result.stdout.contains("OVERVIEW:"))
            }
        }
        let main = try workspace.cli.run("--help")
        #expect(main.status == 0)
        for command in Self.commands { #expect(main.stdout.contains(command)) }
        #expect(try workspace.cli.run("--version").stdout.hasPrefix("board-sync "))
        let unknown = try workspace.cli.run("frobnicate")
        #expect(unknown.status == 64)
        #expect(unknown.stderr.hasPrefix("Error: unknown subcommand 'frobnicate'"))
    }

    @Test func editingAPackageFromTheCommandLine() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        #expect(try cli.run("new", "Weekend.boardpkg", "--canvas", "800x600", "--background", "photo.png").status == 0)
        let sticker = try cli.run("sticker", "Weekend.boardpkg", "--image", "red.png", "--at", "10,20", "--scale", "2")
        #expect(sticker.status == 0)
        let stickerID = sticker.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(UUID(uuidString: stickerID) != nil, "prints the new id: \(sticker.stdout)")
        let stroke = try cli.run("stroke", "Weekend.boardpkg", "--points", "1,1 2,2 3.5,5", "--color", "#FF000080", "--width", "3")
        let strokeID = stroke.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(stroke.status == 0)
        #expect(try cli.run("move", "Weekend.boardpkg", stickerID, "--to", "100,200").status == 0)
        #expect(try cli.run("transform", "Weekend.boardpkg", stickerID, "--rotation", "0.5").status == 0)
        #expect(try cli.run("back", "Weekend.boardpkg", strokeID).status == 0)

        var board = try workspace.board("Weekend.boardpkg")
        #expect(board.canvasSize == CodableSize(width: 800, height: 600))
        #expect(board.backgroundSHA256 != nil)
        #expect(board.paintOrder?.map(\.uuidString) == [strokeID, stickerID])
        #expect(board.stickers.first?.position == CodablePoint(x: 100, y: 200))
        #expect(board.stickers.first?.rotationRadians == 0.5)
        #expect(board.strokes.first?.points.last == CodablePoint(x: 3.5, y: 5))
        #expect(board.strokes.first?.color.alpha == Double(128) / 255)
        // The sticker file is named by the id the command printed.
        #expect(FileManager.default.fileExists(atPath: workspace.path + "/Weekend.boardpkg/stickers/\(stickerID).png"))

        // Undo and redo work across invocations: undo the reorder and the rotation, redo one.
        #expect(try cli.run("undo", "Weekend.boardpkg").status == 0)
        #expect(try cli.run("undo", "Weekend.boardpkg").status == 0)
        board = try workspace.board("Weekend.boardpkg")
        #expect(board.paintOrder?.map(\.uuidString) == [stickerID, strokeID])
        #expect(board.stickers.first?.rotationRadians == 0)
        #expect(try cli.run("redo", "Weekend.boardpkg").status == 0)
        #expect(try workspace.board("Weekend.boardpkg").stickers.first?.rotationRadians == 0.5)

        // Delete and restore.
        #expect(try cli.run("delete", "Weekend.boardpkg", stickerID).status == 0)
        #expect(try workspace.board("Weekend.boardpkg").stickers.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/Weekend.boardpkg/stickers/\(stickerID).png"))
        #expect(try cli.run("restore", "Weekend.boardpkg", stickerID).status == 0)
        #expect(try workspace.board("Weekend.boardpkg").stickers.first?.position == CodablePoint(x: 100, y: 200))

        // The log lists operations oldest first with their timestamps, as text and as JSON.
        let log = try cli.run("log", "Weekend.boardpkg", "--json")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(log.stdout.utf8)) as? [[String: Any]])
        let lamports = entries.compactMap { $0["lamport"] as? Int }
        #expect(lamports == lamports.sorted())
        #expect(entries.contains { $0["kind"] as? String == "addSticker" && $0["item"] as? String == stickerID })
        #expect(try cli.run("log", "Weekend.boardpkg").stdout.split(separator: "\n").count == entries.count)

        // The manifest reads with the seed's own model.
        let manifest = try Data(contentsOf: URL(fileURLWithPath: workspace.path + "/Weekend.boardpkg/manifest.json"))
        let seedFields = try #require(try JSONSerialization.jsonObject(with: manifest) as? [String: Any])
        #expect(seedFields["schemaVersion"] as? Int == BoardSnapshot.currentSchemaVersion)
        #expect((seedFields["stickers"] as? [Any])?.count == 1)
    }

    @Test func badInputGetsAClearErrorAndChangesNothing() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "B.boardpkg")
        let sticker = try cli.run("sticker", "B.boardpkg", "--image", "red.png", "--at", "1,1").stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let before = try workspace.contents(of: "B.boardpkg")
        let cases: [([String], Int32, String)] = [
            (["sticker", "B.boardpkg", "--image", "fake.png", "--at", "1,1"], 1, "not a PNG"),
            (["sticker", "B.boardpkg", "--image", "missing.png", "--at", "1,1"], 1, "missing.png"),
            (["move", "B.boardpkg", "00000000-0000-4000-8000-000000000001", "--to", "1,1"], 1, "no item with id"),
            (["move", "B.boardpkg", sticker, "--to", "1,abc"], 64, "not a finite number"),
            (["move", "B.boardpkg", sticker, "--to", "nan,1"], 64, "not a finite number"),
            (["move", "B.boardpkg", sticker], 64, "missing --to"),
            (["move", "B.boardpkg", "not-a-uuid", "--to", "1,1"], 64, "not an item id"),
            (["stroke", "B.boardpkg", "--points", "1,1 2"], 64, "not a point"),
            (["stroke", "B.boardpkg", "--points", "1,1", "--color", "red"], 64, "#RRGGBB"),
            (["stroke", "B.boardpkg", "--points", "1,1", "--width", "-2"], 64, "must be positive"),
            (["transform", "B.boardpkg", sticker], 64, "--scale"),
            (["transform", "B.boardpkg", sticker, "--bogus", "1"], 64, "unknown option --bogus"),
            (["front", "B.boardpkg"], 64, "missing <id>"),
            (["show", "Nope.boardpkg"], 1, "no board package at Nope.boardpkg"),
            (["new", "B.boardpkg"], 1, "already exists"),
            (["new", "C.boardpkg", "--canvas", "0x10"], 64, "must be positive"),
            (["new", "D.boardpkg", "--background", "fake.png"], 1, "not a PNG"),
        ]
        for (arguments, status, message) in cases {
            let result = try cli.run(arguments)
            #expect(result.status == status, "\(arguments): \(result.stderr)")
            #expect(result.stderr.hasPrefix("Error: "), "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
            #expect(result.stdout.isEmpty, "\(arguments)")
        }
        #expect(try workspace.contents(of: "B.boardpkg") == before, "a failed command changed the package")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/C.boardpkg"))
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/D.boardpkg"))
    }

    @Test func jsonOutputForScripts() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let created = try cli.run("new", "J.boardpkg", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(created.stdout.utf8)) as? [String: Any])
        #expect((object["replica"] as? String)?.count == 16)
        let sticker = try cli.run("sticker", "J.boardpkg", "--image", "red.png", "--at", "5,5", "--json")
        let edit = try #require(try JSONSerialization.jsonObject(with: Data(sticker.stdout.utf8)) as? [String: Any])
        #expect(edit["operations"] as? Int == 1)
        #expect(UUID(uuidString: edit["id"] as? String ?? "") != nil)
        let undo = try cli.run("undo", "J.boardpkg", "--json")
        #expect((try JSONSerialization.jsonObject(with: Data(undo.stdout.utf8)) as? [String: Any])?["operations"] as? Int == 1)
        let nothing = try cli.run("redo", "J.boardpkg")
        #expect(nothing.status == 0)
        let again = try cli.run("redo", "J.boardpkg")
        #expect(again.stderr.contains("nothing to redo"))
    }
}
