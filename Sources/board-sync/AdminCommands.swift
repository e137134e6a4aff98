import BoardNet
import BoardSync
import Foundation

/// `board-sync admin list|info|delete|undelete|compact|revoke|backup`: the admin API of a
/// server's operator port (`serve --admin`) from the command line. Exit 0 when the server
/// did it, 1 when it refused or could not be reached, 64 for bad usage.
enum AdminCommands {
    static let calls = ["list", "info", "export", "delete", "undelete", "compact", "revoke", "backup"]

    static let help = CommandHelp(
        name: "admin", overview: "Call a server's admin API (serve --admin): list, describe, delete or compact boards, revoke tokens, back up.",
        usage: "admin list|info|export|delete|undelete|compact|revoke|backup [NAME [OUTPUT]] --server HOST:PORT --token-file FILE [--json]",
        options: [
            ("list", "Boards on the server, a page at a time (--limit N, default 100, at most 1000; --after NAME: the page after NAME, as the previous page's `next` says; --all follows every page)."),
            ("info NAME", "One board: size on disk, operations, replicas, connected clients, last edit."),
            ("export NAME OUTPUT", "Download the board: OUTPUT ending in .tar gets its package as a tar (extract it to get NAME.boardpkg), .png, .pdf or .svg a rendering (--scale S, default 1, at most 8)."),
            ("delete NAME", "Delete the board and leave a tombstone (clients naming it are refused with `board deleted`). Refused while clients hold it unless --force, which ends their sessions."),
            ("undelete NAME", "Remove a deleted board's tombstone: the name may be created again (empty, or from the copy a client kept)."),
            ("compact NAME", "Rewrite the board's op log as one record of its surviving operations."),
            ("revoke", "Revoke tokens as `token revoke` does (--subject ID or --token-id ID); with --redis every server applies it."),
            ("backup", "Start a backup now (the server must run with --backup-to)."),
            ("--server HOST:PORT", "The server's admin port (`serve --admin`)."),
            ("--token-file FILE", "A file whose first line is an admin token (`token --role admin`), or the server's --admin-token-file."),
            ("--tls", "The admin port speaks HTTPS (the server has --tls-cert): verify it against the system's authorities."),
            ("--tls-ca CA", "Trust the authorities in this PEM file instead (implies --tls)."),
            ("--tls-name NAME", "The name the server's certificate must carry (implies --tls)."),
            ("--timeout S", "Seconds the call may take (default 30)."),
            jsonOption,
        ])

    static func run(_ raw: [String]) throws {
        guard let call = raw.first, !call.hasPrefix("-") else { throw UsageError("give a call: \(calls.joined(separator: ", "))") }
        guard calls.contains(call) else { throw UsageError("unknown admin call '\(call)'\(Suggest.didYouMean(call, among: calls))") }
        let args = try Arguments(Array(raw.dropFirst()), options: Set(["server", "token-file", "timeout", "limit", "after", "subject", "token-id", "scale"] + Access.clientTLSOptions),
                                 flags: ["json", "tls", "force", "all"])
        let named = ["info", "delete", "undelete", "compact"].contains(call)
        let positionals = try args.positionals(call == "export" ? ["<board>", "<output>"] : named ? ["<board>"] : [])
        let board = positionals.first
        if let board, !Hello.isValidBoardName(board) {
            throw UsageError("'\(board)' is not a board name (letters, digits, '-', '_', '.'; not starting with '.')")
        }
        for (option, allowed) in [("limit", ["list"]), ("after", ["list"]), ("all", ["list"]), ("force", ["delete"]), ("subject", ["revoke"]), ("token-id", ["revoke"]), ("scale", ["export"])]
        where (args.value(option) != nil || args.has(option)) && !allowed.contains(call) {
            throw UsageError("--\(option) is for `admin \(allowed[0])`")
        }
        guard let server = args.value("server") else { throw UsageError("missing --server HOST:PORT (the server's --admin address)") }
        do { _ = try SocketAddress(parsing: server) } catch { throw UsageError("--server \(error)") }
        guard let tokenFile = args.value("token-file") else { throw UsageError("missing --token-file FILE (an admin token: `board-sync token --role admin`)") }
        let timeout = try args.value("timeout").map { try Parse.number($0, "--timeout") } ?? 30
        guard timeout > 0, timeout <= 3600 else { throw UsageError("--timeout must be between 0 and 3600 seconds") }
        let token = try readToken(tokenFile)
        let tls = try Access.clientTLS(args)
        let client = Caller(server: server, token: token, tls: tls, timeout: timeout)
        if call == "export" { return try export(board!, to: positionals[1], args: args, client: client) }
        let (method, path) = try request(call, board: board, args: args)
        var object = try client.call(method, path)
        if call == "list", args.has("all") {
            var boards = object["boards"] as? [Any] ?? []
            var previous = ""
            while let next = object["next"] as? String {
                // A cursor that does not move on (a confused server) would loop forever.
                guard Hello.isValidBoardName(next), Array(next.utf8).lexicographicallyPrecedes(Array(previous.utf8)) == false, next != previous else {
                    throw Failure("the server's page cursor '\(next.prefix(80))' does not move past '\(previous)'; stopped")
                }
                previous = next
                object = try client.call(method, path + "&after=\(next)")
                boards += object["boards"] as? [Any] ?? []
            }
            object = ["boards": boards, "next": NSNull()]
        }
        if args.has("json") {
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(text(call, object))
        }
    }

