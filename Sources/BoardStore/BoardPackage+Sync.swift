import BoardCRDT
import BoardSync

// A board package is the sync layer's durable store (`ReplicaStore`, `HostedStore`): merges
// go to its op log, local edits through `commit`, the view through `save`.

extension BoardPackage: ReplicaStore {}

extension BoardPackage: HostedStore {
    public func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        try commit(body)
    }

    public func saveView() throws {
        try save()
    }

    public func drafting<T>(_ body: (inout Replica) throws -> T) throws -> T {
        try requireOpen()
        return try body(&replica)
    }

    public func closeStore() {
        close()
    }

    public func beginViewSave() throws -> ViewSaveJob? {
        let write = try prepareViewWrite()
        return ViewSaveJob(work: write) { try write.run() }
    }

    public func endViewSave(_ job: ViewSaveJob, error: (any Error)?) throws {
        guard let write = job.work as? ViewWrite else { return }
        try finishViewWrite(write, error: error)
    }
}

extension StoreError: PeerSafeError {
    public var isStorageTrouble: Bool {
        switch code {
        case .locked, .writeFailed: return true
        default: return false
        }
    }
}

extension SyncEndpoint.Board {
    /// The board's package, when it is kept in one.
    public var package: BoardPackage? { store as? BoardPackage }
}
