import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Dispatch
import Foundation
import Synchronization
import Testing

/// `GET /boards` reads the disk on a worker thread (`AdminServer+Listing.swift`): a listing
/// of many packages held in the middle of its reading does not stop the sync port, and
/// listings at once are bounded.
@Suite(.serialized) struct AdminListingTests {
    /// The first `holding` listings' workers, each held where it is about to read the disk
    /// until the test lets it go (later ones go through).
    final class Gate: Sendable {
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holding: Int
        let seen = Mutex(0)

        init(holding: Int) {
            self.holding = holding
        }

        var hold: @Sendable () -> Void {
            { [self] in
                guard seen.withLock({ count in count += 1; return count <= holding }) else { return }
                entered.signal()
                release.wait()
            }
        }
    }

    /// A response that arrives on another thread.
    final class Answer: Sendable {
        let value = Mutex<(status: Int, body: [UInt8])?>(nil)
    }

    static func makeBoards(_ data: String, count: Int) throws {
        for index in 0..<count {
            let package = try makePackage(data + "/board-\(String(format: "%03d", index)).boardpkg", id: UInt64(1000 + index))
            try package.commit { replica in
                let edit = try replica.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 1), width: 1, points: [pt(0, 0), pt(Double(index), 1)])
                replica.finishStroke()
                return edit
            }
            package.close()
        }
    }

    @Test func aListingOfManyBoardsDoesNotStopASyncClient() throws {
        let gate = Gate(holding: 1)
        var options = AdminServer.Options()
        options.listingWillRead = gate.hold
        let fixture = try AdminFixture(adminOptions: options)
        var released = false
        defer {
            if !released { gate.release.signal() }
            fixture.stop()
        }
        try Self.makeBoards(fixture.temp.path + "/data", count: 300)
        let admin = try fixture.token(.admin)
        // The listing, on a thread of its own: it waits for its answer.
        let listing = Answer()
        let answered = DispatchSemaphore(value: 0)
        let address = fixture.address
        Thread.detachNewThread {
            defer { answered.signal() }
            guard let client = try? WebClient(address) else { return }
            client.send(Array("GET /boards?limit=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(admin)\r\n\r\n".utf8))
            if let response = client.response(seconds: 120) { listing.value.withLock { $0 = (response.status, response.body) } }
        }
        #expect(gate.entered.wait(timeout: .now() + 60) == .success, "the listing reached its worker")
        // While the listing is held mid-way, a sync client is served: its stroke goes up and
        // is acknowledged (the loop would be stuck in the listing if it read the disk there).
        let temp = TempDirectory()
        var package = try makePackage(temp.path + "/team.boardpkg", id: 7)
        defer { package.close() }
        try package.commit { replica in
            let edit = try replica.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 2, points: [pt(1, 1), pt(9, 9)])
            replica.finishStroke()
            return edit
        }
        let report = try syncOnce(&package, board: "team", server: fixture.server.address, timeout: 30, token: fixture.token(.write))
        #expect(report.operationsAcknowledged >= 1, "\(report)")
        #expect(listing.value.withLock { $0 } == nil, "the listing had not answered: the sync came first")
        // Let the listing go: every board, in order, with its figures.
        gate.release.signal()
        released = true
        #expect(answered.wait(timeout: .now() + 120) == .success)
        let (status, body) = try #require(listing.value.withLock { $0 })
        #expect(status == 200, "\(String(decoding: body, as: UTF8.self))")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        let boards = try #require(object["boards"] as? [[String: Any]])
        #expect(boards.count == 301)
        #expect(boards.compactMap { $0["name"] as? String } == (0..<300).map { "board-\(String(format: "%03d", $0))" } + ["team"])
        #expect(object["next"] is NSNull)
        let team = try #require(boards.last)
        #expect(team["open"] as? Bool == true && team["counts"] as? String == "exact" && (team["operations"] as? Int ?? 0) >= 1, "\(team)")
        for board in boards.prefix(300) {
            #expect((board["bytesOnDisk"] as? Int ?? 0) > 0 && board["lastEdit"] is String && board["clients"] as? Int == 0, "\(board)")
        }
    }

    @Test func listingsAtOnceAreBoundedAndAClientThatLeftCostsNothing() throws {
        let gate = Gate(holding: 2)
        var options = AdminServer.Options()
        options.listingWillRead = gate.hold
        options.maxListings = 2
        let fixture = try AdminFixture(adminOptions: options)
        var held = 0
        defer {
            for _ in 0..<held { gate.release.signal() }
            fixture.stop()
        }
        try Self.makeBoards(fixture.temp.path + "/data", count: 3)
        let admin = try fixture.token(.admin)
        // Two listings held on their workers; their clients hang up.
        var clients: [WebClient] = []
        for _ in 0..<2 {
            let client = try WebClient(fixture.address)
            client.send(Array("GET /boards HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(admin)\r\n\r\n".utf8))
            clients.append(client)
            #expect(gate.entered.wait(timeout: .now() + 60) == .success)
            held += 1
        }
        let refused = try fixture.request("/boards", token: admin)
        #expect(refused.status == 503 && refused.body.contains("listings are running"), "\(refused)")
        clients.removeAll()  // closed
        // The workers finish for nobody; their places come back.
        gate.release.signal()
        gate.release.signal()
        held = 0
        var answer = (status: 0, body: "")
        for _ in 0..<100 {
            answer = try fixture.request("/boards", token: admin)
            if answer.status == 200 { break }
            usleep(50_000)
        }
        #expect(answer.status == 200 && answer.body.contains("board-002"), "\(answer)")
    }
}