    private static func request(_ call: String, board: String?, args: Arguments) throws -> (String, String) {
        switch call {
        case "list":
            var query = ["limit=\(args.value("limit") ?? "100")"]
            if let limit = args.value("limit"), Int(limit).map({ (1...1000).contains($0) }) != true {
                throw UsageError("--limit '\(limit)' must be a whole number from 1 to 1000")
            }
            if let after = args.value("after") {
                guard Hello.isValidBoardName(after) else { throw UsageError("--after '\(after)' is not a board name") }
                query.append("after=\(after)")
            }
            return ("GET", "/boards?" + query.joined(separator: "&"))
        case "info": return ("GET", "/boards/\(board!)")
        case "delete": return ("DELETE", "/boards/\(board!)\(args.has("force") ? "?force=1" : "")")
        case "undelete", "compact": return ("POST", "/boards/\(board!)/\(call)")
        case "revoke":
            switch (args.value("subject"), args.value("token-id")) {
            case (let subject?, nil):
                guard TokenAuthority.isValidSubject(subject) else { throw UsageError("--subject is 1-64 letters, digits, '-', '_' or '.'") }
                return ("POST", "/revoke?subject=\(subject)")
            case (nil, let id?):
                guard TokenAuthority.isValidSubject(id) else { throw UsageError("--token-id is 1-64 letters, digits, '-', '_' or '.'") }
                return ("POST", "/revoke?token-id=\(id)")
            default: throw UsageError("give one of --subject ID or --token-id ID")
            }
        default: return ("POST", "/backup")
        }
    }

