import BoardClient
import BoardClientTesting
import Foundation
import Testing

@Suite struct FaultTransportTests {
    @Test func aPartitionRefusesConnectsWithAClearErrorAndCutsOpenOnes() async throws {
        let inner = TestTransport(.echo)
        let faults = FaultTransport(wrapping: inner, seed: 1)

        // An open connection is cut by the partition.
        let cut = try await faults.withConnection(to: "board-server") { connection in
            try await connection.send([1, 2, 3])
            #expect(try await connection.receive() == [1, 2, 3])
            #expect(faults.partition() == 1)
            return await thrown { _ = try await connection.receive() }
        }
        #expect((cut as? TransportError)?.description.contains("partitioned") == true, "\(String(describing: cut))")
        #expect(faults.isPartitioned)

        // While partitioned, a connect fails before the wrapped transport is asked.
        let refused = await thrown { try await faults.withConnection(to: "board-server") { _ in } }
        let error = try #require(refused as? TransportError, "\(String(describing: refused))")
        #expect(error.description == "FaultTransport: the network is partitioned: cannot connect to board-server")
        #expect(inner.connects == 1)

        faults.heal()
        #expect(!faults.isPartitioned)
        let echoed = try await faults.withConnection(to: "board-server") { connection in
            try await connection.send([4])
            return try await connection.receive()
        }
        #expect(echoed == [4])

        // partition(for:) heals on its own.
        faults.partition(for: 0.05)
        #expect(await thrown { try await faults.withConnection(to: "board-server") { _ in } } is TransportError)
        try await eventually("partition(for: 0.05) to heal", within: 20) { !faults.isPartitioned }
        try await faults.withConnection(to: "board-server") { _ in }

        var expected = FaultTransport.Counters()
        expected.connectionsMade = 3
        expected.connectionsKilled = 1
        expected.connectionsRefused = 2
        expected.chunksSent = 2
        expected.chunksReceived = 2
        #expect(faults.counters == expected)
        #expect(faults.openConnections == 0)
        #expect(inner.openConnections == 0)
    }

    @Test func killEndsALiveConnectionsReceiveAndSend() async throws {
        let inner = TestTransport(.echo)
        let faults = FaultTransport(wrapping: inner, seed: 2)
        let (received, sent) = try await faults.withConnection(to: "x") { connection in
            async let receiving = thrown { _ = try await connection.receive() }  // waits: nothing sent
            try await eventually("the connection to be open") { faults.openConnections == 1 }
            #expect(faults.killConnections() == 1)
            let received = await receiving
            let sent = await thrown { try await connection.send([9]) }
            return (received, sent)
        }
        #expect((received as? TransportError)?.description == "FaultTransport: the connection was killed")
        #expect(sent is TransportError)
        #expect(faults.counters.connectionsKilled == 1)
        #expect(faults.counters.drops == 0)
        #expect(faults.counters.chunksSent == 0)
        #expect(faults.openConnections == 0)
        #expect(inner.openConnections == 0)  // the wrapped connection closed with the body

        // Killing affects open connections only.
        let echoed = try await faults.withConnection(to: "x") { connection in
            try await connection.send([7])
            return try await connection.receive()
        }
        #expect(echoed == [7])
    }

    @Test func latencyAndJitterKeepEachDirectionInOrder() async throws {
        // Jitter (up to 20 ms a chunk) far beyond the time between sends: chunks delivered at
        // their own drawn times would overtake each other.
        let faults = FaultTransport(wrapping: TestTransport(.echo), seed: 3,
                                    faults: .init(latency: 0.001, jitter: 0.02))
        let chunks = (0..<60).map { index in [UInt8(index), UInt8(index), UInt8(index)] }
        let received = try await faults.withConnection(to: "x") { connection in
            for chunk in chunks { try await connection.send(chunk) }
            var received: [[UInt8]] = []
            while received.count < chunks.count, let chunk = try await connection.receive() { received.append(chunk) }
            return received
        }
        #expect(received == chunks)
        #expect(faults.counters.chunksSent == chunks.count)
        #expect(faults.counters.chunksReceived == chunks.count)
    }

    @Test func latencyDelaysBothDirections() async throws {
        // A lower bound only (a slow machine is slower, never faster).
        let faults = FaultTransport(wrapping: TestTransport(.echo), seed: 4, faults: .init(latency: 0.05))
        let clock = ContinuousClock()
        let start = clock.now
        let echoed = try await faults.withConnection(to: "x") { connection in
            try await connection.send([1])
            return try await connection.receive()
        }
        #expect(echoed == [1])
        #expect(clock.now - start >= .milliseconds(100))  // 50 ms out, 50 ms back
    }

    /// For each of `connections` connections in turn, the chunk at which sending failed (nil:
    /// every one of `chunks` went).
    static func killSchedule(seed: UInt64, faults knobs: FaultTransport.Faults, connections: Int = 12, chunks: Int = 40) async throws -> (schedule: [Int?], counters: FaultTransport.Counters) {
        let faults = FaultTransport(wrapping: TestTransport(.sink), seed: seed, faults: knobs)
        var schedule: [Int?] = []
        for _ in 0..<connections {
            schedule.append(try await faults.withConnection(to: "x") { connection in
                for index in 0..<chunks {
                    if await thrown({ try await connection.send([UInt8(truncatingIfNeeded: index)]) }) != nil { return index }
                }
                return nil
            })
        }
        return (schedule, faults.counters)
    }

    @Test func theSameSeedGivesTheSameFaults() async throws {
        let knobs = FaultTransport.Faults(dropProbability: 0.05)
        let first = try await Self.killSchedule(seed: 7, faults: knobs)
        let again = try await Self.killSchedule(seed: 7, faults: knobs)
        let other = try await Self.killSchedule(seed: 8, faults: knobs)
        // Latency and jitter draw from the same generators but do not move the drops.
        let delayed = try await Self.killSchedule(seed: 7, faults: .init(latency: 0.0005, jitter: 0.001, dropProbability: 0.05))
        print("FaultTransport kill schedule, seed 7:", first.schedule.map { $0.map(String.init) ?? "-" })
        #expect(first.schedule == again.schedule)
        #expect(first.schedule == delayed.schedule)
        #expect(first.schedule != other.schedule)
        let died = first.schedule.compactMap { $0 }.count
        #expect(died > 0)
        #expect(first.counters.drops == died)
        #expect(first.counters.connectionsKilled == died)
        #expect(first.counters.connectionsMade == 12)
        // None after the fatal chunk went through (those before it may be lost with the link).
        #expect(first.counters.chunksSent <= first.schedule.reduce(0) { $0 + ($1 ?? 40) })
        // No drops asked for, none made.
        let none = try await Self.killSchedule(seed: 7, faults: .init())
        #expect(none.schedule.allSatisfy { $0 == nil })
        #expect(none.counters.connectionsKilled == 0)
    }

    @Test func splitMix64IsReproducible() {
        var a = SplitMix64(seed: 99)
        var b = SplitMix64(seed: 99)
        let first = (0..<5).map { _ in a.next() }
        #expect(first == (0..<5).map { _ in b.next() })
        #expect(Set(first).count == 5)
        var unit = SplitMix64(seed: 1)
        #expect((0..<1000).allSatisfy { _ in (0..<1).contains(unit.nextUnit()) })
    }
}
