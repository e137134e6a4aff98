// swift-tools-version: 6.0
import PackageDescription

// BoardSync takes no package dependencies: every target below is ours.
// Layering (docs/ARCHITECTURE.md): each module imports only those above it in this list.
let package = Package(
    name: "BoardSync",
    products: [
        .executable(name: "board-sync", targets: ["board-sync"]),
        .executable(name: "board-sim", targets: ["board-sim"]),
        .library(name: "BoardModel", targets: ["BoardModel"]),
        .library(name: "BoardCRDT", targets: ["BoardCRDT"]),
        .library(name: "BoardStore", targets: ["BoardStore"]),
        .library(name: "BoardSync", targets: ["BoardSync"]),
        .library(name: "BoardNet", targets: ["BoardNet"]),
        .library(name: "BoardSimulation", targets: ["BoardSimulation"]),
        .library(name: "BoardRender", targets: ["BoardRender"]),
        .library(name: "BoardRedis", targets: ["BoardRedis"]),
        .library(name: "BoardRedisNet", targets: ["BoardRedisNet"]),
        .library(name: "BoardClient", targets: ["BoardClient"]),
        .library(name: "BoardClientTesting", targets: ["BoardClientTesting"]),
    ],
    targets: [
        // Values, canonical encoding, content hashes. Pure: no OS access.
        .target(name: "BoardModel"),
        // The system zlib (zlib1g-dev) for PNG and PDF compression, with a header wrapping its macros.
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // Exports a person can look at (PNG, PDF, SVG) from a snapshot alone, and the PNG decoder
        // they need. No OS access (zlib is computation only).
        .target(name: "BoardRender", dependencies: ["BoardModel", "CZlib"]),
        // Replica, operations, merge, undo, binary codec. Pure and deterministic (sans-IO).
        .target(name: "BoardCRDT", dependencies: ["BoardModel"]),
        // Wire format, the sans-IO sync session, hubs and the endpoint that routes connections to
        // boards. No sockets, clocks or files: storage only through the store seam
        // (ReplicaStore.swift), which board packages implement.
        .target(name: "BoardSync", dependencies: ["BoardModel", "BoardCRDT"]),
        // Board packages on disk: the incremental writer, the durable op log, the file-system seam,
        // and the sync layer's store over them.
        .target(name: "BoardStore", dependencies: ["BoardModel", "BoardCRDT", "BoardSync"]),

        // POSIX TCP: epoll event loop, connections (plain or TLS), the sync server and peer hosts.
        .target(name: "CBoardNet"),
        // The system OpenSSL (libssl-dev) for TLS, with a header wrapping its macros.
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl",
                       providers: [.apt(["libssl-dev"])]),
        .target(name: "BoardNet", dependencies: ["CBoardNet", "COpenSSL", "BoardModel", "BoardCRDT", "BoardStore", "BoardSync"]),
        // The scale-out layer (docs/SCALE-OUT.md): RESP and a pipelined Redis client, the board
        // log over Redis streams and the shared revocations, all sans-IO (no sockets, no clock).
        .target(name: "BoardRedis", dependencies: ["BoardModel", "BoardCRDT", "BoardSync"]),
        // Their driver over BoardNet's TCP: `RedisCluster` (and the revocations' link) on a
        // `SyncHost`'s event loop.
        .target(name: "BoardRedisNet", dependencies: ["BoardSync", "BoardNet", "BoardRedis"]),
        // The live client an app embeds (docs/CLIENT.md): LiveBoard, its transports, streams; and
        // LiveBoardModel, the observable model for apps and the seed-shaped document model, whose
        // writer renders exports.
        .target(name: "BoardClient", dependencies: ["BoardModel", "BoardCRDT", "BoardStore", "BoardSync", "BoardNet", "BoardRender"]),
        // For apps' tests of the live client (docs/CLIENT.md, "Testing your conflict handling"):
        // FaultTransport wraps any BoardTransport with seeded latency, link drops and partitions;
        // TestClock and SeededJitter put boards, servers and transports on virtual time.
        .target(name: "BoardClientTesting", dependencies: ["BoardClient"]),
        // The live client's example (README, Using the library).
        .executableTarget(name: "LiveBoardExample", dependencies: ["BoardClient", "BoardCRDT", "BoardModel"], path: "Examples/LiveBoardExample"),
        // The command-line tool, wrapped by bin/board-sync (its demo cuts carol's network with
        // BoardClientTesting's FaultTransport).
        .executableTarget(name: "board-sync", dependencies: ["BoardModel", "BoardCRDT", "BoardStore", "BoardSync", "BoardNet", "BoardRedis", "BoardRedisNet", "BoardSimulation", "BoardRender", "BoardClient", "BoardClientTesting"]),
        // Seeded randomness and history generation that drives the real replica code.
        .target(
            name: "BoardSimulation",
            dependencies: ["BoardModel", "BoardCRDT", "BoardStore", "BoardSync", "BoardRender", "BoardRedis"],
            path: "Simulations/Sources/BoardSimulation"
        ),
        // The network simulator's command line (bin/board-sim).
        .executableTarget(
            name: "board-sim",
            dependencies: ["BoardSimulation", "BoardRender"],
            path: "Simulations/Sources/board-sim"
        ),
        // Benchmarks: run through bin/bench in release builds; never timed assertions in tests.
        .executableTarget(
            name: "board-bench",
            dependencies: ["BoardModel", "BoardCRDT", "BoardStore", "BoardSync", "BoardNet", "BoardSimulation", "BoardRender", "BoardRedis", "BoardRedisNet", "BoardClient"],
            path: "Benchmarks/BoardBench"
        ),
        // A load generator against a real server process: run through bin/load (release).
        .executableTarget(
            name: "board-load",
            dependencies: ["BoardModel", "BoardCRDT", "BoardSync", "BoardNet"],
            path: "Benchmarks/BoardLoad"
        ),
        // Fuzz targets (every parser a peer or a file reaches): run under libFuzzer by bin/fuzz,
        // their corpus replayed by FuzzRegressionTests.
        .target(
            name: "BoardFuzz",
            dependencies: ["BoardModel", "BoardCRDT", "BoardStore", "BoardSync", "BoardRender", "BoardNet", "BoardRedis"],
            path: "Fuzz/Sources/BoardFuzz"
        ),
        .testTarget(name: "FuzzRegressionTests", dependencies: ["BoardFuzz"]),
        .testTarget(name: "BoardRedisTests", dependencies: ["BoardRedis", "BoardSync", "BoardCRDT", "BoardModel", "BoardSimulation"]),
        .testTarget(name: "BoardModelTests", dependencies: ["BoardModel"]),
        .testTarget(name: "BoardRenderTests", dependencies: ["BoardModel", "BoardRender"], exclude: ["Fixtures"]),
        .testTarget(name: "BoardCRDTTests", dependencies: ["BoardModel", "BoardCRDT", "BoardSimulation"]),
        .testTarget(name: "BoardSyncTests", dependencies: ["BoardModel", "BoardCRDT", "BoardStore", "BoardSync", "BoardSimulation"]),
        .testTarget(name: "BoardNetTests", dependencies: ["BoardModel", "BoardCRDT", "BoardStore", "BoardSync", "BoardNet", "BoardClient"]),
        .testTarget(name: "BoardSyncCLITests", dependencies: ["BoardModel", "BoardCRDT", "BoardStore", "BoardSync", "BoardRedis", "BoardNet"]),
        .testTarget(name: "BoardClientTests", dependencies: ["BoardClient", "BoardClientTesting", "BoardModel", "BoardCRDT", "BoardStore", "BoardSync", "BoardNet", "BoardRender"]),
        .testTarget(name: "BoardClientTestingTests", dependencies: ["BoardClientTesting", "BoardClient", "BoardModel", "BoardCRDT", "BoardSync"]),
        .testTarget(name: "BoardStoreTests", dependencies: ["BoardModel", "BoardCRDT", "BoardStore", "BoardSync", "BoardSimulation", "BoardRender"]),
    ],
    swiftLanguageModes: [.v6]
)
