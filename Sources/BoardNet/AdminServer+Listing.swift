import BoardStore
import BoardSync
import Dispatch
import Foundation

/// `GET /boards`: a page of boards. What is read from the disk (the directory, each package's
/// tree for its size, its op log's length and time, its last saved view's counts) is read on a
/// worker thread, `Options.maxListings` listings at most at once (beyond, 503), so a listing of
/// a thousand packages never holds the loop that serves every board's clients; the open
/// boards' exact counts are added on the loop thread when the figures are back.
extension AdminServer {
    func listBoards(_ query: [String: String], client: Client, head: Bool) throws {
        for key in query.keys where !["limit", "after"].contains(key) {
            throw AdminError("unknown parameter '\(Self.clipped(key))' (GET /boards takes limit and after)", status: 400)
        }
        var limit = Self.defaultPage
        if let text = query["limit"] {
            guard let number = Int(text), (1...Self.maxPage).contains(number) else {
                throw AdminError("limit '\(Self.clipped(text))' must be a whole number from 1 to \(Self.maxPage)", status: 400)
            }
            limit = number
        }
        let after = try query["after"].map { text -> String in
            guard Hello.isValidBoardName(text) else {
                throw AdminError("after '\(Self.clipped(text))' is not a board name (pass the previous page's `next`)", status: 400)
            }
            return text
        }
        guard listingsRunning < options.maxListings else {
            throw AdminError("\(listingsRunning) listings are running, the limit (retry when one is done)", status: 503)
        }
        listingsRunning += 1  // given back by `ListingBox.finished` whatever became of the client
        client.rendering = true  // no request timeout while the worker reads
        let box = ListingBox(server: self, client: client)
        let data = dataDirectory
        let loop = self.loop
        let hold = options.listingWillRead
        let pageSize = limit
        DispatchQueue.global().async {
            hold?()
            let result = Result { () throws -> ListingPage in
                let names = try Self.boardNamesOnDisk(data).filter { after == nil || $0 > after! }
                let page = Array(names.prefix(pageSize))
                return ListingPage(figures: page.map { PackageFigures.read(data, $0) }, next: names.count > pageSize ? page.last : nil)
            }
            loop.execute { box.finished(result, head: head) }
        }
    }

    /// Every board with a package in the data directory and no tombstone file, sorted by name
    /// (byte order: names are ASCII). Any thread.
    static func boardNamesOnDisk(_ dataDirectory: String) throws -> [String] {
        let entries: [String]
        do { entries = try FileManager.default.contentsOfDirectory(atPath: dataDirectory) } catch {
            throw AdminError("cannot list the data directory: \(error)")
        }
        return entries.compactMap { entry -> String? in
            guard entry.hasSuffix(".boardpkg") else { return nil }
            let name = String(entry.dropLast(".boardpkg".count))
            guard Hello.isValidBoardName(name), BoardTombstones.deletedAt(dataDirectory, name) == nil else { return nil }
            return name
        }.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    /// One board's fields: open boards' counts from memory (exact), closed boards' from the
    /// view index of their last save (`sync/view.json`), sizes and the last edit from the files
    /// (`figures`, read beforehand). Loop thread.
    func summary(_ figures: PackageFigures) -> [String: Any] {
        var result: [String: Any] = ["name": figures.name, "bytesOnDisk": figures.bytes, "files": figures.files]
        result["opLogBytes"] = figures.opLogBytes ?? NSNull()
        result["lastEdit"] = figures.lastEdit.map(Self.iso) ?? NSNull()
        if let board = host.boards[figures.name] {
            let vector = board.store.replica.versionVector
            result["open"] = true
            result["operations"] = Int(clamping: vector.totalCount)
            result["replicas"] = vector.sortedEntries.count
            result["counts"] = "exact"
            result["clients"] = board.hub.sessionCount
        } else {
            result["open"] = false
            result["clients"] = 0
            if let version = figures.saved {
                result["operations"] = version.values.reduce(0, +)
                result["replicas"] = version.count
                result["counts"] = "lastSave"
            } else {
                result["operations"] = NSNull()
                result["replicas"] = NSNull()
                result["counts"] = "unknown"
            }
        }
        return result
    }
}

/// A page of `GET /boards` as the worker read it.
struct ListingPage: Sendable {
    let figures: [PackageFigures]
    let next: String?
}

/// What a package's files say (any thread): bytes and files under it, its op log's length and
/// time, the version of its last saved view.
struct PackageFigures: Sendable {
    let name: String
    let bytes: Int
    let files: Int
    let opLogBytes: Int?
    let lastEdit: Double?
    let saved: [String: Int]?

    static func read(_ dataDirectory: String, _ name: String) -> PackageFigures {
        let path = "\(dataDirectory)/\(name).boardpkg"
        let (bytes, files) = AdminServer.treeSize(path)
        var info = stat()
        let hasLog = lstat(path + "/" + PackageLayout.opLog, &info) == 0
        return PackageFigures(name: name, bytes: bytes, files: files, opLogBytes: hasLog ? Int(info.st_size) : nil,
                              lastEdit: hasLog ? Double(info.st_mtim.tv_sec) : nil, saved: AdminServer.savedVersion(path))
    }
}

/// A listing's way back to the loop thread (the server and client may be gone by then).
final class ListingBox: @unchecked Sendable {  // touched on the loop thread only, after the worker
    weak var server: AdminServer?
    weak var client: AdminServer.Client?

    init(server: AdminServer, client: AdminServer.Client) {
        self.server = server
        self.client = client
    }

    func finished(_ result: Result<ListingPage, any Error>, head: Bool) {
        guard let server else { return }
        server.listingsRunning -= 1
        guard let client, !client.answered, !client.connection.isClosed else { return }
        client.rendering = false
        let response: HTTPResponse
        do {
            let page = try result.get()
            var object: [String: Any] = ["boards": page.figures.map { server.summary($0) }]
            object["next"] = page.next ?? NSNull()
            response = try AdminServer.json(200, object)
        } catch let error as AdminError {
            server.options.log("admin: GET /boards failed: \(error)")
            response = (try? AdminServer.json(error.status, ["error": error.description])) ?? AdminServer.text(error.status, error.description + "\n")
        } catch {
            server.options.log("admin: GET /boards failed: \(error)")
            response = AdminServer.text(500, "\(error)\n")
        }
        server.finish(client, response, head: head)
    }
}
