import BoardCRDT
import BoardRedis
import BoardSync
import Foundation
import Testing

/// A Redis that cannot serve (unreachable, asking for a password, refusing it): sans-IO against
/// a scripted Redis. Sessions that say HELLO are told what the server waits for at once
/// (`storageUnavailable`), token holders with the reason and others without it; the log says it
/// once per change, not per retry or client; and when Redis is back, HELLOs are greeted again.
@Suite struct StorageTroubleTests {
    typealias Script = RedisBoardLogTests.Script

    final class Lines: @unchecked Sendable {  // one thread: the test's
        var all: [String] = []
    }

    static func log(_ lines: Lines) -> RedisBoardLog {
        var options = RedisBoardLog.Options(node: "n1")
        options.redisName = "Redis at 10.9.8.7:6379"
        options.log = { lines.all.append($0) }
        return RedisBoardLog(options: options)
    }

    /// The ERROR a session's output holds, if any.
    static func error(_ hub: BoardHub, _ id: SessionID) throws -> (code: UInt16, message: String)? {
        var decoder = FrameDecoder(maxFrame: 1 << 20)
        decoder.append(hub.output(for: id, now: 0))
        while let frame = try decoder.next() {
            if case .error(let code, let message) = try Message(frame: frame, limits: SessionLimits()) { return (code, message) }
        }
        return nil
    }

