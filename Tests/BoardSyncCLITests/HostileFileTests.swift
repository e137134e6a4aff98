import BoardModel
import Foundation
import Testing

/// Issue 7 on real processes and real files: links, bad seed packages, copies, full disks and
/// read-only folders never destroy a user's files, and a failed command changes nothing.
@Suite struct HostileFileTests {
    /// Runs a system command (mount, umount, dd); returns its exit status.
    @discardableResult
    static func system(_ arguments: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }

    @Test func aStickersLinkIsRefusedAndNothingOutsideThePackageIsTouched() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "B.boardpkg")
        try cli.run("sticker", "B.boardpkg", "--image", "red.png", "--at", "1,1")
        // The user's photos, somewhere else; the package's stickers/ is replaced by a link there.
        let photos = workspace.path + "/photos"
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        try Data("precious".utf8).write(to: URL(fileURLWithPath: photos + "/holiday.png"))
        let stickers = workspace.path + "/B.boardpkg/stickers"
        try FileManager.default.removeItem(atPath: stickers)
        try FileManager.default.createSymbolicLink(atPath: stickers, withDestinationPath: photos)
        try FileManager.default.removeItem(atPath: workspace.path + "/B.boardpkg/sync/view.json")  // forces a view rebuild
        for arguments in [["show", "B.boardpkg"], ["front", "B.boardpkg", "00000000-0000-4000-8000-000000000001"]] {
            let result = try cli.run(arguments)
            #expect(result.status == 1, "\(arguments)")
            #expect(result.stderr.contains("symbolic link"), "\(result.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: photos) == ["holiday.png"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: photos + "/holiday.png")) == Data("precious".utf8))

        // A linked op log is refused too, and the file it points at is left alone.
        try cli.run("new", "C.boardpkg")
        let outside = workspace.path + "/notes.txt"
        try Data("my notes".utf8).write(to: URL(fileURLWithPath: outside))
        try FileManager.default.removeItem(atPath: workspace.path + "/C.boardpkg/sync/oplog")
        try FileManager.default.createSymbolicLink(atPath: workspace.path + "/C.boardpkg/sync/oplog", withDestinationPath: outside)
        let result = try cli.run("stroke", "C.boardpkg", "--points", "1,1 2,2")
        #expect(result.status == 1)
        #expect(result.stderr.contains("symbolic link"), "\(result.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: outside)) == Data("my notes".utf8))
    }

    @Test func aSeedPackageWithAbsurdValuesIsRefusedAndKeptIntact() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let stickerID = "6A1E0C52-44B4-4B6B-9D8A-2B0D6E2C5A11"
        let cases: [(String, String)] = [
            (#"{"width":-5,"height":100}"#, "canvas width"),
            (#"{"width":1e308,"height":100}"#, "canvas width"),
            (#"{"width":100,"height":100}"#, "point 0 x"),
        ]
        for index in cases.indices {
            let (canvas, message) = cases[index]
            let package = workspace.path + "/Seed\(index).boardpkg"
            try FileManager.default.createDirectory(atPath: package + "/stickers", withIntermediateDirectories: true)
            let points = index == 2 ? #"[{"x":1e300,"y":0}]"# : #"[{"x":1,"y":2}]"#
            let manifest = """
            {"schemaVersion":1,"canvasSize":\(canvas),
             "strokes":[{"id":"1B4E28BA-2FA1-41D2-883F-0016D3CCA427","color":{"red":0,"green":0,"blue":0,"alpha":1},"width":2,"points":\(points)}],
             "stickers":[{"id":"\(stickerID)","imagePNG":"","position":{"x":5,"y":5},"scale":1,"rotationRadians":0}]}
            """
            try Data(manifest.utf8).write(to: URL(fileURLWithPath: package + "/manifest.json"))
            try FileManager.default.copyItem(atPath: workspace.path + "/red.png", toPath: package + "/stickers/\(stickerID).png")
            let before = try workspace.contents(of: "Seed\(index).boardpkg")
            for _ in 0..<2 {  // the second attempt must not find half an import either
                let result = try cli.run("show", "Seed\(index).boardpkg")
                #expect(result.status == 1, "\(canvas)")
                #expect(result.stderr.contains(message), "\(result.stderr)")
                #expect(try workspace.contents(of: "Seed\(index).boardpkg") == before, "the seed package changed")
                #expect(!FileManager.default.fileExists(atPath: package + "/sync"))
            }
        }
        // A good seed imports, and keeps its sticker's id and image.
        let good = workspace.path + "/Good.boardpkg"
        try FileManager.default.createDirectory(atPath: good + "/stickers", withIntermediateDirectories: true)
        try Data(#"{"schemaVersion":1,"canvasSize":{"width":300,"height":200},"strokes":[],"stickers":[{"id":"\#(stickerID)","imagePNG":"","position":{"x":5,"y":5},"scale":1,"rotationRadians":0}]}"#.utf8)
            .write(to: URL(fileURLWithPath: good + "/manifest.json"))
        try FileManager.default.copyItem(atPath: workspace.path + "/red.png", toPath: good + "/stickers/\(stickerID).png")
        let board = try workspace.board("Good.boardpkg")
        #expect(board.stickers.map(\.id.uuidString) == [stickerID])
        #expect(try Data(contentsOf: URL(fileURLWithPath: good + "/stickers/\(stickerID).png")) == Data(contentsOf: URL(fileURLWithPath: workspace.path + "/red.png")))
    }

    @Test func aCopyNeverUndoesTheOriginalsEdits() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        let sticker = try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "1,1").stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        try cli.run("move", "A.boardpkg", sticker, "--to", "50,50")
        #expect(Self.system(["cp", "-r", workspace.path + "/A.boardpkg", workspace.path + "/B.boardpkg"]) == 0)
        let first = try cli.run("show", "B.boardpkg")
        #expect(first.stderr.contains("copy"), "the first command notices the copy: \(first.stderr)")
        let undo = try cli.run("undo", "B.boardpkg")
        #expect(undo.status == 0)
        #expect(undo.stderr.contains("nothing to undo"), "\(undo.stderr)")
        let board = try workspace.board("B.boardpkg")
        #expect(board.stickers.first?.position == CodablePoint(x: 50, y: 50))
        #expect(board.stickers.count == 1)
    }

    /// A tmpfs of `kilobytes` mounted in the workspace, or nil (said loudly) where mounting is
    /// not allowed.
    static func mountSmallDisk(_ workspace: Workspace, kilobytes: Int) -> String? {
        let disk = workspace.path + "/disk"
        try? FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        guard system(["mount", "-t", "tmpfs", "-o", "size=\(kilobytes)k", "tmpfs", disk]) == 0 else {
            print("SKIPPED: full-disk and read-only CLI checks need `mount -t tmpfs` (root); this machine refused it")
            return nil
        }
        return disk
    }

    @Test func aFullDiskOrAReadOnlyFolderFailsCleanlyAndChangesNothing() throws {
        let workspace = try Workspace()
        guard let disk = Self.mountSmallDisk(workspace, kilobytes: 512) else { return }
        defer { Self.system(["umount", disk]) }
        let cli = CLI(directory: disk)
        try Data(contentsOf: URL(fileURLWithPath: workspace.path + "/red.png")).write(to: URL(fileURLWithPath: disk + "/red.png"))
        #expect(try cli.run("new", "B.boardpkg").status == 0)
        let sticker = try cli.run("sticker", "B.boardpkg", "--image", "red.png", "--at", "1,1").stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(UUID(uuidString: sticker) != nil)
        // Fill the disk to the last byte.
        Self.system(["dd", "if=/dev/zero", "of=\(disk)/filler", "bs=4096"])
        Self.system(["dd", "if=/dev/zero", "of=\(disk)/filler2", "bs=1"])
        let png = Data(PNGEncoder.solid(width: 64, height: 64, red: 1, green: 2, blue: 3))
        try? png.write(to: URL(fileURLWithPath: workspace.path + "/big.png"))
        let full: [[String]] = [
            ["move", "B.boardpkg", sticker, "--to", "9,9"],
            ["stroke", "B.boardpkg", "--points", "1,1 2,2 3,3"],
            ["sticker", "B.boardpkg", "--image", workspace.path + "/big.png", "--at", "5,5"],
            ["front", "B.boardpkg", sticker],
        ]
        // Each edit either fails and changes nothing, or (a small record can still fit in the
        // log's last page) is saved once and says that only the view could not be updated.
        var saved = 1
        for arguments in full {
            let before = try workspace.contents(of: "disk/B.boardpkg")
            let result = try cli.run(arguments)
            if result.status == 0 {
                #expect(result.stderr.contains("the edit is saved"), "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains("No space left"), "\(arguments): \(result.stderr)")
                saved += 1
            } else {
                #expect(result.status == 1, "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains("No space left"), "\(arguments): \(result.stderr)")
                #expect(try workspace.contents(of: "disk/B.boardpkg") == before, "\(arguments) failed but changed the package")
            }
        }
        #expect(saved < 1 + full.count, "the image sticker cannot fit on a full disk")
        // A read-only folder: refused, unchanged.
        try FileManager.default.removeItem(atPath: disk + "/filler2")
        #expect(Self.system(["mount", "-o", "remount,ro", disk]) == 0)
        let before = try workspace.contents(of: "disk/B.boardpkg")
        for arguments in full.prefix(2) {
            let result = try cli.run(arguments)
            #expect(result.status == 1, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("Read-only"), "\(arguments): \(result.stderr)")
        }
        #expect(try workspace.contents(of: "disk/B.boardpkg") == before, "a read-only folder changed")
        // With room again, the package opens, its view catches up, and a retry makes exactly one
        // more edit (no failed attempt left one behind).
        #expect(Self.system(["mount", "-o", "remount,rw", disk]) == 0)
        try FileManager.default.removeItem(atPath: disk + "/filler")
        #expect(try cli.run("move", "B.boardpkg", sticker, "--to", "9,9").status == 0)
        let log = try cli.run("log", "B.boardpkg", "--json")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(log.stdout.utf8)) as? [[String: Any]])
        #expect(entries.count >= saved, "\(log.stdout)")
        #expect(try cli.run("show", "B.boardpkg").status == 0)
    }
}

