import BoardClient
import BoardCRDT
import BoardModel
import BoardRender
import BoardStore
import Foundation

/// The edit and inspection commands. Each parses and checks all of its input before it opens the
/// package, so bad input changes nothing on disk; each edit is one operation group, durable in
/// the op log before the view is saved.
struct Commands {
    /// Which board the command works on.
    enum Board {
        /// The package the command names, opened here (or, when a `peer` holds it, the peer's
        /// board through its control socket: `ControlClient`).
        case package
        /// The running peer's board (a command received on its control socket).
        case hosted(any CommandBoardRunner)
    }

    let fileSystem: any FileSystem = PosixFileSystem()
    var board = Board.package
    var output = CommandOutput(direct: true)
    var images = CommandImages()
    /// The working directory the command's relative paths mean (the client's, in a peer).
    var directory = FileManager.default.currentDirectoryPath

    static func randomReplicaID() -> ReplicaID {
        var generator = SystemRandomNumberGenerator()
        return ReplicaID(UInt64.random(in: 1...UInt64.max, using: &generator))
    }

    /// Runs a command; when its package is held by a running `peer`, runs it there instead.
    func run(_ name: String, _ raw: [String]) throws {
        // `restore --from DEST --data DIR` restores a server's backups (ServeBackup.swift).
        if name == "restore", raw.contains(where: { $0 == "--from" || $0.hasPrefix("--from=") }) { return try ServeBackup.restore(raw) }
        guard case .package = board else { return try runHere(name, raw) }
        try ControlClient.run(name, raw) { images in
            var commands = self
            commands.images = images
            try commands.runHere(name, raw)
        }
    }

    /// Commands a running peer runs for a client (`new` and `repair` need the package itself).
    static let throughPeer: Set<String> = ["stroke", "sticker", "move", "transform", "image", "style", "canvas", "background",
                                           "between", "delete", "restore", "front", "back", "undo", "redo", "show", "export", "log"]

    func runHere(_ name: String, _ raw: [String]) throws {
        switch name {
        case "new": try new(raw)
        case "stroke": try stroke(raw)
        case "sticker": try sticker(raw)
        case "move": try move(raw)
        case "transform": try transform(raw)
        case "image": try image(raw)
        case "style": try style(raw)
        case "canvas": try canvas(raw)
        case "background": try background(raw)
        case "between": try between(raw)
        case "delete", "restore", "front", "back": try itemCommand(name, raw)
        case "undo", "redo": try undoRedo(name, raw)
        case "show": try show(raw)
        case "export": try export(raw)
        case "log": try log(raw)
        case "history": try history(raw)
        case "repair": try repair(raw)
        default: throw UsageError("unknown subcommand '\(name)'")
        }
    }

    // MARK: Commands

    private func new(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["canvas", "background"], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        let canvas = try args.value("canvas").map { try Parse.size($0, "--canvas") }
        let background = try args.value("background").map(readPNG)
        let package: BoardPackage
        do {
            package = try BoardPackage.create(at: path, fileSystem: fileSystem, replicaID: Self.randomReplicaID())
        } catch let error as StoreError where error.code == .alreadyExists {
            throw Failure("\(error.path) already exists; choose another name or remove it first")
        }
        defer { package.close() }
        if canvas != nil || background != nil {
            try package.commit { replica in
                var made: [Op] = []
                if let canvas { made += try replica.setCanvasSize(canvas).operations }
                if let background { made += try replica.setBackground(imagePNG: background).operations }
                // A fresh board starts with an empty undo history: its setup is not an undoable edit.
                replica.undoHistory = UndoHistory()
                return LocalEdit(operations: made)
            }
            try package.save()
        }
        if args.has("json") {
            try output.json(["package": path, "replica": package.replica.id.description])
        }
    }

    private func stroke(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["points", "color", "width"], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        guard let pointsText = args.value("points") else { throw UsageError("missing --points \"X,Y X,Y ...\"") }
        let points = try Parse.points(pointsText, "--points")
        let color = try args.value("color").map(Parse.color) ?? RGBAColor.black
        let width = try args.value("width").map { try Parse.positive($0, "--width") } ?? 2
        guard width >= 0 else { throw UsageError("--width '\(width)' must not be negative") }
        let edit = try withBoard(path) { package in
            try package.commit { replica in
                let edit = try replica.beginStroke(color: color, width: width, points: points)
                replica.finishStroke()
                return edit
            }
        }
        try report(edit, json: args.has("json"), printID: true)
    }