    /// `admin export NAME OUTPUT`: the format from OUTPUT's extension; written to a temporary
    /// file beside OUTPUT and renamed when whole (a tar must end with its end blocks).
    private static func export(_ board: String, to output: String, args: Arguments, client: Caller) throws {
        let format = URL(fileURLWithPath: output).pathExtension.lowercased()
        guard ["tar", "png", "pdf", "svg"].contains(format) else { throw UsageError("the output '\(output)' must end in .tar, .png, .pdf or .svg") }
        var path = "/boards/\(board)/export?format=\(format)"
        if let scale = args.value("scale") {
            guard format != "tar" else { throw UsageError("--scale is for renderings (.png, .pdf, .svg)") }
            let number = try Parse.number(scale, "--scale")
            guard number > 0, number <= 8 else { throw UsageError("--scale must be above 0 and at most 8") }
            path += "&scale=\(scale)"
        }
        let bytes = try client.download(path, board: board, format: format, to: output)
        if args.has("json") {
            let data = try JSONSerialization.data(withJSONObject: ["board": board, "output": output, "format": format, "bytes": bytes], options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print("wrote \(output) (\(format), \(bytes) bytes)")
        }
    }

    private static func readToken(_ file: String) throws -> String {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { throw Failure("cannot read the token file \(file)") }
        guard let line = text.split(whereSeparator: \.isNewline).first.map({ $0.trimmingCharacters(in: .whitespaces) }), !line.isEmpty,
              line.utf8.count <= 4096, !line.contains(where: { $0.isWhitespace }) else {
            throw Failure("the token file \(file) holds no token on its first line")
        }
        return line
    }

    /// One admin call over HTTP(S): the JSON object answered, or a Failure with the server's error.
    struct Caller {
        let server: String
        let token: String
        let tls: TLSContext?
        let timeout: Double

        /// The largest export written (a tar of a board at its limits is far below).
        static let maxExportBytes = 64 << 30

        /// An export streamed to a temporary file beside `output` (64 KiB at a time, never held
        /// whole), renamed over `output` only when it came whole: a tar must end with its two
        /// zero end blocks, a rendering must bring its Content-Length. Otherwise the temporary
        /// file is removed, nothing is at `output`, and the error says what came. Its size.
        func download(_ path: String, board: String, format: String, to output: String) throws -> Int {
            let url = try HTTPClient.URLParts("\(tls == nil ? "http" : "https")://\(server)\(path)")
            let temporary = output + ".part-\(getpid())"
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw Failure("cannot write \(temporary): \(String(cString: strerror(errno)))") }
            var written = 0
            var tail: [UInt8] = []  // the last 1024 bytes: a tar's end blocks
            do {
                defer { close(fd) }
                let response: HTTPClient.Response
                do {
                    response = try HTTPClient(timeout: timeout, maxResponseBytes: 64 << 10, tls: tls)
                        .request("GET", url, headers: [("Authorization", "Bearer \(token)")], maxBody: Self.maxExportBytes) { piece in
                            var done = 0
                            while done < piece.count {
                                let wrote = piece.withUnsafeBytes { write(fd, $0.baseAddress! + done, piece.count - done) }
                                if wrote < 0, errno == EINTR { continue }
                                guard wrote > 0 else { throw Failure("cannot write \(temporary): \(String(cString: strerror(errno)))") }
                                done += wrote
                            }
                            written += piece.count
                            tail = Array((tail + piece).suffix(1024))
                        }
                } catch let failure as Failure {
                    throw failure
                } catch {
                    throw Failure("the export of '\(board)' through \(server) failed after \(written) bytes: \(error); nothing was written to \(output)")
                }
                guard response.status == 200 else {
                    let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
                    let why = object?["error"] as? String ?? String(decoding: response.body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                    throw Failure("the server refused (\(response.status)): \(why)")
                }
                if format == "tar", written < 1024 || written % 512 != 0 || tail.contains(where: { $0 != 0 }) {
                    throw Failure("the export of '\(board)' ended early (\(written) bytes, no end of archive: the connection closed before the tar's end); nothing was written to \(output)")
                }
                guard fsync(fd) == 0 else { throw Failure("cannot write \(temporary): \(String(cString: strerror(errno)))") }
            } catch {
                unlink(temporary)
                throw error
            }
            guard rename(temporary, output) == 0 else {
                let why = String(cString: strerror(errno))
                unlink(temporary)
                throw Failure("cannot write \(output): \(why)")
            }
            return written
        }

        func call(_ method: String, _ path: String) throws -> [String: Any] {
            let url = try HTTPClient.URLParts("\(tls == nil ? "http" : "https")://\(server)\(path)")
            let response: HTTPClient.Response
            do {
                response = try HTTPClient(timeout: timeout, maxResponseBytes: 64 << 20, tls: tls)
                    .request(method, url, headers: [("Authorization", "Bearer \(token)")])
            } catch {
                throw Failure("cannot reach the admin port at \(server): \(error)")
            }
            let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
            guard (200..<300).contains(response.status) else {
                let why = object?["error"] as? String ?? String(decoding: response.body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                throw Failure("the server refused (\(response.status)): \(why)")
            }
            guard let object else { throw Failure("the server's answer (\(response.status)) is not a JSON object") }
            return object
        }
    }

    private static func text(_ call: String, _ object: [String: Any]) -> String {
        func field(_ value: Any?) -> String {
            switch value {
            case let number as NSNumber: return number.stringValue
            case let string as String: return string
            default: return "-"
            }
        }
        func line(_ board: [String: Any]) -> String {
            let counts = board["counts"] as? String == "lastSave" ? " (as last saved)" : ""
            return "\(field(board["name"]))  \(field(board["bytesOnDisk"])) bytes  \(field(board["operations"])) operations\(counts)  \(field(board["replicas"])) replicas  \(field(board["clients"])) clients  last edit \(field(board["lastEdit"]))"
        }
        switch call {
        case "list":
            var lines = (object["boards"] as? [[String: Any]] ?? []).map(line)
            if lines.isEmpty { lines.append("no boards") }
            if let next = object["next"] as? String { lines.append("more: --after \(next)") }
            return lines.joined(separator: "\n")
        case "info": return line(object)
        case "delete":
            return "deleted board '\(field(object["board"]))' (\(field(object["sessionsEnded"])) session(s) ended); clients naming it are refused until `admin undelete`"
        case "undelete": return "board '\(field(object["board"]))' may be created again"
        case "compact":
            return "compacted board '\(field(object["board"]))': op log \(field(object["opLogBytesBefore"])) -> \(field(object["opLogBytesAfter"])) bytes"
        case "revoke": return "revoked: \(field(object["revoked"])) (servers apply it within a second)"
        default: return "backup started (the server's log says when it completed)"
        }
    }
}
