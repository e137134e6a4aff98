import BoardCRDT
import BoardModel
import BoardStore
import Foundation

/// `board-sync history list|show|diff|restore`: a package's history (docs/CLIENT.md, "History").
/// `list`, `show` and `diff` only read the package's files (they work while a peer or the server
/// holds it); `restore` edits it like any command.
///
/// A version is written as its number in `history list` (`0` is the empty board before any
/// operation), `latest`, a label's id `REPLICA#NUMBER` (the version it names), or a version
/// vector `REPLICA:SEQ,REPLICA:SEQ` whose replicas are 16-hex-digit ids or prefixes that name
/// one author of the history.
extension Commands {
    /// Entries a version vector may have on the command line.
    static let maxVectorEntries = 1024

    func history(_ raw: [String]) throws {
        guard let sub = raw.first else { throw UsageError("history needs a subcommand: list, show, diff, restore, fork, prune or label") }
        let rest = Array(raw.dropFirst())
        let fromServer = rest.contains("--server")
        switch sub {
        case "list": try fromServer ? serverHistoryList(rest) : historyList(rest)
        case "show": try fromServer ? serverHistoryShow(rest) : historyShow(rest)
        case "diff": try historyDiff(rest)
        case "restore": try historyRestore(rest)
        case "fork": try historyFork(rest)
        case "prune": try historyPrune(rest)
        case "label": try historyLabel(rest)
        default: throw UsageError("unknown history subcommand '\(sub)'\(Suggest.didYouMean(sub, among: ["list", "show", "diff", "restore", "fork", "prune", "label"]))")
        }
    }

    func readHistory(_ path: String) throws -> BoardHistory {
        guard fileSystem.isDirectory(Path.join(path, PackageLayout.sync)) else {
            throw Failure("no board package with sync data at \(path)")
        }
        return try BoardHistory.readChecked(package: path, fileSystem: fileSystem)
    }

    private func historyList(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["gap"], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        let minutes = try args.value("gap").map { try Parse.positive($0, "--gap", max: 525_600) } ?? Double(BoardHistory.defaultSessionGap) / 60_000
        let history = try readHistory(path)
        let sessions = history.sessions(quietGap: Int64(minutes * 60_000))
        let labels = history.labels
        if args.has("json") {
            try output.json([
                "versions": history.versions.map { version in
                    [
                        "number": version.number, "vector": Self.text(version.vector), "time": Self.time(version.time),
                        "authors": version.authors.map(\.description), "operations": version.operationCount,
                    ] as [String: Any]
                },
                "sessions": sessions.map { session in
                    [
                        "first": session.first, "last": session.last, "start": Self.time(session.start), "end": Self.time(session.end),
                        "authors": session.authors.map(\.description), "operations": session.operationCount,
                    ] as [String: Any]
                },
                "labels": labels.map { Self.labelObject($0, in: history) },
                "archivedRecords": history.archivedRecords,
                "archiveBytes": history.archiveBytes,
            ] as [String: Any])
            return
        }
        if history.versions.isEmpty { output.print("\(path): no history yet") }
        for session in sessions {
            let authors = session.authors.count == 1 ? "1 author" : "\(session.authors.count) authors"
            output.print("session of versions \(session.first)–\(session.last): \(Self.time(session.start) as? String ?? "time unknown") to \(Self.time(session.end) as? String ?? "time unknown"), \(authors), \(session.operationCount) operation(s)")
            for version in history.versions[(session.first - 1)...(session.last - 1)] {
                let when = Self.time(version.time) as? String ?? "time unknown"
                let authors = version.authors.map { String($0.description.prefix(8)) }.joined(separator: ",")
                output.print("  \(version.number)  \(when)  \(authors)  \(version.operationCount) op(s)  \(Self.text(version.vector, short: true))")
                for label in labels where label.version == version.vector {
                    output.print("       \(Self.labelLine(label))")
                }
            }
        }
        // Labels naming the empty board or a vector that is no version of this history.
        let elsewhere = labels.filter { label in label.version.entries.isEmpty || history.versionNumber(of: label.version) == nil }
        for label in elsewhere {
            output.print("\(Self.labelLine(label))  at \(label.version.entries.isEmpty ? "version 0" : Self.text(label.version, short: true))")
        }
    }