/// `board-sync repair` and `board-sim` as real processes.
@Suite struct RepairAndSimulatorCLITests {
    @Test func aDamagedLogIsRefusedThenRepairedFromTheCommandLine() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "B.boardpkg")
        for x in 0..<3 { try cli.run("stroke", "B.boardpkg", "--points", "\(x),0 \(x),5") }
        let healthy = try cli.run("repair", "B.boardpkg")
        #expect(healthy.status == 0)
        #expect(healthy.stdout.contains("nothing was changed"), "\(healthy.stdout)")
        // Flip a byte inside the first record's payload: every command refuses, naming repair.
        let log = workspace.path + "/B.boardpkg/sync/oplog"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: log))
        bytes[30] ^= 0x20
        try bytes.write(to: URL(fileURLWithPath: log))
        let refused = try cli.run("show", "B.boardpkg")
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("damaged at byte") && refused.stderr.contains("repair"), "\(refused.stderr)")
        let repaired = try cli.run("repair", "B.boardpkg", "--json")
        #expect(repaired.status == 0, "\(repaired.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(repaired.stdout.utf8)) as? [String: Any])
        #expect(report["changed"] as? Bool == true)
        #expect((report["dropped"] as? [Any])?.isEmpty == false)
        #expect(FileManager.default.fileExists(atPath: workspace.path + "/B.boardpkg/sync/oplog.damaged"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: workspace.path + "/B.boardpkg/sync/oplog.damaged")) == bytes)
        #expect(try cli.run("show", "B.boardpkg").status == 0)
        let missing = try cli.run("repair", "Nope.boardpkg")
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("no board package at Nope.boardpkg"))
    }

    static var simulator: String {
        URL(fileURLWithPath: CLI.binary).deletingLastPathComponent().appendingPathComponent("board-sim").path
    }

    func sim(_ arguments: [String], in directory: String) throws -> CLI.Result {
        try CLI(directory: directory, program: Self.simulator).run(arguments)
    }

    @Test func boardSimReplaysASeedAndRefusesBadInput() throws {
        let workspace = try Workspace()
        let first = try sim(["--seed", "3"], in: workspace.path)
        let second = try sim(["--seed", "3"], in: workspace.path)
        #expect(first.status == 0, "\(first.stdout)")
        let hash = first.stdout.split(separator: "\n").last.map(String.init) ?? ""
        #expect(hash.hasPrefix("hash: "))
        #expect(second.stdout.split(separator: "\n").last.map(String.init) == hash, "a seed replays exactly, in another process")
        #expect(try sim(["--help"], in: workspace.path).status == 0)
        for bad in [["--seed", "x"], ["--bogus"], ["--peers", "0", "--seed", "1"]] {
            let result = try sim(bad, in: workspace.path)
            #expect(result.status == 64, "\(bad): \(result.stderr)")
            #expect(result.stderr.hasPrefix("Error: "), "\(bad)")
        }
        try Data("peers alice\nalice: fly S\n".utf8).write(to: URL(fileURLWithPath: workspace.path + "/bad.board"))
        let malformed = try sim(["run", "bad.board"], in: workspace.path)
        #expect(malformed.status == 64)
        #expect(malformed.stderr.contains("line 2") && malformed.stderr.contains("fly"), "\(malformed.stderr)")
        try Data("peers alice bob\nalice: sticker S at 1,1\nsync\nexpect bob: S at 9,9\n".utf8).write(to: URL(fileURLWithPath: workspace.path + "/wrong.board"))
        let wrong = try sim(["run", "wrong.board"], in: workspace.path)
        #expect(wrong.status == 1)
        #expect(wrong.stdout.contains("FAILED"), "\(wrong.stdout)")
        #expect(try sim(["run", "missing.board"], in: workspace.path).status == 1)
        #expect(try sim(["--plan"], in: workspace.path).status == 64, "--plan needs --seed")
        #expect(try sim(["--seed", "1", "--plant", "nonsense"], in: workspace.path).status == 64)
    }

    /// `run --svg` frames each picture to the drawing: scenario 02 leaves one 4-point sticker at
    /// 0,200 on a 1600 x 1200 canvas, drawn in a 36-point view (16 points of margin) 480 pixels
    /// wide, not as a speck on a blank page.
    @Test func boardSimScenarioPicturesFrameTheirContent() throws {
        let workspace = try Workspace()
        let scenario = DocumentedCommandTests.root.appendingPathComponent("Simulations/Scenarios/02-moves-win-whole.board").path
        let run = try sim(["run", scenario, "--svg", "pictures"], in: workspace.path)
        #expect(run.status == 0, "\(run.stdout.suffix(500))")
        for host in ["server", "alice", "bob"] {
            let picture = try String(contentsOfFile: workspace.path + "/pictures/02-moves-win-whole-\(host).svg", encoding: .utf8)
            #expect(picture.contains(#"width="480" height="480" viewBox="-18 182 36 36""#), "\(host): \(picture.prefix(300))")
            #expect(picture.contains(#"transform="translate(0 200)"#), "\(host): the sticker, inside the view")
        }
    }

    /// A seed's plan prints as a world scenario that runs like the seed; a planted bug fails,
    /// shrinks to a file, and that file fails when run.
    @Test func boardSimPrintsPlansAndShrinksFailures() throws {
        let workspace = try Workspace()
        let plan = try sim(["--seed", "5", "--plan"], in: workspace.path)
        #expect(plan.status == 0)
        #expect(plan.stdout.hasPrefix("world seed 5 peers 3"), "\(plan.stdout.prefix(200))")
        try Data(plan.stdout.utf8).write(to: URL(fileURLWithPath: workspace.path + "/five.board"))
        let run = try sim(["run", "five.board", "--svg", "pictures"], in: workspace.path)
        #expect(run.status == 0, "\(run.stdout.suffix(500))")
        #expect(run.stdout.contains("PASSED five.board"))
        #expect(run.stdout.contains("EVENT edit peer"), "the timeline is printed")
        for host in ["server", "peer0", "peer1", "peer2"] {
            let picture = try String(contentsOfFile: workspace.path + "/pictures/five-\(host).svg", encoding: .utf8)
            #expect(picture.hasPrefix("<?xml") && picture.contains("<svg") && picture.contains("id=\"item-"), "\(host)")
        }
        #expect(try sim(["run", "five.board", "--svg"], in: workspace.path).status == 64)

        let failing = try sim(["--seed", "0", "--plant", "images-never-served", "--shrink", "--out", "shrunk.board"], in: workspace.path)
        #expect(failing.status == 1)
        #expect(failing.stdout.contains("replay: bin/board-sim --seed 0 --plant images-never-served"), "\(failing.stdout.suffix(800))")
        #expect(failing.stdout.contains("shrunk to "), "\(failing.stdout.suffix(800))")
        let shrunk = try String(contentsOfFile: workspace.path + "/shrunk.board", encoding: .utf8)
        #expect(shrunk.contains("plant images-never-served"))
        #expect(shrunk.split(separator: "\n").filter { $0.hasPrefix("at ") }.count <= 5, "\(shrunk)")
        let replay = try sim(["run", "shrunk.board"], in: workspace.path)
        #expect(replay.status == 1, "\(replay.stdout.suffix(500))")
        #expect(replay.stdout.contains("no convergence"), "\(replay.stdout.suffix(800))")
    }

    /// `board-sim cluster`: a seed's report, a summary of several, the planted bug's seeds
    /// failing with their replay command, bad usage refused.
    @Test func boardSimRunsTheClusterSimulation() throws {
        let workspace = try Workspace()
        let one = try sim(["cluster", "--seed", "3"], in: workspace.path)
        #expect(one.status == 0, "\(one.stdout)")
        #expect(one.stdout.contains("seed 3: ") && one.stdout.contains("converged"), "\(one.stdout)")
        #expect(try sim(["cluster", "--seed", "3"], in: workspace.path).stdout == one.stdout, "the same seed, the same run")
        let several = try sim(["cluster", "--seeds", "5", "--from", "10"], in: workspace.path)
        #expect(several.status == 0 && several.stdout.contains("cluster seeds 10..<15: 5 passed, 0 failed"), "\(several.stdout)")
        let planted = try sim(["cluster", "--seed", "3", "--plant", "ack-before-redis"], in: workspace.path)
        #expect(planted.status == 1 && planted.stdout.contains("acknowledged loss"), "\(planted.stdout)")
        // A seed's plan, written as a cluster scenario and run as a file, is the same run.
        let hash = one.stdout.split(separator: "\n").last.map(String.init) ?? ""
        #expect(hash.hasPrefix("hash: "), "\(one.stdout)")
        let plan = try sim(["cluster", "--seed", "3", "--plan"], in: workspace.path)
        #expect(plan.status == 0 && plan.stdout.hasPrefix("cluster seed 3 servers "), "\(plan.stdout.prefix(300))")
        try plan.stdout.write(toFile: workspace.path + "/three.cluster", atomically: true, encoding: .utf8)
        let replay = try sim(["run", "three.cluster"], in: workspace.path)
        #expect(replay.status == 0 && replay.stdout.contains(hash), "\(replay.stdout)")
        #expect(try sim(["cluster", "--seeds", "3", "--plan"], in: workspace.path).status == 64)
        #expect(try sim(["cluster"], in: workspace.path).status == 64)
        #expect(try sim(["cluster", "--plant", "nonsense", "--seed", "1"], in: workspace.path).status == 64)
    }
}
