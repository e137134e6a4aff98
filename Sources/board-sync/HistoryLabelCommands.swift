import BoardCRDT
import BoardStore
import Foundation

/// `board-sync history label`: named versions (docs/CLIENT.md, "Named versions"). A label is an
/// ordinary operation (a last-writer-wins register per label), so it travels to every replica
/// of the board through sync and survives compaction and repair.
///
///     history label <package> V "text"          names version V
///     history label <package> --rename ID "text"
///     history label <package> --delete ID
extension Commands {
    func historyLabel(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["rename", "delete"], flags: ["json"])
        let rename = args.value("rename")
        let delete = args.value("delete")
        if rename != nil, delete != nil { throw UsageError("history label: give --rename or --delete, not both") }
        let names: [String]
        if rename != nil {
            names = try args.positionals(["<package>", "<text>"])
        } else if delete != nil {
            names = try args.positionals(["<package>"])
        } else {
            names = try args.positionals(["<package>", "<version>", "<text>"])
        }
        let path = names[0]
        guard fileSystem.isDirectory(Path.join(path, PackageLayout.sync)) else {
            throw Failure("no board package with sync data at \(path)")
        }
        func labelID(_ text: String, _ what: String) throws -> LabelID {
            guard let id = LabelID(text) else {
                throw UsageError("\(what): '\(text)' is not a label id (REPLICA#NUMBER as `history list` shows it)")
            }
            return id
        }
        let time = BoardHistory.wallClock() ?? 0
        let (edit, label): (LocalEdit, LabelID) = try withBoard(path) { board in
            do {
                if let rename {
                    let id = try labelID(rename, "--rename")
                    return (try board.commit { try $0.renameLabel(id, to: names[1], time: time) }, id)
                }
                if let delete {
                    let id = try labelID(delete, "--delete")
                    return (try board.commit { try $0.removeLabel(id) }, id)
                }
                let history = try (board as? BoardPackage)?.history() ?? BoardHistory.readChecked(package: path, fileSystem: fileSystem)
                let vector = try Self.version(names[1], in: history, "<version>")
                let edit = try board.commit { try $0.setLabel(text: names[2], version: vector, time: time) }
                guard case .setLabel(let id, _)? = edit.operations.first?.payload else { throw Failure("no label was written") }
                return (edit, id)
            } catch let error as EditError {
                throw Failure("history label: \(error)")
            }
        }
        let verb = rename != nil ? "renamed" : delete != nil ? "deleted" : "labelled"
        if args.has("json") {
            try output.json(["label": label.description, "action": verb, "operations": edit.operations.count])
        } else if delete != nil {
            output.print("deleted label \(label)")
        } else {
            output.print("\(verb) \(label): \"\(rename != nil ? names[1] : names[2])\" (sent to every replica of the board by sync)")
        }
    }

    /// A label for `history list`: id, text, version, author and time.
    static func labelObject(_ label: NamedVersion, in history: BoardHistory) -> [String: Any] {
        let number: Any = history.versionNumber(of: label.version) ?? NSNull()
        return [
            "id": label.id.description, "text": label.text, "vector": text(label.version), "version": number,
            "author": label.author.description, "time": time(label.time),
        ]
    }

    static func labelLine(_ label: NamedVersion) -> String {
        let when = time(label.time) as? String ?? "time unknown"
        return "label \(label.id)  \"\(label.text)\"  by \(label.author.description.prefix(8))  \(when)"
    }
}
