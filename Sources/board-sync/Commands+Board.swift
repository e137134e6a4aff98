import BoardClient
import BoardCRDT
import BoardModel
import BoardStore
import Foundation
import Synchronization

/// The board a command works on: the package opened by this process, or the board of the
/// running `peer` that holds it (the command then runs in the peer, on its `LiveBoard`). Every
/// command is written once, against this.
protocol CommandBoard {
    /// The replica now (a copy).
    var replica: Replica { get }
    /// One operation group, durable before it returns (and sent at once by a live peer).
    func commit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit
}

extension BoardPackage: CommandBoard {}

/// A `LiveBoard` as a `CommandBoard`, used only from inside `LiveBoard.runCommand` (on the actor).
struct LiveCommandBoard: CommandBoard {
    let live: LiveBoard
    var replica: Replica { live.assumeIsolated { $0.replica } }
    func commit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        try withoutActuallyEscaping(body) { body in
            let handed = Handed(value: body)  // runs here, on the actor, before this returns
            return try live.assumeIsolated { try $0.edit(handed.value) }
        }
    }
}

extension LiveBoard {
    /// Runs `body` on the board's actor (a command's reads and one edit: never its rendering).
    func runCommand<T: Sendable>(_ body: @Sendable (isolated LiveBoard) -> T) -> T { body(self) }
}

/// A value handed across threads whose sender waits for the receiver to finish with it.
struct Handed<T>: @unchecked Sendable {
    let value: T
}

/// A closure handed to another thread while its owner waits; `take()` lets go of it there (or
/// `drop()` here, when it will never be taken), so nothing holds it once the owner goes on
/// (`withoutActuallyEscaping` checks that).
final class HandedOnce<T>: @unchecked Sendable {
    private var value: T?
    private let lock = Mutex(())
    init(_ value: T) { self.value = value }
    /// The value, once (nil after a `drop()`).
    func take() -> T? { lock.withLock { _ in defer { value = nil }; return value } }
    /// Lets go of the value if it was not taken; false when it was.
    func drop() -> Bool { lock.withLock { _ in defer { value = nil }; return value != nil } }
}

/// The package was open in another process: the command may go to its peer (`ControlClient`).
struct PackageHeld: Error {
    let path: String
    let error: StoreError
}

/// Where a command's output goes: straight to this process's stdout, stderr and files, or
/// collected for a control connection's answer (the client then prints and writes it).
final class CommandOutput: Sendable {
    let direct: Bool
    private struct Collected {
        var stdout = Data(), stderr = Data()
        var file: ControlResponse.File?
    }
    private let collected = Mutex(Collected())

    init(direct: Bool) { self.direct = direct }

    var stdout: Data { collected.withLock { $0.stdout } }
    var stderr: Data { collected.withLock { $0.stderr } }
    var file: ControlResponse.File? { collected.withLock { $0.file } }

    func write(_ data: Data) {
        if direct { FileHandle.standardOutput.write(data) } else { collected.withLock { $0.stdout += data } }
    }

    /// Like `print`: the text and a newline.
    func print(_ text: String) { write(Data((text + "\n").utf8)) }

    /// A line on stderr (notes, warnings).
    func error(_ text: String) {
        let data = Data((text + "\n").utf8)
        if direct { FileHandle.standardError.write(data) } else { collected.withLock { $0.stderr += data } }
    }

    func json(_ object: Any) throws {
        write(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]) + Data([10]))
    }

    /// An export's bytes: written here (replacing `path` atomically), or handed to the client,
    /// which writes them where it asked (the peer never writes a path a request names).
    func writeFile(_ path: String, _ bytes: Data) throws {
        if direct {
            try Self.writeExport(path, bytes)
        } else {
            collected.withLock { $0.file = ControlResponse.File(path: path, bytes: bytes) }
        }
    }

    static func writeExport(_ path: String, _ bytes: Data) throws {
        let fileSystem = PosixFileSystem()
        if fileSystem.isDirectory(path) {
            throw StoreError.writeFailed(path: path, "it is a folder; an export is a single file")
        }
        try fileSystem.writeAtomically(path, [UInt8](bytes))
    }
}

/// The images a command reads (`--image`): from disk in the process the user ran (recorded, so
/// that a command sent to a peer carries their bytes), or as a control request carried them.
final class CommandImages: Sendable {
    private let supplied: [String: Data]?
    private let readSoFar = Mutex<[String: Data]>([:])

    /// Reads from disk.
    init() { supplied = nil }
    /// Only what a request carried.
    init(supplied: [String: Data]) { self.supplied = supplied }

    /// Every image read from disk so far, by the path the command named.
    var read: [String: Data] { readSoFar.withLock { $0 } }

    func png(_ path: String) throws -> Data {
        let bytes: [UInt8]
        if let supplied {
            guard let data = supplied[path] else { throw Failure("the request names image \(path) but carries no bytes for it") }
            bytes = [UInt8](data)
        } else {
            do {
                bytes = try PosixFileSystem().readFile(path)
            } catch let error as FileSystemError {
                throw Failure("cannot read image \(path): \(error.message)")
            }
        }
        do {
            _ = try PNGHeader(validating: bytes)
        } catch let error as PNGError {
            throw Failure("\(path): \(error.description)")
        }
        let data = Data(bytes)
        if supplied == nil { readSoFar.withLock { $0[path] = data } }
        return data
    }
}

extension Commands {
    /// Runs `body` on the command's board: the package at `path` opened here (its view saved
    /// when anything changed, then closed), or the running peer's live board. A package another
    /// process holds throws `PackageHeld`.
    func withBoard<T>(_ path: String, _ body: (any CommandBoard) throws -> T) throws -> T {
        if case .hosted(let runner) = board {
            return try runner.run(body)
        }
        guard fileSystem.isDirectory(path) else {
            throw Failure("no board package at \(path) (create one with `board-sync new \(path)`)")
        }
        let package: BoardPackage
        do {
            package = try BoardPackage.open(at: path, fileSystem: fileSystem, newReplicaID: Self.randomReplicaID)
        } catch let error as StoreError where error.code == .locked {
            throw PackageHeld(path: path, error: error)
        }
        defer { package.close() }
        for notice in package.notices {
            output.error("note: \(path): \(notice)")
        }
        let before = package.logRecordCount
        let result = try body(package)
        if package.logRecordCount != before {
            do {
                try package.save()
            } catch {
                // The edit is durable in the op log: failing here would invite a retry that
                // makes it twice. Say what happened and succeed.
                output.error("warning: \(path): the edit is saved, but the view (manifest.json, images) could not be updated: \(error). It is brought up to date the next time the package is opened with room to write.")
            }
        }
        return result
    }

    func readPNG(_ path: String) throws -> Data { try images.png(path) }

    func report(_ edit: LocalEdit, json: Bool, printID: Bool) throws {
        if json {
            var object: [String: Any] = ["operations": edit.operations.count]
            if let item = edit.item { object["id"] = item.description }
            try output.json(object)
        } else if printID, let item = edit.item {
            output.print(item.description)
        }
    }
}
