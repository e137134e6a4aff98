import BoardModel
import BoardStore
import BoardSync
import Dispatch
import Foundation

/// `GET /boards/NAME/export?format=tar|png|pdf|svg[&scale=S]`: the package as a ustar stream,
/// or a rendering. Both are streamed as the client reads: at most `exportHighWater` bytes wait
/// in the connection, the next piece is read or cut only when the client took the last, and a
/// client that stops reading for `drainTimeout` is closed (the files it held are closed with it).
extension AdminServer {
    static let exportHighWater = 256 << 10
    static let exportChunk = 64 << 10
    /// Pieces (headers, chunks) one loop turn cuts for one export at most.
    static let exportPiecesPerTurn = 64
    /// Files the tar leaves out: the lock, and the view index and undo history. Only `sync/` is
    /// exported (the op log's durable prefix, the images, which are only ever added, identity and
    /// authorship): the view (manifest, stickers, background) is rewritten by saves while the
    /// stream runs and could disagree with the log, so `board-sync` rebuilds it from the log when
    /// it first opens the copy (consistent by construction, as backups are).
    /// The replica identity is left out too (as backups do): a copy must take an identity of its own.
    static let exportSkipped: Set<String> = [PackageLayout.lock, PackageLayout.view, PackageLayout.undo, PackageLayout.identity]

    func export(_ name: String, _ query: [String: String], client: Client, head: Bool) throws {
        for key in query.keys where !["format", "scale"].contains(key) {
            throw AdminError("unknown parameter '\(Self.clipped(key))' (export takes format and scale)", status: 400)
        }
        let format = query["format"] ?? "tar"
        guard ["tar", "png", "pdf", "svg"].contains(format) else {
            throw AdminError("format '\(Self.clipped(format))' must be tar, png, pdf or svg", status: 400)
        }
        var scale = 1.0
        if let text = query["scale"] {
            guard format != "tar", let number = Double(text), number > 0, number <= 8 else {
                throw AdminError("scale '\(Self.clipped(text))' must be a number above 0 and at most 8 (renderings only)", status: 400)
            }
            scale = number
        }
        if let at = BoardTombstones.deletedAt(dataDirectory, name) { throw AdminError("board '\(name)' was deleted at \(at)", status: 410) }
        let path = packagePath(name)
        guard host.boards[name] != nil || FileManager.default.fileExists(atPath: path) else {
            throw AdminError("no board '\(name)' on this server", status: 404)
        }
        guard exportsRunning < options.maxExports else {
            throw AdminError("\(exportsRunning) exports are running, the limit (retry when one is done)", status: 503)
        }
        if format == "tar" {
            // The package's files are listed off the loop thread (a board may hold 100,000
            // images): the export holds its place meanwhile, with no request timeout.
            var opLogBytes: Int?
            if let board = host.boards[name] {
                board.hub.commitMerges()
                opLogBytes = (board.store as? BoardPackage)?.backupPoint.logBytes
            }
            client.rendering = true
            exportsRunning += 1  // the listing's place, given back when it is done
            let box = RenderBox(server: self, client: client)
            let loop = self.loop
            let logBytes = opLogBytes
            DispatchQueue.global().async {
                let result = Result { try Self.tarStream(name, path: path, opLogBytes: logBytes) }
                loop.execute { box.listed(result, name: name, head: head) }
            }
        } else {
            guard let render = options.render else { throw AdminError("this server cannot render boards", status: 501) }
            guard rendersRunning < options.maxRenders else {
                throw AdminError("\(rendersRunning) rendering is running, the limit (retry when it is done, or export a tar)", status: 503)
            }
            guard host.endpoint.preload(board: name), let board = host.boards[name] else {
                throw AdminError("board '\(name)' cannot be opened now (see the server's log)", status: 503)
            }
            let snapshot = board.store.replica.snapshot()
            client.rendering = true
            exportsRunning += 1  // the render's place, given back by `RenderBox.finished` whatever became of the client
            rendersRunning += 1
            let box = RenderBox(server: self, client: client)
            let loop = self.loop
            let scale = scale
            DispatchQueue.global().async {
                let result = Result { try render(snapshot, format, scale) }
                loop.execute { box.finished(result, format: format, name: name, head: head) }
            }
        }
    }