    @Test func anUnreachableRedisTurnsHellosAwayWithTheReasonAndTakesThemBackOnceItAnswers() throws {
        let (hub, _) = try RedisBoardLogTests.hubWithSession()
        let lines = Lines()
        let log = Self.log(lines)
        let redis = Script(log: log)
        log.attach("team", hub: hub, now: 0)
        // A HELLO while the links are still connecting waits, as before (a few milliseconds).
        RedisBoardLogTests.connect(hub, 1)
        #expect(hub.session(1)?.isClosed == false)
        // The driver cannot connect: every link, again and again.
        for attempt in 0..<3 {
            for link in RedisBoardLog.Link.allCases { log.connectFailed(link, because: "refused the connection", now: Double(attempt)) }
        }
        #expect(log.storageTrouble == "Redis at 10.9.8.7:6379 refused the connection")
        #expect(lines.all.filter { $0.contains("storage unavailable") } == [
            "storage unavailable: Redis at 10.9.8.7:6379 refused the connection (is redis-server running there?); clients are told to retry later until it is back",
        ], "once, not once per link or attempt: \(lines.all)")
        // The held session is told, without the reason (it presented no token).
        let held = try #require(try Self.error(hub, 1))
        #expect(held.code == SessionError.Code.storageUnavailable.rawValue)
        #expect(held.message == "the server is waiting for its storage; retry later (the server's log says why)")
        // A session with a token hears why; one without does not learn the address.
        try RedisBoardLogTests.attachWriter(hub, 2, replica: 0xC, subject: "alice")
        let told = try #require(try Self.error(hub, 2))
        #expect(told.code == SessionError.Code.storageUnavailable.rawValue)
        #expect(told.message == "the server is waiting for its storage: Redis at 10.9.8.7:6379 refused the connection; retry later")
        RedisBoardLogTests.connect(hub, 3)
        #expect(try Self.error(hub, 3)?.message.contains("10.9.8.7") == false)
        #expect(hub.storageRefusals == 3)
        // Redis is back: no more refusals; a HELLO waits for the catch-up and is then greeted.
        for link in RedisBoardLog.Link.allCases { log.linkUp(link, now: 5) }
        _ = try redis.commands(.tail)
        try redis.reply(.tail, [.integer(5)], now: 5)
        #expect(log.storageTrouble == nil)
        #expect(lines.all.last == "storage available again: Redis at 10.9.8.7:6379 answers", "\(lines.all)")
        RedisBoardLogTests.connect(hub, 4)
        #expect(hub.session(4)?.isClosed == false && hub.session(4)?.isOpen == false, "held for the catch-up")
        try RedisBoardLogTests.catchUpEmpty(redis)
        #expect(hub.session(4)?.isOpen == true)
        #expect(hub.storageRefusals == 3)
    }

    @Test func aRedisAskingForAPasswordIsNamedOnceAndItsRetriesAreQuiet() throws {
        let (hub, _) = try RedisBoardLogTests.hubWithSession()
        let lines = Lines()
        let log = Self.log(lines)
        let redis = Script(log: log)
        for link in RedisBoardLog.Link.allCases { log.linkUp(link, now: 0) }
        log.attach("team", hub: hub, now: 0)
        // Every command is refused for want of a password; the catch-up retries it.
        for round in 0..<4 {
            for link in [RedisBoardLog.Link.commands, .tail] {
                let count = try redis.commands(link).count
                try redis.reply(link, Array(repeating: .error("NOAUTH Authentication required."), count: count), now: Double(round))
            }
            _ = log.handleTimers(now: Double(round) + 0.5)
        }
        #expect(log.storageTrouble == "Redis at 10.9.8.7:6379 asks for a password (NOAUTH)")
        #expect(lines.all.filter { $0.contains("NOAUTH") }.count == 1, "one line, not one per retry: \(lines.all)")
        try RedisBoardLogTests.attachWriter(hub, 1, replica: 0xC, subject: "alice")
        #expect(try Self.error(hub, 1)?.message == "the server is waiting for its storage: Redis at 10.9.8.7:6379 asks for a password (NOAUTH); retry later")
        // A command that works again ends it (the operator fixed Redis's configuration).
        _ = try redis.commands(.commands)
        try redis.reply(.commands, [.array([])], now: 9)
        #expect(log.storageTrouble == nil)
    }

    @Test func aRefusedPasswordIsTheTroubleAndNeverQuoted() throws {
        let (hub, _) = try RedisBoardLogTests.hubWithSession()
        let lines = Lines()
        var options = RedisBoardLog.Options(node: "n1")
        options.password = "hunter2-secret"
        options.log = { lines.all.append($0) }
        let log = RedisBoardLog(options: options)
        let redis = Script(log: log)
        log.linkUp(.commands, now: 0)
        log.attach("team", hub: hub, now: 0)
        #expect(try redis.commands(.commands).first == ["AUTH", "hunter2-secret"])
        try redis.reply(.commands, [.error("WRONGPASS invalid username-password pair or user is disabled."),
                                    .error("NOAUTH Authentication required.")], now: 0)
        #expect(log.storageTrouble == "Redis refused this server's password (WRONGPASS)", "the password's refusal, not the NOAUTH after it")
        try RedisBoardLogTests.attachWriter(hub, 1, replica: 0xC, subject: "alice")
        let told = try #require(try Self.error(hub, 1))
        #expect(!told.message.contains("hunter2"))
        #expect(!lines.all.joined().contains("hunter2"), "\(lines.all)")
        // An AUTH that a Redis without a password shrugs off is no trouble: its commands run.
        let (other, _) = try RedisBoardLogTests.hubWithSession()
        let relaxed = RedisBoardLog(options: options)
        let script = Script(log: relaxed)
        relaxed.linkUp(.commands, now: 0)
        relaxed.attach("team", hub: other, now: 0)
        _ = try script.commands(.commands)
        try script.reply(.commands, [.error("ERR AUTH <password> called without any password configured for the default user."),
                                     .array([])], now: 0)
        #expect(relaxed.storageTrouble == nil)
    }

    @Test func aLinkThatStopsAnsweringIsTheTroubleUntilItAnswersAgain() throws {
        let (hub, _) = try RedisBoardLogTests.hubWithSession()
        let lines = Lines()
        let log = Self.log(lines)
        let redis = Script(log: log)
        log.linkUp(.commands, now: 0)
        log.attach("team", hub: hub, now: 0)
        _ = try redis.commands(.commands)
        #expect(log.handleTimers(now: 11) == [.commands], "no reply in the reply timeout")
        #expect(log.storageTrouble == "Redis at 10.9.8.7:6379 does not answer")
        // The driver drops and redials it; connected, with the catch-up's read sent again, it
        // is still in trouble until Redis answers that read.
        log.linkDown(.commands, now: 11, reason: "no reply in time")
        log.linkUp(.commands, now: 11.1)
        #expect(try redis.commands(.commands) == [["HGETALL", "bs:{team}:ckpt"]])
        #expect(log.storageTrouble != nil)
        try redis.reply(.commands, [.array([])], now: 11.2)
        #expect(log.storageTrouble == nil)
    }
}