    private func historyShow(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["at"], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        guard let at = args.value("at") else { throw UsageError("history show needs --at VERSION") }
        let history = try readHistory(path)
        let vector = try Self.version(at, in: history, "--at")
        var replica = history.replica(at: vector)
        history.loadAssets(into: &replica)
        let board = replica.snapshot()
        if args.has("json") {
            output.write(Data(ManifestEncoder.encode(board) + [10]))
            return
        }
        output.print("version \(Self.text(vector, short: true)) of \(path)")
        output.print(Inspect.describe(board, replica: replica, path: path))
    }

    private func historyDiff(_ raw: [String]) throws {
        let args = try Arguments(raw, options: [], flags: ["json"])
        let names = try args.positionals(["<package>", "<from>", "<to>"])
        let history = try readHistory(names[0])
        let from = try Self.version(names[1], in: history, "<from>")
        let to = try Self.version(names[2], in: history, "<to>")
        let changes = history.diff(from: from, to: to)
        func kind(_ item: BoardItem) -> String { if case .stroke = item { "stroke" } else { "sticker" } }
        if args.has("json") {
            var object: [String: Any] = [
                "from": Self.text(from), "to": Self.text(to),
                "added": changes.added.map { ["id": $0.id.uuidString, "kind": kind($0)] },
                "changed": changes.changed.map { ["id": $0.id.uuidString, "kind": kind($0)] },
                "removed": changes.removed.map(\.uuidString),
                "backgroundChanged": changes.background != nil,
                "paintOrderChanged": changes.paintOrder != nil,
            ]
            object["canvasSize"] = changes.canvasSize.map { ["width": $0.width, "height": $0.height] } ?? NSNull()
            try output.json(object)
            return
        }
        if changes.isEmpty { output.print("no changes") }
        for item in changes.added { output.print("added    \(kind(item).padding(toLength: 7, withPad: " ", startingAt: 0))  \(item.id.uuidString)") }
        for item in changes.changed { output.print("changed  \(kind(item).padding(toLength: 7, withPad: " ", startingAt: 0))  \(item.id.uuidString)") }
        for id in changes.removed { output.print("removed           \(id.uuidString)") }
        if let size = changes.canvasSize { output.print("canvas   \(size.width) x \(size.height)") }
        if let background = changes.background { output.print("background  \(background.sha256 ?? "none")") }
        if changes.paintOrder != nil { output.print("paint order changed") }
    }

    private func historyRestore(_ raw: [String]) throws {
        let args = try Arguments(raw, options: [], flags: ["json"])
        let names = try args.positionals(["<package>", "<version>"])
        let path = names[0]
        guard fileSystem.isDirectory(Path.join(path, PackageLayout.sync)) else {
            throw Failure("no board package with sync data at \(path)")
        }
        let (edit, vector) = try withBoard(path) { board in
            let history = try (board as? BoardPackage)?.history() ?? BoardHistory.readChecked(package: path, fileSystem: fileSystem)
            let vector = try Self.version(names[1], in: history, "<version>")
            let past = history.replica(at: vector)
            return (try board.commit { try $0.edits(toReturnTo: past) }, vector)
        }
        if args.has("json") {
            try output.json(["operations": edit.operations.count, "version": Self.text(vector)])
        } else {
            output.print("restored version \(Self.text(vector, short: true)): \(edit.operations.count) operation(s), one undo step (`board-sync undo \(path)` takes it back)")
        }
    }

    private func historyFork(_ raw: [String]) throws {
        let args = try Arguments(raw, options: [], flags: ["json"])
        let names = try args.positionals(["<package>", "<version>", "<new package>"])
        let history = try readHistory(names[0])
        let vector = try Self.version(names[1], in: history, "<version>")
        let destination = names[2]
        guard !fileSystem.exists(destination) else { throw Failure("\(destination) already exists; choose another name or remove it first") }
        let fork = try BoardPackage.fork(history, at: vector, to: destination, fileSystem: fileSystem, replicaID: Self.randomReplicaID())
        let operations = fork.replica.storedOperationCount
        let replica = fork.replica.id
        fork.close()
        if args.has("json") {
            try output.json(["package": destination, "version": Self.text(vector), "operations": operations, "replica": replica.description])
        } else {
            output.print("wrote \(destination): the board at version \(Self.text(vector, short: true)) (\(operations) operations), editing as replica \(replica)")
        }
    }

