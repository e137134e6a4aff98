import BoardModel
import BoardStore
@_spi(Mutations) import BoardCRDT
@_spi(Mutations) import BoardSync

// What history tests reach into a run for (Tests/BoardStoreTests/HistoryOracleTests.swift): each
// host's package and disk, and the virtual clock, from `interludes` and after `run()`.
extension World {
    /// Hosts in plan order: the peers, then the server (`plan.server`).
    public var hostCount: Int { hosts.count }

    public func hostName(_ index: Int) -> String { hosts[index].name }

    /// The virtual clock, in seconds.
    public var virtualTime: Double { now }

    /// The package a host serves now: nil while it is down (or the server has not opened the
    /// board, or a mutation wraps it).
    public func package(ofHost index: Int) -> BoardPackage? {
        let host = hosts[index]
        guard host.endpoint != nil else { return nil }
        if index == plan.server { return host.endpoint?.boards[board]?.store as? BoardPackage }
        return host.package
    }

    /// A host's simulated disk and where its package lies on it (the package may be down).
    public func disk(ofHost index: Int) -> (fileSystem: MemoryFileSystem, path: String) {
        (hosts[index].fs, index == plan.server ? "/data/\(board).boardpkg" : "/p/board.boardpkg")
    }
}
