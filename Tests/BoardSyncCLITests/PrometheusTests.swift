import BoardModel
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Debian's `prometheus` (installed by `.ci/run`) scraping a loaded `serve --admin` every
/// second with the admin token: the series arrive, and they move as the load goes on. Skipped,
/// loudly, where no prometheus binary exists.
@Suite(.serialized) struct PrometheusTests {
    static var binary: String? {
        ["/usr/bin/prometheus", "/usr/local/bin/prometheus"].first(where: FileManager.default.isExecutableFile)
    }

    /// A Prometheus API query's samples: (labels, value).
    static func query(_ prometheus: String, _ expression: String) -> [([String: String], Double)] {
        let encoded = expression.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let answer = plainGet(prometheus, "/api/v1/query?query=\(encoded)")
        guard answer.status == 200, let json = try? JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
              let data = json["data"] as? [String: Any], let result = data["result"] as? [[String: Any]] else { return [] }
        return result.compactMap { sample in
            guard let value = sample["value"] as? [Any], value.count == 2, let text = value[1] as? String, let number = Double(text) else { return nil }
            return ((sample["metric"] as? [String: String]) ?? [:], number)
        }
    }

    /// Polls `expression` until `accept` takes its first sample's value (or 30 s pass).
    static func waitFor(_ prometheus: String, _ expression: String, _ accept: (Double) -> Bool) -> Double? {
        let deadline = Date().addingTimeInterval(30)
        var last: Double?
        while Date() < deadline {
            if let value = query(prometheus, expression).first?.1 {
                last = value
                if accept(value) { return value }
            }
            usleep(250_000)
        }
        Issue.record("\(expression): last value \(String(describing: last))")
        return nil
    }

    @Test func prometheusScrapesTheAdminPortAndTheSeriesMove() throws {
        guard let binary = Self.binary else {
            print("PrometheusTests: SKIPPED the Prometheus scrape test: no prometheus binary (apt-get install prometheus; .ci/run does)")
            return
        }
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
                                 "--admin-token-file", "admin.token"], in: workspace.path)
        let address = try #require(server.syncAddress(), "\(server.log)")
        let admin = try #require(server.adminAddress(), "\(server.log)")
        let port = RedisProcess.freePort()
        let config = """
        global:
          scrape_interval: 1s
          evaluation_interval: 1s
        scrape_configs:
          - job_name: boardsync
            scrape_interval: 1s
            scrape_timeout: 1s
            authorization:
              type: Bearer
              credentials_file: \(workspace.path)/admin.token
            static_configs:
              - targets: ['\(admin)']

        """
        try config.write(toFile: workspace.path + "/prometheus.yml", atomically: true, encoding: .utf8)
        let prometheus = Process()
        prometheus.executableURL = URL(fileURLWithPath: binary)
        prometheus.arguments = ["--config.file=\(workspace.path)/prometheus.yml", "--storage.tsdb.path=\(workspace.path)/tsdb",
                                "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn"]
        prometheus.standardOutput = FileHandle.nullDevice
        prometheus.standardError = FileHandle.nullDevice
        try prometheus.run()
        defer {
            prometheus.terminate()
            prometheus.waitUntilExit()
        }
        let api = "127.0.0.1:\(port)"
        // Load: two replicas with strokes, synced through the server.
        try cli.run("new", "A.boardpkg")
        try cli.run("new", "B.boardpkg")
        for index in 0..<4 { try cli.run("stroke", "A.boardpkg", "--points", "\(index),1 4,4 9,2") }
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0)
        #expect(try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team").status == 0)
        #expect(Self.waitFor(api, "up{job=\"boardsync\"}") { $0 == 1 } != nil, "Prometheus scrapes the admin port with the token")
        let families = Self.waitFor(api, "count(count by (__name__)({job=\"boardsync\",__name__=~\"boardsync_.*|process_.*\"}))") { $0 >= 15 }
        #expect(families != nil)
        let first = try #require(Self.waitFor(api, "boardsync_operations_received_total") { $0 >= 4 })
        #expect(Self.waitFor(api, "boardsync_group_commit_operations_count") { $0 >= 1 } != nil)
        // A count of fsyncs the histogram observed (it recorded one), not a bound on their time.
        #expect(Self.waitFor(api, "boardsync_fsync_seconds_count") { $0 >= 1 } != nil)
        #expect(Self.waitFor(api, "boardsync_operations_sent_total") { $0 >= 4 } != nil, "B received A's strokes")
        // More load: the counters move.
        for index in 0..<3 { try cli.run("stroke", "B.boardpkg", "--points", "\(index),7 2,2") }
        #expect(try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team").status == 0)
        #expect(Self.waitFor(api, "boardsync_operations_received_total") { $0 > first } != nil, "the counter moved past \(first)")
        #expect(Self.waitFor(api, "process_resident_memory_bytes") { $0 > 1_000_000 } != nil)
        #expect(server.terminate() == 0)
    }
}