    private func sticker(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["image", "at", "scale", "rotation"], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        guard let imagePath = args.value("image") else { throw UsageError("missing --image FILE.png") }
        guard let atText = args.value("at") else { throw UsageError("missing --at X,Y") }
        let at = try Parse.point(atText, "--at")
        let scale = try args.value("scale").map { try Parse.positive($0, "--scale", max: 1e6) } ?? 1
        let rotation = try args.value("rotation").map { try Parse.number($0, "--rotation") } ?? 0
        let image = try readPNG(imagePath)
        let edit = try withBoard(path) { package in
            try package.commit { try $0.addSticker(imagePNG: image, at: at, scale: scale, rotation: rotation) }
        }
        try report(edit, json: args.has("json"), printID: true)
    }

    private func move(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["to"], flags: ["json"])
        let positionals = try args.positionals(["<package>", "<id>"])
        let id = ItemID(uuid: try Parse.uuid(positionals[1]))
        guard let toText = args.value("to") else { throw UsageError("missing --to X,Y") }
        let to = try Parse.point(toText, "--to")
        let edit = try withBoard(positionals[0]) { package in
            try package.commit { try $0.move(id, to: to) }
        }
        try report(edit, json: args.has("json"), printID: false)
    }

    private func transform(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["scale", "rotation"], flags: ["json"])
        let positionals = try args.positionals(["<package>", "<id>"])
        let id = ItemID(uuid: try Parse.uuid(positionals[1]))
        let scale = try args.value("scale").map { try Parse.positive($0, "--scale", max: 1e6) }
        let rotation = try args.value("rotation").map { try Parse.number($0, "--rotation") }
        guard scale != nil || rotation != nil else { throw UsageError("give --scale, --rotation or both") }
        let edit = try withBoard(positionals[0]) { package in
            try package.commit { try $0.transform(id, scale: scale, rotation: rotation) }
        }
        try report(edit, json: args.has("json"), printID: false)
    }

    /// Replaces a sticker's image (its place, scale and rotation stay).
    private func image(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["image"], flags: ["json"])
        let positionals = try args.positionals(["<package>", "<id>"])
        let id = ItemID(uuid: try Parse.uuid(positionals[1]))
        guard let imagePath = args.value("image") else { throw UsageError("missing --image FILE.png") }
        let png = try readPNG(imagePath)
        let edit = try withBoard(positionals[0]) { package in
            try package.commit { try $0.replaceImage(id, withPNG: png) }
        }
        try report(edit, json: args.has("json"), printID: false)
    }

    /// A stroke's colour and/or width, as one undo step.
    private func style(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["color", "width"], flags: ["json"])
        let positionals = try args.positionals(["<package>", "<id>"])
        let id = ItemID(uuid: try Parse.uuid(positionals[1]))
        let color = try args.value("color").map(Parse.color)
        let width = try args.value("width").map { try Parse.positive($0, "--width") }
        guard color != nil || width != nil else { throw UsageError("give --color, --width or both") }
        if let width, width < 0 { throw UsageError("--width '\(width)' must not be negative") }
        let edit = try withBoard(positionals[0]) { package in
            try package.commit { replica in
                replica.beginUndoGroup()
                defer { replica.endUndoGroup() }
                var made: [Op] = []
                if let color { made += try replica.setColor(id, to: color).operations }
                if let width { made += try replica.setWidth(id, to: width).operations }
                return LocalEdit(item: id, operations: made)
            }
        }
        try report(edit, json: args.has("json"), printID: false)
    }

    private func canvas(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["size"], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        guard let sizeText = args.value("size") else { throw UsageError("missing --size WxH") }
        let size = try Parse.size(sizeText, "--size")
        let edit = try withBoard(path) { package in
            try package.commit { try $0.setCanvasSize(size) }
        }
        try report(edit, json: args.has("json"), printID: false)
    }

    private func background(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["image"], flags: ["none", "json"])
        let path = try args.positionals(["<package>"])[0]
        let png: Data?
        switch (args.value("image"), args.has("none")) {
        case (let file?, false): png = try readPNG(file)
        case (nil, true): png = nil
        default: throw UsageError("give --image FILE.png or --none")
        }
        let edit = try withBoard(path) { package in
            try package.commit { replica in
                if let png { return try replica.setBackground(imagePNG: png) }
                return try replica.setBackground(asset: nil)
            }
        }
        try report(edit, json: args.has("json"), printID: false)
    }

    /// Paints an item between two others.
    private func between(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["above", "below"], flags: ["json"])
        let positionals = try args.positionals(["<package>", "<id>"])
        let id = ItemID(uuid: try Parse.uuid(positionals[1]))
        guard let aboveText = args.value("above"), let belowText = args.value("below") else {
            throw UsageError("give --above ID and --below ID (the items it goes between)")
        }
        let lower = ItemID(uuid: try Parse.uuid(aboveText)), upper = ItemID(uuid: try Parse.uuid(belowText))
        let edit = try withBoard(positionals[0]) { package in
            try package.commit { try $0.put(id, between: lower, and: upper) }
        }
        try report(edit, json: args.has("json"), printID: false)
    }

    private func itemCommand(_ name: String, _ raw: [String]) throws {
        let args = try Arguments(raw, options: [], flags: ["json"])
        let positionals = try args.positionals(["<package>", "<id>"])
        let id = ItemID(uuid: try Parse.uuid(positionals[1]))
        let edit = try withBoard(positionals[0]) { package in
            try package.commit { replica in
                switch name {
                case "delete": return try replica.delete(id)
                case "restore": return try replica.restore(id)
                case "front": return try replica.bringToFront(id)
                default: return try replica.sendToBack(id)
                }
            }
        }
        try report(edit, json: args.has("json"), printID: false)
    }

    private func undoRedo(_ name: String, _ raw: [String]) throws {
        let args = try Arguments(raw, options: [], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        let edit = try withBoard(path) { package in
            try package.commit { name == "undo" ? try $0.undo() : try $0.redo() }
        }
        if edit.operations.isEmpty && !args.has("json") {
            output.error("nothing to \(name)")
        }
        try report(edit, json: args.has("json"), printID: false)
    }

    private func show(_ raw: [String]) throws {
        let args = try Arguments(raw, options: [], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        let (board, replica) = try withBoard(path) { ($0.replica.snapshot(), $0.replica) }
        if args.has("json") {
            output.write(Data(ManifestEncoder.encode(board) + [10]))
            return
        }
        output.print(Inspect.describe(board, replica: replica, path: path))
    }

    /// Renders the board to a PNG, PDF or SVG file (by the output's extension), through the
    /// board's snapshot and the writer, as the seed routes exports. The snapshot is taken on the
    /// board and rendered outside it; the file is written by the process the user ran (a peer
    /// hands the bytes back), atomically.
    private func export(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["scale", "at"], flags: ["transparent", "json"])
        let paths = try args.positionals(["<package>", "<output>"])
        let (path, destination) = (paths[0], paths[1])
        guard let type = ContentType.forPath(destination), !type.isNative else {
            throw UsageError("the output '\(destination)' must end in .png, .pdf or .svg")
        }
        let scale = try args.value("scale").map { try Parse.number($0, "--scale") } ?? 1
        guard scale > 0, scale <= 64 else { throw UsageError("--scale must be a number above 0 and at most 64") }
        let here = URL(fileURLWithPath: directory, isDirectory: true)
        let absolute = { (p: String) in URL(fileURLWithPath: p, relativeTo: here).standardizedFileURL.path }
        if absolute(destination).hasPrefix(absolute(path) + "/") {
            throw UsageError("the output '\(destination)' is inside the package; write it somewhere else")
        }
        let policy = ExportPolicy(scale: scale, transparent: args.has("transparent"))
        // `--at V`: a version from the package's history (read from its files, like `history show`).
        let snapshot = try args.value("at").map { at in
            let history = try readHistory(path)
            return history.snapshot(at: try Self.version(at, in: history, "--at"))
        } ?? withBoard(path) { $0.replica.snapshot() }
        let memory = MemoryFileSystem()
        let rendered = "/export.\(type.fileExtension)"
        let report: PackageWriter.Report
        do {
            report = try BoardWriter(configuration: WriteConfiguration(contentType: type, fileSystem: memory, export: policy))
                .write(content: snapshot, to: rendered, previous: nil)
        } catch let error as ExportError {
            throw Failure("cannot export \(path): \(error)")
        }
        let bytes = Data(try memory.readFile(rendered))
        try output.writeFile(destination, bytes)
        for warning in report.warnings { output.error("warning: \(warning)") }
        if args.has("json") {
            try output.json(["output": destination, "contentType": type.identifier, "bytes": bytes.count, "scale": scale,
                             "transparent": policy.transparent, "warnings": report.warnings] as [String: Any])
        } else {
            output.print("wrote \(destination) (\(type.fileExtension.uppercased()), \(bytes.count) bytes)\(report.warnings.isEmpty ? "" : "; \(report.warnings.count) placeholder(s), see the warnings")")
        }
    }

    private func log(_ raw: [String]) throws {
        let args = try Arguments(raw, options: [], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        // The board's whole history (docs/ARCHITECTURE.md "History"): every operation this
        // package recorded, archived by compaction or still in the log, in the order it was
        // recorded, with its author and the wall time of the record that brought it (metadata).
        let operations = try withBoard(path) { board in
            try ((board as? BoardPackage)?.history() ?? BoardHistory.readChecked(package: path, fileSystem: fileSystem)).operationLog
        }
        if args.has("json") {
            try output.json(operations.map { logged in
                var object = Inspect.json(logged.operation)
                object["author"] = logged.author.description
                object["time"] = Self.time(logged.time)
                object["timeMilliseconds"] = logged.time.map { NSNumber(value: $0) } ?? NSNull()
                object["version"] = logged.version.map { NSNumber(value: $0) } ?? NSNull()
                return object
            })
        } else {
            for logged in operations {
                let when = (Self.time(logged.time) as? String ?? "time unknown").padding(toLength: 20, withPad: " ", startingAt: 0)
                let version = logged.version.map { "v\($0)" } ?? "v?"
                output.print("\(when)  \(version.padding(toLength: 6, withPad: " ", startingAt: 0))  \(Inspect.line(logged.operation))")
            }
        }
    }

    /// Exit 0 when the package opens afterwards (repaired or already healthy), 1 otherwise.
    private func repair(_ raw: [String]) throws {
        let args = try Arguments(raw, options: [], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        guard fileSystem.isDirectory(path) else { throw Failure("no board package at \(path)") }
        let report = try BoardPackage.repair(at: path, fileSystem: fileSystem, newReplicaID: Self.randomReplicaID)
        let package = try BoardPackage.open(at: path, fileSystem: fileSystem, newReplicaID: Self.randomReplicaID)
        let operations = package.replica.versionVector.totalCount
        package.close()
        if args.has("json") {
            try output.json([
                "changed": report.changedAnything,
                "keptRecords": report.keptRecords,
                "dropped": report.dropped.map { ["offset": $0.offset, "length": $0.length, "reason": $0.reason] },
                "damagedLogCopy": report.damagedLogCopy ?? NSNull(),
                "viewCopy": report.viewCopy ?? NSNull(),
                "replica": report.newReplica?.description ?? NSNull(),
                "missingItems": report.missingItems.map(\.uuidString),
                "lostItems": report.lost.map { ["item": $0.id.uuidString, "kind": $0.kind.rawValue] },
                "changes": report.changes.map(Inspect.json),
                "comparedWithView": report.comparedWithView,
                "logKnowsLess": report.logKnowsLess,
                "operations": operations,
                "notes": report.notes,
                "archiveDropped": report.archiveDropped.map { ["offset": $0.offset, "length": $0.length, "reason": $0.reason] },
                "damagedArchiveCopy": report.damagedArchiveCopy ?? NSNull(),
            ] as [String: Any])
            return
        }
        output.print("\(path): kept \(report.keptRecords) log record(s) (\(operations) operations)")
        for dropped in report.dropped {
            output.print("  dropped \(dropped.length) byte(s) at \(dropped.offset): \(dropped.reason)")
        }
        if let copy = report.damagedLogCopy { output.print("  the damaged log is kept as \(copy)") }
        for dropped in report.archiveDropped {
            output.print("  dropped \(dropped.length) byte(s) of the history archive at \(dropped.offset): \(dropped.reason)")
        }
        if let copy = report.viewCopy { output.print("  the previous view is kept in \(copy)") }
        if !report.changes.isEmpty || !report.lost.isEmpty {
            output.print("  what the package showed before → what it shows now:")
            for change in report.changes { output.print("    \(Inspect.line(change))") }
            for item in report.lost {
                output.print("    \(item.kind.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0))  \(item.id.uuidString)  not in the salvaged log")
            }
        }
        for note in report.notes { output.print("  \(note)") }
    }
}

func printJSON(_ object: Any) throws {
    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
    FileHandle.standardOutput.write(data + Data([10]))
}
