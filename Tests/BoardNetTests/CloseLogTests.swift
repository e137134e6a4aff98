import BoardCRDT
import BoardNet
import BoardSync
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What a server's log says when a connection ends, over real loopback TCP: a client that says
/// goodbye and closes with bytes unread (its kernel answers the server's reply with a reset)
/// ended in order; a reset in the middle of a session stays an error.
@Suite(.serialized) struct CloseLogTests {
    /// A raw client that has said HELLO and holds the server's answer unread in its socket.
    static func greetedClient(_ server: ServerFixture) throws -> Int32 {
        let fd = try #require(connectedSocket(server.address, receiveTimeout: timeval(tv_sec: 5, tv_usec: 0)))
        let hello = Message.hello(Hello(board: "team", replica: ReplicaID(0xC), version: .empty)).frame().encoded()
        #expect(hello.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == hello.count)
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&ready, 1, 5000) == 1, "the server answered the HELLO")
        usleep(50_000)  // the whole answer (HELLO, OPS, SYNCED) is in
        return fd
    }

    /// Holds the server's loop for a moment while `body` runs, so that what the client does
    /// (bytes, then the reset its close causes) is all there when the server looks.
    static func whileTheServerSleeps(_ server: ServerFixture, _ body: () -> Void) {
        let asleep = DispatchSemaphore(value: 0)
        server.thread.loop.execute {
            asleep.signal()
            usleep(300_000)
        }
        asleep.wait()
        body()
    }

    static func closeLine(_ log: LogLines, _ server: ServerFixture) throws -> String {
        #expect(try server.thread.wait(timeout: 10) { log.all.contains { $0.hasPrefix("connection ") && $0.contains(" closed") } }, "\(log.all)")
        return log.all.first { $0.hasPrefix("connection ") && $0.contains(" closed") } ?? ""
    }

    @Test func aResetAfterTheClientsGoodbyeIsAnOrdinaryClose() throws {
        let temp = TempDirectory()
        let log = LogLines()
        var options = SyncHost.Options()
        options.log = { log.append($0) }
        let server = try ServerFixture(data: temp.path + "/data", options: options)
        defer { server.stop() }
        let fd = try Self.greetedClient(server)
        Self.whileTheServerSleeps(server) {
            let bye = Message.bye.frame().encoded()
            _ = bye.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            close(fd)  // with the server's answer unread: a reset follows the BYE
        }
        let line = try Self.closeLine(log, server)
        #expect(line.hasSuffix(" closed"), "a goodbye, then a reset, is an ordinary end: \(line)")
        #expect(!log.all.contains { $0.contains("reset") || $0.contains("Broken pipe") }, "\(log.all)")
    }

    @Test func aResetInTheMiddleOfASessionStaysAnError() throws {
        let temp = TempDirectory()
        let log = LogLines()
        var options = SyncHost.Options()
        options.log = { log.append($0) }
        let server = try ServerFixture(data: temp.path + "/data", options: options)
        defer { server.stop() }
        let fd = try Self.greetedClient(server)
        Self.whileTheServerSleeps(server) { close(fd) }  // no goodbye: the client vanished
        let line = try Self.closeLine(log, server)
        #expect(line.contains("Connection reset by peer"), "\(line)")
    }
}
