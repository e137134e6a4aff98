import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation

/// `board-sync history list|show --server ADDR --board NAME [--token T | --token-file F] [--tls ...]`:
/// the history the server holds for a board, fetched on demand (docs/CLIENT.md, "History from
/// the server"). Needs no package: any token that opens the board (read, write, peer) may read
/// its history.
extension Commands {
    static let serverHistoryOptions = Set(["server", "board", "token", "token-file", "timeout"] + Access.clientTLSOptions)

    private func serverTarget(_ args: Arguments) throws -> (SocketAddress, String, SyncHost.Options, Double) {
        guard let serverText = args.value("server") else { throw UsageError("missing --server HOST:PORT") }
        guard let board = args.value("board") else { throw UsageError("missing --board NAME") }
        guard Hello.isValidBoardName(board) else { throw UsageError("--board '\(board)' is not a plain name (letters, digits, '-', '_', '.')") }
        let server: SocketAddress
        do { server = try SocketAddress(parsing: serverText) } catch { throw UsageError("--server \(error)") }
        let timeout = try args.value("timeout").map { try Parse.number($0, "--timeout") } ?? 60
        guard timeout > 0, timeout <= 86_400 else { throw UsageError("--timeout must be between 0 and 86400 seconds") }
        var options = SyncHost.Options()
        options.credentials = try Access.token(args)
        options.clientTLS = try Access.clientTLS(args)
        options.log = { _ in }
        return (server, board, options, timeout)
    }

    func serverHistoryList(_ raw: [String]) throws {
        let args = try Arguments(raw, options: Self.serverHistoryOptions, flags: ["json", "tls"])
        _ = try args.positionals([])
        let (server, board, options, timeout) = try serverTarget(args)
        let fetched: (total: UInt64, versions: [HistoryVersionInfo])
        do {
            fetched = try HistoryFetch.versions(server: server, board: board, options: options, timeout: timeout)
        } catch {
            throw Failure("\(server): \(error)")
        }
        if args.has("json") {
            try output.json([
                "server": server.description, "board": board, "total": fetched.total,
                "versions": fetched.versions.map { version in
                    [
                        "number": version.number, "vector": Self.text(version.vector), "time": Self.time(version.time),
                        "authors": version.authors.map(\.description), "operations": version.operationCount,
                    ] as [String: Any]
                },
            ] as [String: Any])
            return
        }
        if fetched.versions.isEmpty { output.print("board '\(board)' on \(server): no history") }
        for version in fetched.versions {
            let when = Self.time(version.time) as? String ?? "time unknown"
            let authors = version.authors.map { String($0.description.prefix(8)) }.joined(separator: ",")
            output.print("  \(version.number)  \(when)  \(authors)  \(version.operationCount) op(s)  \(Self.text(version.vector, short: true))")
        }
    }

    func serverHistoryShow(_ raw: [String]) throws {
        let args = try Arguments(raw, options: Self.serverHistoryOptions.union(["at"]), flags: ["json", "tls"])
        _ = try args.positionals([])
        guard let at = args.value("at") else { throw UsageError("history show needs --at VERSION (a number from `history list`, or latest)") }
        let number: UInt64?
        if at == "latest" {
            number = nil
        } else {
            guard let value = UInt64(at), value <= HistoryRequest.maxNumber else {
                throw UsageError("--at '\(at)': with --server, a version number from `history list --server` (0 is the empty board) or latest")
            }
            number = value
        }
        let (server, board, options, timeout) = try serverTarget(args)
        let fetched: (replica: Replica, number: UInt64, time: Int64?, total: UInt64)
        do {
            fetched = try HistoryFetch.board(at: number, server: server, board: board, options: options, timeout: timeout)
        } catch {
            throw Failure("\(server): \(error)")
        }
        let snapshot = fetched.replica.snapshot()
        if args.has("json") {
            output.write(Data(ManifestEncoder.encode(snapshot) + [10]))
            return
        }
        output.print("version \(fetched.number) of \(fetched.total) of board '\(board)' on \(server) (\(Self.time(fetched.time) as? String ?? "time unknown"); images are not fetched)")
        output.print(Inspect.describe(snapshot, replica: fetched.replica, path: "\(board)@\(fetched.number)"))
    }
}
