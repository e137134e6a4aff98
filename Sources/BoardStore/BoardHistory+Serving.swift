import BoardCRDT
import BoardSync

// Answering a peer's history request (docs/PROTOCOL.md, "History on demand") from a history
// read off the owner's thread (`HistoryReading`). Pure: the caller reads the history and sends
// the answer. Work per answer is bounded by its bytes (`SessionLimits.maxHistoryAnswer`, or less
// when the asker asks for less) plus, for `records`, one view (`replica(at:)`, from a checkpoint).
extension BoardHistory {
    /// The operations version `number` brought beyond version `number - 1`, in history order.
    public func operations(ofVersion number: Int) -> [Op] {
        guard let version = version(number) else { return [] }
        return operations(from: 0, coveredBy: version.vector, beyond: number > 1 ? versions[number - 2].vector : nil)
    }

    /// The answer to `request` from this history, at most `limits.maxHistoryAnswer` (and
    /// `request.maxBytes`) bytes of entries, always at least one entry when the range holds one
    /// and it fits a frame (so paging always advances), a records answer's full state apart.
    public func answer(_ request: HistoryRequest, limits: SessionLimits) -> HistoryAnswer {
        let total = UInt64(versions.count)
        let budget = max(0, min(Int(clamping: request.maxBytes), limits.maxHistoryAnswer))
        let frameRoom = limits.maxFrame - 4096
        var answer = HistoryAnswer(id: request.id, what: request.what, total: total, first: total == 0 ? 0 : 1)
        if total == 0, request.what == .versions { return answer }  // no versions yet: an empty list, not a refusal
        let lowest: UInt64 = request.what == .versions ? 1 : 0
        guard request.from >= lowest, request.from <= total else {
            return .refusal(request, .outOfRange, "version \(request.from) is not in this history (versions 1 to \(total))")
        }
        let to = min(request.to, total)
        var used = 0
        switch request.what {
        case .versions:
            var number = request.from
            while number <= to {
                let version = versions[Int(number) - 1]
                let info = HistoryVersionInfo(number: number, time: version.time, operationCount: UInt64(version.operationCount),
                                              authors: version.authors, vector: version.vector)
                let size = HistoryAnswer.encodedSize(of: info)
                if !answer.versions.isEmpty, used + size > budget { break }
                if used + size > frameRoom { break }
                answer.versions.append(info)
                used += size
                number += 1
            }
            answer.next = number <= to ? number : 0
        case .records, .operations:
            if request.what == .records {
                let state = request.from == 0 ? OperationBatch(operations: [], base: .empty, covers: .empty)
                    : replica(at: versions[Int(request.from) - 1].vector).fullState()
                let bytes = state.encoded(format: OperationBatch.formatVersion)
                guard bytes.count <= frameRoom else {
                    return .refusal(request, .tooLarge, "the board at version \(request.from) takes \(bytes.count) bytes, over a frame")
                }
                answer.records.append(HistoryRecord(number: request.from, time: request.from == 0 ? nil : versions[Int(request.from) - 1].time, batch: bytes))
            }
            var number = request.from + 1
            var room = frameRoom - (answer.records.first?.batch.count ?? 0)
            while number <= to {
                let index = Int(number) - 1
                let base = index > 0 ? versions[index - 1].vector : VersionVector.empty
                let batch = OperationBatch(operations: operations(ofVersion: Int(number)), base: base, covers: versions[index].vector)
                let bytes = batch.encoded(format: OperationBatch.formatVersion)
                let first = number == request.from + 1
                if !first, used + bytes.count > budget { break }
                if bytes.count + 64 > room {
                    if first, request.what == .operations {
                        return .refusal(request, .tooLarge, "version \(number)'s operations take \(bytes.count) bytes, over a frame; ask for `records` from version \(number) instead")
                    }
                    break
                }
                answer.records.append(HistoryRecord(number: number, time: versions[index].time, batch: bytes))
                used += bytes.count
                room -= bytes.count + 64
                number += 1
            }
            answer.next = number <= to ? number - 1 : 0
        }
        return answer
    }
}
