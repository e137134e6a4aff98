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
    let fileSystem: any FileSystem = PosixFileSystem()

    static func randomReplicaID() -> ReplicaID {
        var generator = SystemRandomNumberGenerator()
        return ReplicaID(UInt64.random(in: 1...UInt64.max, using: &generator))
    }

    func run(_ name: String, _ raw: [String]) throws {
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
            try printJSON(["package": path, "replica": package.replica.id.description])
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
        let edit = try withPackage(path) { package in
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
        let edit = try withPackage(path) { package in
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
        let edit = try withPackage(positionals[0]) { package in
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
        let edit = try withPackage(positionals[0]) { package in
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
        let edit = try withPackage(positionals[0]) { package in
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
        let edit = try withPackage(positionals[0]) { package in
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
        let edit = try withPackage(path) { package in
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
        let edit = try withPackage(path) { package in
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
        let edit = try withPackage(positionals[0]) { package in
            try package.commit { try $0.put(id, between: lower, and: upper) }
        }
        try report(edit, json: args.has("json"), printID: false)
    }

    private func itemCommand(_ name: String, _ raw: [String]) throws {
        let args = try Arguments(raw, options: [], flags: ["json"])
        let positionals = try args.positionals(["<package>", "<id>"])
        let id = ItemID(uuid: try Parse.uuid(positionals[1]))
        let edit = try withPackage(positionals[0]) { package in
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
        let edit = try withPackage(path) { package in
            try package.commit { name == "undo" ? try $0.undo() : try $0.redo() }
        }
        if edit.operations.isEmpty && !args.has("json") {
            FileHandle.standardError.write(Data("nothing to \(name)\n".utf8))
        }
        try report(edit, json: args.has("json"), printID: false)
    }

    private func show(_ raw: [String]) throws {
        let args = try Arguments(raw, options: [], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        let (board, replica) = try withPackage(path) { ($0.replica.snapshot(), $0.replica) }
        if args.has("json") {
            FileHandle.standardOutput.write(Data(ManifestEncoder.encode(board) + [10]))
            return
        }
        print(Inspect.describe(board, replica: replica, path: path))
    }

    /// Renders the board to a PNG, PDF or SVG file (by the output's extension), through the
    /// package's snapshot and the writer, as the seed routes exports (no live board: the
    /// package is only read).
    private func export(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["scale"], flags: ["transparent", "json"])
        let paths = try args.positionals(["<package>", "<output>"])
        let (path, output) = (paths[0], paths[1])
        guard let type = ContentType.forPath(output), !type.isNative else {
            throw UsageError("the output '\(output)' must end in .png, .pdf or .svg")
        }
        let scale = try args.value("scale").map { try Parse.number($0, "--scale") } ?? 1
        guard scale > 0, scale <= 64 else { throw UsageError("--scale must be a number above 0 and at most 64") }
        let absolute = { (p: String) in URL(fileURLWithPath: p).standardizedFileURL.path }
        if absolute(output).hasPrefix(absolute(path) + "/") {
            throw UsageError("the output '\(output)' is inside the package; write it somewhere else")
        }
        let policy = ExportPolicy(scale: scale, transparent: args.has("transparent"))
        let report = try withPackage(path) { package -> PackageWriter.Report in
            let snapshot = package.replica.snapshot()
            let writer = BoardWriter(configuration: WriteConfiguration(contentType: type, fileSystem: fileSystem, export: policy))
            do {
                return try writer.write(content: snapshot, to: output, previous: nil)
            } catch let error as ExportError {
                throw Failure("cannot export \(path): \(error)")
            }
        }
        for warning in report.warnings { FileHandle.standardError.write(Data("warning: \(warning)\n".utf8)) }
        let bytes = (try? fileSystem.fileSize(output)).flatMap { $0 } ?? 0
        if args.has("json") {
            try printJSON(["output": output, "contentType": type.identifier, "bytes": bytes, "scale": scale,
                           "transparent": policy.transparent, "warnings": report.warnings] as [String: Any])
        } else {
            print("wrote \(output) (\(type.fileExtension.uppercased()), \(bytes) bytes)\(report.warnings.isEmpty ? "" : "; \(report.warnings.count) placeholder(s), see the warnings")")
        }
    }

    private func log(_ raw: [String]) throws {
        let args = try Arguments(raw, options: [], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        let operations = try withPackage(path) { package in
            package.replica.fullState().operations.sorted { $0.timestamp < $1.timestamp }
        }
        if args.has("json") {
            try printJSON(operations.map(Inspect.json))
        } else {
            for op in operations { print(Inspect.line(op)) }
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
            try printJSON([
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
            ] as [String: Any])
            return
        }
        print("\(path): kept \(report.keptRecords) log record(s) (\(operations) operations)")
        for dropped in report.dropped {
            print("  dropped \(dropped.length) byte(s) at \(dropped.offset): \(dropped.reason)")
        }
        if let copy = report.damagedLogCopy { print("  the damaged log is kept as \(copy)") }
        if let copy = report.viewCopy { print("  the previous view is kept in \(copy)") }
        if !report.changes.isEmpty || !report.lost.isEmpty {
            print("  what the package showed before → what it shows now:")
            for change in report.changes { print("    \(Inspect.line(change))") }
            for item in report.lost {
                print("    \(item.kind.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0))  \(item.id.uuidString)  not in the salvaged log")
            }
        }
        for note in report.notes { print("  \(note)") }
    }

    // MARK: Helpers

    /// Opens the package, runs `body`, saves the view if anything changed, and closes it.
    private func withPackage<T>(_ path: String, _ body: (BoardPackage) throws -> T) throws -> T {
        guard fileSystem.isDirectory(path) else {
            throw Failure("no board package at \(path) (create one with `board-sync new \(path)`)")
        }
        let package = try BoardPackage.open(at: path, fileSystem: fileSystem, newReplicaID: Self.randomReplicaID)
        defer { package.close() }
        for notice in package.notices {
            FileHandle.standardError.write(Data("note: \(path): \(notice)\n".utf8))
        }
        let before = package.logRecordCount
        let result = try body(package)
        if package.logRecordCount != before {
            do {
                try package.save()
            } catch {
                // The edit is durable in the op log: failing here would invite a retry that
                // makes it twice. Say what happened and succeed.
                FileHandle.standardError.write(Data("warning: \(path): the edit is saved, but the view (manifest.json, images) could not be updated: \(error). It is brought up to date the next time the package is opened with room to write.\n".utf8))
            }
        }
        return result
    }

    private func readPNG(_ path: String) throws -> Data {
        let bytes: [UInt8]
        do {
            bytes = try fileSystem.readFile(path)
        } catch let error as FileSystemError {
            throw Failure("cannot read image \(path): \(error.message)")
        }
        do {
            _ = try PNGHeader(validating: bytes)
        } catch let error as PNGError {
            throw Failure("\(path): \(error.description)")
        }
        return Data(bytes)
    }

    private func report(_ edit: LocalEdit, json: Bool, printID: Bool) throws {
        if json {
            var object: [String: Any] = ["operations": edit.operations.count]
            if let item = edit.item { object["id"] = item.description }
            try printJSON(object)
        } else if printID, let item = edit.item {
            print(item.description)
        }
    }
}

func printJSON(_ object: Any) throws {
    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
    FileHandle.standardOutput.write(data + Data([10]))
}