    private func historyPrune(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["before"], flags: ["json"])
        let path = try args.positionals(["<package>"])[0]
        guard let before = args.value("before") else { throw UsageError("history prune needs --before VERSION") }
        let vector = try Self.version(before, in: try readHistory(path), "--before")
        let package: BoardPackage
        do {
            package = try BoardPackage.open(at: path, fileSystem: fileSystem, newReplicaID: Self.randomReplicaID)
        } catch let error as StoreError where error.code == .locked {
            throw Failure("\(path) is open in another process (a peer or the server); prune it when that has finished")
        }
        defer { package.close() }
        let bytes: (before: Int, after: Int)
        do {
            bytes = try package.pruneHistory(before: vector)
        } catch let error as HistoryError {
            throw UsageError(error.description)
        }
        let versions = try package.history().versions.count
        if args.has("json") {
            try output.json(["horizon": Self.text(vector), "archiveBytesBefore": bytes.before, "archiveBytesAfter": bytes.after, "versions": versions])
        } else {
            output.print("pruned the history of \(path) before \(Self.text(vector, short: true)): the archive went from \(bytes.before) to \(bytes.after) bytes; \(versions) version(s) remain")
        }
    }

    // MARK: Versions as text

    /// `REPLICA:SEQ,...` sorted by replica (`short`: 8-hex-digit prefixes), `0` when empty.
    static func text(_ vector: VersionVector, short: Bool = false) -> String {
        if vector.entries.isEmpty { return "0" }
        return vector.sortedEntries.map { "\(short ? String($0.replica.description.prefix(8)) : $0.replica.description):\($0.seq)" }
            .joined(separator: ",")
    }

    static func time(_ milliseconds: Int64?) -> Any {
        guard let milliseconds else { return NSNull() }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    /// Parses a version: a number of `history list`, `0`, `latest`, a label id, or a vector.
    static func version(_ text: String, in history: BoardHistory, _ what: String) throws -> VersionVector {
        let vector = try parseVersion(text, in: history, what)
        if let horizon = history.horizon, !vector.dominates(horizon) {
            throw UsageError("\(what): version \(Self.text(vector, short: true)) is before the history's horizon \(Self.text(horizon, short: true)) (pruned)")
        }
        return vector
    }

    private static func parseVersion(_ text: String, in history: BoardHistory, _ what: String) throws -> VersionVector {
        if text == "latest" { return history.latest }
        if text.contains("#") {
            // A named version: the vector its label names.
            guard let id = LabelID(text) else { throw UsageError("\(what): '\(text)' is not a label id (REPLICA#NUMBER as `history list` shows it)") }
            guard let label = history.labels.first(where: { $0.id == id }) else {
                throw UsageError("\(what): no label \(id) in this history (see `board-sync history list`)")
            }
            return label.version
        }
        if !text.isEmpty, text.allSatisfy(\.isASCII), text.allSatisfy(\.isNumber) {
            guard let number = Int(text), number <= history.versions.count else {
                throw UsageError("\(what): there is no version \(text) (the history has \(history.versions.count); see `board-sync history list`)")
            }
            return number == 0 ? .empty : history.versions[number - 1].vector
        }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count <= maxVectorEntries else { throw UsageError("\(what): more than \(maxVectorEntries) entries in a version vector") }
        let authors = Set(history.versions.flatMap(\.authors)).union(history.latest.entries.keys)
        var entries: [ReplicaID: UInt64] = [:]
        for part in parts {
            let pair = part.split(separator: ":", omittingEmptySubsequences: false)
            guard pair.count == 2, let seq = UInt64(pair[1]), seq <= Op.maxCounter else {
                throw UsageError("\(what): '\(part)' is not REPLICA:SEQ (a version is a number from `history list`, `latest`, or REPLICA:SEQ,... with SEQ a whole number)")
            }
            let name = pair[0].lowercased()
            let replica: ReplicaID
            if let exact = ReplicaID(hex: name) {
                replica = exact
            } else {
                let matches = authors.filter { $0.description.hasPrefix(name) }
                guard !name.isEmpty, name.allSatisfy(\.isHexDigit), matches.count == 1 else {
                    throw UsageError("\(what): '\(name)' names \(matches.isEmpty ? "no" : "more than one") author of this history (give more hex digits of the replica id)")
                }
                replica = matches.first!
            }
            guard entries[replica] == nil else { throw UsageError("\(what): replica \(replica) appears twice") }
            entries[replica] = seq
        }
        return VersionVector(entries)
    }
}
