import BoardCRDT
import Foundation

// Named versions on the live board (docs/CLIENT.md, "Named versions"): a label names a version
// vector with a text. Labels are ordinary operations (one last-writer-wins register per label),
// so they are saved, sent and merged like any edit, reach every replica of the board, and
// never change what the board shows. They are not undo steps.
//
// ```swift
// let history = try await board.history()
// let id = try board.setLabel("Before the review", at: history.versions[3].vector)
// board.labels()                                   // [NamedVersion]: id, text, version, author, time
// try board.renameLabel(id, to: "Reviewed")
// try board.removeLabel(id)
// ```

extension LiveBoard {
    /// Every label on the board now (deleted ones left out), by id.
    public func labels() -> [NamedVersion] {
        replica.labels
    }

    /// Names `version` with `text` (at most `Label.maxTextBytes` bytes of UTF-8, no control
    /// characters; a version of at most `Label.maxVersionEntries` replicas), stamped with the
    /// board clock's wall time. Returns the new label's id. Throws `EditError` for a text or
    /// version out of bounds, or when the board holds `Label.maxLabelsPerBoard` labels.
    @discardableResult
    public func setLabel(_ text: String, at version: VersionVector) throws -> LabelID {
        let time = wallMilliseconds()
        let edit = try self.edit { try $0.setLabel(text: text, version: version, time: time) }
        guard case .setLabel(let id, _)? = edit.operations.first?.payload else {
            preconditionFailure("setLabel makes one label operation")
        }
        return id
    }

    /// Gives label `id` a new text (its version stays). Throws `EditError.unknownLabel` for a
    /// label this replica does not hold.
    public func renameLabel(_ id: LabelID, to text: String) throws {
        let time = wallMilliseconds()
        _ = try edit { try $0.renameLabel(id, to: text, time: time) }
    }

    /// Deletes label `id`. Throws `EditError.unknownLabel` for a label this replica does not hold.
    public func removeLabel(_ id: LabelID) throws {
        _ = try edit { try $0.removeLabel(id) }
    }

    private func wallMilliseconds() -> Int64 {
        let seconds = clock.wallClock().timeIntervalSince1970
        guard seconds.isFinite else { return 0 }
        return Int64(max(-9e15, min(9e15, seconds * 1000)))
    }
}
