import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Testing

/// A history's answers to peers' history requests (`BoardHistory.answer`, docs/PROTOCOL.md
/// "History on demand"): pages of any size list every version once and in order; a records
/// range, fetched in pages and replayed by the asker (validated as a peer's operations), shows
/// every version of the range as the history itself does; requests outside the history are
/// refused; every answer keeps to its byte bound.
@Suite struct HistoryServingTests {
    @Test(arguments: 1...8 as ClosedRange<UInt64>)
    func pagedVersionsAndRecordsShowEveryVersionAsTheHistoryDoes(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        let (package, _, _) = try HistoryTests.randomHistory(seed: seed, steps: 120, fs: fs)
        defer { package.close() }
        let history = try package.history()
        let total = UInt64(history.versions.count)
        #expect(total > 3, "seed \(seed)")
        var limits = SessionLimits()
        limits.maxHistoryAnswer = 300 + Int(seed) * 97  // pages of a few versions each

        // Versions, page by page.
        var listed: [HistoryVersionInfo] = []
        var from: UInt64 = 1
        var pages = 0
        while true {
            let answer = history.answer(HistoryRequest(id: UInt64(pages), what: .versions, from: from, to: .max >> 30, maxBytes: .max), limits: limits)
            #expect(answer.status == .ok && answer.total == total, "seed \(seed)")
            #expect(!answer.versions.isEmpty)
            let bytes = answer.versions.reduce(0) { $0 + HistoryAnswer.encodedSize(of: $1) }
            #expect(answer.versions.count == 1 || bytes <= limits.maxHistoryAnswer, "seed \(seed): a page of \(bytes) bytes")
            listed += answer.versions
            pages += 1
            if answer.next == 0 { break }
            from = answer.next
        }
        #expect(pages > 1, "seed \(seed): several pages")
        #expect(listed.map(\.number) == Array(1...total), "seed \(seed)")
        #expect(listed.map(\.vector) == history.versions.map(\.vector))
        #expect(listed.map(\.time) == history.versions.map(\.time))

        // Records from a version in the middle to the end, in pages; each version replayed.
        let start = total / 3
        var answer = history.answer(HistoryRequest(id: 100, what: .records, from: start, to: total, maxBytes: .max), limits: limits)
        #expect(answer.status == .ok, "seed \(seed): \(answer.message)")
        var replica = Replica(id: ReplicaID(0))
        var shown: UInt64 = start
        func replay(_ records: ArraySlice<HistoryRecord>) throws {
            for record in records {
                #expect(record.number == shown + 1, "seed \(seed)")
                try replica.apply(try OperationBatch(decoding: record.batch))
                shown = record.number
                let expected = history.replica(at: history.versions[Int(shown) - 1].vector)
                #expect(try HistoryTests.same(replica.snapshot(), expected.snapshot()), "seed \(seed): version \(shown)")
            }
        }
        guard let state = answer.records.first, state.number == start else { Issue.record("no state"); return }
        try replica.apply(try OperationBatch(decoding: state.batch))
        if start > 0 {
            #expect(try HistoryTests.same(replica.snapshot(), history.replica(at: history.versions[Int(start) - 1].vector).snapshot()), "seed \(seed)")
        }
        try replay(answer.records.dropFirst())
        while answer.next != 0 {
            answer = history.answer(HistoryRequest(id: 101, what: .operations, from: answer.next, to: total, maxBytes: .max), limits: limits)
            #expect(answer.status == .ok && answer.records.first?.number == shown + 1, "seed \(seed)")
            try replay(answer.records[...])
        }
        #expect(shown == total, "seed \(seed)")
    }

    @Test func requestsOutsideTheHistoryAreRefused() throws {
        let fs = MemoryFileSystem()
        let (package, _, _) = try HistoryTests.randomHistory(seed: 3, steps: 40, fs: fs)
        defer { package.close() }
        let history = try package.history()
        let total = UInt64(history.versions.count)
        let limits = SessionLimits()
        #expect(history.answer(HistoryRequest(id: 1, what: .versions, from: total + 1, to: total + 5), limits: limits).status == .outOfRange)
        #expect(history.answer(HistoryRequest(id: 1, what: .records, from: total + 1, to: total + 1), limits: limits).status == .outOfRange)
        // `to` beyond the end is cut to the end; 0 is the empty board.
        let empty = history.answer(HistoryRequest(id: 1, what: .records, from: 0, to: 0), limits: limits)
        #expect(empty.status == .ok && empty.records.count == 1 && empty.next == 0)
        var replica = Replica(id: ReplicaID(0))
        try replica.apply(try OperationBatch(decoding: empty.records[0].batch))
        #expect(replica.snapshot().strokes.isEmpty && replica.snapshot().stickers.isEmpty)
        // A client asking for nothing still gets one version: paging always advances.
        let one = history.answer(HistoryRequest(id: 1, what: .versions, from: 1, to: total, maxBytes: 0), limits: limits)
        #expect(one.versions.count == 1 && one.next == 2)
    }

    @Test func anEmptyHistoryListsNoVersionsAndShowsTheEmptyBoard() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectories("/e")
        let package = try BoardPackage.create(at: "/e/empty.boardpkg", fileSystem: fs, replicaID: ReplicaID(0xE))
        defer { package.close() }
        let history = try package.history()
        let limits = SessionLimits()
        let listed = history.answer(HistoryRequest(id: 1, what: .versions, from: 1, to: 10), limits: limits)
        #expect(listed.status == .ok && listed.total == 0 && listed.versions.isEmpty && listed.next == 0)
        let board = history.answer(HistoryRequest(id: 2, what: .records, from: 0, to: 0), limits: limits)
        #expect(board.status == .ok && board.records.count == 1)
        #expect(history.answer(HistoryRequest(id: 3, what: .records, from: 1, to: 1), limits: limits).status == .outOfRange)
    }
}
