import BoardCRDT
import BoardNet
import BoardStore
import BoardSync
import Foundation
import Testing

/// A server's package store as its storage, over real loopback TCP.
@Suite struct StorageRefusalTests {
    /// The package store as the server's storage: a board another process holds is the
    /// storage's trouble, told to the client as a retryable `storage unavailable` with the
    /// reason (no path), and logged once however many clients ask.
    @Test func aBoardAnotherProcessHoldsIsStorageTroubleLoggedOnce() throws {
        let temp = TempDirectory()
        let data = temp.path + "/data"
        let log = LogLines()
        var options = SyncHost.Options()
        options.log = { log.append($0) }
        let server = try ServerFixture(data: data, options: options)
        defer { server.stop() }
        let other = try makePackage(data + "/held.boardpkg", id: 0xE)
        defer { other.close() }
        var client = try makePackage(temp.path + "/C.boardpkg", id: 0xC)
        defer { client.close() }
        for _ in 0..<3 {
            let failure = syncOnceError("a sync of a board another process holds") {
                try syncOnce(&client, board: "held", server: server.address, timeout: 10)
            }
            guard let failure, case .refused(let refusal) = failure else { Issue.record("\(String(describing: failure))"); continue }
            #expect(refusal.code == .storageUnavailable && refusal.isRetryable && failure.isRetryable, "\(failure)")
            #expect("\(failure)".hasPrefix("the server refused: storage unavailable (code 23): board 'held' cannot be opened here: the board's package is open in another process"), "\(failure)")
            #expect(!"\(failure)".contains(data))
        }
        #expect(log.all.filter { $0.contains("cannot open") }.count == 1, "\(log.all)")
    }
}