    /// Answers `200` with a body cut by `source` as the client reads, then closes.
    func startStream(_ client: Client, contentType: String, filename: String, head: Bool, source: @escaping () throws -> [UInt8]?) {
        guard !client.answered, !client.connection.isClosed else { return }
        client.answered = true
        if !client.exporting { client.exporting = true; exportsRunning += 1 }
        requests["200", default: 0] += 1
        var text = "HTTP/1.1 200 OK\r\n"
        for (header, value) in Self.headers + [("Content-Type", contentType), ("Content-Disposition", "attachment; filename=\"\(filename)\"")] {
            text += "\(header): \(value)\r\n"
        }
        text += "\r\n"
        client.drainDeadline = EventLoop.now() + options.drainTimeout
        _ = client.connection.send(Array(text.utf8))
        if head { return client.connection.close() }
        let connection = client.connection
        let log = options.log
        let drain = options.drainTimeout
        let loop = self.loop
        var resumeQueued = false
        // At most `exportPiecesPerTurn` pieces a turn: a package of many small images (each a
        // 512-byte header that never fills the high water) must not hold the loop (found by
        // review); the rest follows on the next turns.
        func pump() {
            var pieces = 0
            do {
                while !connection.isClosed, connection.queuedBytes < Self.exportHighWater {
                    guard pieces < Self.exportPiecesPerTurn else {
                        if !resumeQueued {
                            resumeQueued = true
                            _ = loop.schedule(after: 0) { resumeQueued = false; pump() }
                        }
                        return
                    }
                    pieces += 1
                    guard let chunk = try source() else { return connection.close() }
                    if !chunk.isEmpty { _ = connection.send(chunk) }
                    client.drainDeadline = EventLoop.now() + drain
                }
            } catch {
                log("admin: export to \(connection.remote) stopped: \(error)")
                connection.close(immediately: true)
            }
        }
        connection.onWritable = { pump() }
        pump()
    }

    /// The files of a package for a tar (off the loop thread): the op log opened now, up to
    /// `opLogBytes` (its durable prefix, when the board is open), the rest opened in turn as the
    /// stream reaches them.
    static func tarStream(_ name: String, path: String, opLogBytes: Int?) throws -> TarStream {
        let top = "\(name).boardpkg".utf8.count <= 150 ? "\(name).boardpkg" : "board.boardpkg"
        var entries: [TarStream.Entry] = []
        func walk(_ relative: String, depth: Int) {
            let full = relative.isEmpty ? path : path + "/" + relative
            var info = stat()
            guard lstat(full, &info) == 0 else { return }
            if (info.st_mode & S_IFMT) == S_IFDIR {
                if !relative.isEmpty { entries.append(.directory(relative)) }
                guard depth < 8 else { return }
                for entry in ((try? FileManager.default.contentsOfDirectory(atPath: full)) ?? []).sorted()
                where !relative.isEmpty || entry == PackageLayout.sync {
                    walk(relative.isEmpty ? entry : relative + "/" + entry, depth: depth + 1)
                }
            } else if (info.st_mode & S_IFMT) == S_IFREG, !Self.exportSkipped.contains(relative) {
                entries.append(.file(relative))
            }
        }
        walk("", depth: 0)
        let log = open(path + "/" + PackageLayout.opLog, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard log >= 0 else { throw AdminError("board '\(name)': cannot open its op log: \(String(cString: strerror(errno)))") }
        return TarStream(top: top, root: path, entries: entries, opLog: (log, opLogBytes))
    }
}

/// Carries a rendering back to the loop thread (its fields are touched only there).
final class RenderBox: @unchecked Sendable {
    weak var server: AdminServer?
    weak var client: AdminServer.Client?

    init(server: AdminServer, client: AdminServer.Client) {
        self.server = server
        self.client = client
    }

    /// A tar's listing is done: stream it (its files are closed with the stream if the client left).
    func listed(_ result: Result<TarStream, any Error>, name: String, head: Bool) {
        guard let server else { return }
        server.exportsRunning -= 1  // the listing's place (streaming takes one of its own)
        client?.rendering = false
        guard let client, !client.connection.isClosed else { return }
        switch result {
        case .success(let stream):
            server.startStream(client, contentType: "application/x-tar", filename: "\(stream.top).tar", head: head, source: { try stream.next() })
        case .failure(let error):
            server.options.log("admin: exporting board '\(name)' failed: \(error)")
            server.finish(client, (try? AdminServer.json(500, ["error": "board '\(name)' cannot be exported: \(error)"])) ?? AdminServer.text(500, "\(error)\n"), head: head)
        }
    }

    func finished(_ result: Result<[UInt8], any Error>, format: String, name: String, head: Bool) {
        guard let server else { return }
        server.exportsRunning -= 1  // the render's place (streaming the result takes one of its own)
        server.rendersRunning -= 1
        client?.rendering = false
        guard let client, !client.connection.isClosed else { return }
        switch result {
        case .success(let bytes):
            var offset = 0
            server.startStream(client, contentType: ["png": "image/png", "pdf": "application/pdf"][format] ?? "image/svg+xml",
                               filename: "\(name).\(format)", head: head) {
                guard offset < bytes.count else { return nil }
                let end = min(bytes.count, offset + AdminServer.exportChunk)
                defer { offset = end }
                return Array(bytes[offset..<end])
            }
        case .failure(let error):
            server.options.log("admin: rendering board '\(name)' as \(format) failed: \(error)")
            server.finish(client, (try? AdminServer.json(422, ["error": "board '\(name)' cannot be rendered as \(format): \(error)"])) ?? AdminServer.text(422, "\(error)\n"), head: head)
        }
    }
}

/// A package as ustar pieces, cut as they are asked for; closes its files when done or dropped.
final class TarStream: @unchecked Sendable {  // made by the listing thread, then touched on the loop thread only
    enum Entry {
        case directory(String)
        case file(String)
    }

    let top: String
    private let root: String
    private var entries: [Entry]
    private var index = 0
    private var opLog: (fd: Int32, bytes: Int?)?
    private var current: (fd: Int32, left: Int, size: Int, name: String)?
    private var ended = false

    init(top: String, root: String, entries: [Entry], opLog: (Int32, Int?)) {
        self.top = top
        self.root = root
        self.entries = entries
        self.opLog = (opLog.0, opLog.1)
    }

    deinit {
        if let current { close(current.fd) }
        if let opLog { close(opLog.fd) }
    }

    /// The next piece (a header, up to 64 KiB of a file, its padding, the end), nil after the end.
    func next() throws -> [UInt8]? {
        if let file = current {
            let count = min(AdminServer.exportChunk, file.left)
            var buffer = [UInt8](repeating: 0, count: count)
            let read = buffer.withUnsafeMutableBytes { Glibc.read(file.fd, $0.baseAddress, count) }
            guard read > 0 else {
                throw AdminError("\(file.name) shrank while it was exported (\(read < 0 ? String(cString: strerror(errno)) : "end of file"))")
            }
            let left = file.left - read
            if left == 0 {
                if file.fd != opLog?.fd { close(file.fd) }
                current = nil
                return Array(buffer[0..<read]) + TarWriter.padding(after: file.size)
            }
            current = (file.fd, left, file.size, file.name)
            return Array(buffer[0..<read])
        }
        guard index < entries.count else {
            if ended { return nil }
            ended = true
            return TarWriter.end
        }
        let entry = entries[index]
        index += 1
        let now = Int(Date().timeIntervalSince1970)
        switch entry {
        case .directory(let relative):
            return TarWriter.header(name: "\(top)/\(relative)/", size: 0, kind: .directory, mode: 0o755, mtime: now) ?? []
        case .file(let relative):
            let fd: Int32
            var size: Int
            var info = stat()
            if relative == PackageLayout.opLog, let log = opLog {
                fd = log.fd
                guard fstat(fd, &info) == 0 else { throw AdminError("cannot read the op log") }
                size = min(log.bytes ?? Int(info.st_size), Int(info.st_size))
            } else {
                fd = open(root + "/" + relative, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
                // Gone since the listing (the board was deleted meanwhile): the tar stops short
                // rather than ending cleanly without it (the view files, which saves replace,
                // are not exported).
                guard fd >= 0 else { throw AdminError("\(relative) is gone since the export began (\(String(cString: strerror(errno))))") }
                guard fstat(fd, &info) == 0 else { close(fd); throw AdminError("cannot read \(relative)") }
                size = Int(info.st_size)
            }
            guard let header = TarWriter.header(name: "\(top)/\(relative)", size: size, kind: .file, mode: 0o644, mtime: Int(info.st_mtim.tv_sec)) else {
                if fd != opLog?.fd { close(fd) }
                throw AdminError("\(relative) cannot be written in a tar (name or size)")
            }
            if size == 0 {
                if fd != opLog?.fd { close(fd) }
                return header
            }
            current = (fd, size, size, relative)
            return header
        }
    }
}
