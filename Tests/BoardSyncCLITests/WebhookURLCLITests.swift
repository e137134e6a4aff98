import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A webhook URL's path and query may hold the receiver's secret (Slack's, Zapier's): `serve`
/// takes it from a file or the environment, and never logs or prints more of it than its
/// scheme, host and port (docs/DEPLOYMENT.md, "Webhooks").
@Suite(.serialized) struct WebhookURLCLITests {
    static let hidden = ["S3CR3TPATH", "QU3RYS3CR3T", "/hooks/"]

    static func urlFile(_ workspace: Workspace, _ text: String, name: String = "webhook.url", mode: mode_t = 0o600) throws -> String {
        let path = workspace.path + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, mode)
        return path
    }

    @Test func printConfigShowsTheURLRedactedWhereverItCameFrom() throws {
        let workspace = try Workspace()
        let secret = try WebhookCLITests.secret(workspace)
        let url = "https://hooks.example.com:8443/hooks/S3CR3TPATH?key=QU3RYS3CR3T"
        let fromFlag = try ServeConfigCLITests.run(workspace, ["serve", "--data", "d", "--webhook", url, "--webhook-secret-file", secret, "--print-config"])
        #expect(fromFlag.status == 0, "\(fromFlag.stderr)")
        #expect(try ServeConfigCLITests.printed(fromFlag).settings["webhook"] as? String == "https://hooks.example.com:8443/…", "\(fromFlag.stdout)")
        let fromVariable = try ServeConfigCLITests.run(workspace, ["serve", "--data", "d", "--webhook-secret-file", secret, "--print-config"],
                                                      environment: ["BOARD_SYNC_WEBHOOK": url])
        let printed = try ServeConfigCLITests.printed(fromVariable)
        #expect(printed.settings["webhook"] as? String == "https://hooks.example.com:8443/…", "\(fromVariable.stdout) \(fromVariable.stderr)")
        #expect(printed.sources["webhook"] == "BOARD_SYNC_WEBHOOK")
        let file = try Self.urlFile(workspace, url + "\n")
        let fromFile = try ServeConfigCLITests.run(workspace, ["serve", "--data", "d", "--webhook-url-file", file, "--webhook-secret-file", secret, "--print-config"])
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        let fileSetting = try ServeConfigCLITests.printed(fromFile).settings["webhook-url-file"] as? String
        #expect(fileSetting == file)
        for result in [fromFlag, fromVariable, fromFile] {
            for text in Self.hidden { #expect(!result.stdout.contains(text) && !result.stderr.contains(text), "\(text): \(result.stdout)") }
        }
    }

    /// Served from the command line (with a warning: every local user can read it), from a
    /// file, and from the environment, the events arrive at the whole URL; the log names only
    /// its scheme, host and port.
    @Test func theLogNeverHoldsTheURLsPathWhereverItCameFrom() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let secret = try WebhookCLITests.secret(workspace)
        try cli.run("new", "A.boardpkg")
        for (index, source) in ["flag", "file", "variable"].enumerated() {
            let receiver = try WebhookReceiver(in: workspace.path, secret: secret, mode: "ok")
            let url = "http://127.0.0.1:\(receiver.port)/hooks/S3CR3TPATH?key=QU3RYS3CR3T"
            var arguments = ["serve", "--data", "data\(index)", "--listen", "127.0.0.1:0", "--webhook-secret-file", secret]
            var environment: [String: String] = [:]
            switch source {
            case "flag": arguments += ["--webhook", url]
            case "file": arguments += ["--webhook-url-file", try Self.urlFile(workspace, url + "\n", name: "url\(index)")]
            default: environment["BOARD_SYNC_WEBHOOK"] = url
            }
            let server = try Daemon(arguments, in: workspace.path, environment: environment)
            let address = try #require(server.listeningAddress(), "\(server.log)")
            #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team\(index)").status == 0)
            let events = receiver.waitUntil { !WebhookCLITests.delivered($0, "board.created").isEmpty }
            #expect(WebhookCLITests.delivered(events, "board.created").count == 1, "\(source): \(events) \(server.log)")
            #expect(server.terminate() == 0)
            #expect(server.log.contains("POSTing board and client events to http://127.0.0.1:\(receiver.port)/…"), "\(server.log)")
            #expect(server.log.contains("WARNING: --webhook on the command line") == (source == "flag"), "\(source): \(server.log)")
            for text in Self.hidden { #expect(!server.log.contains(text), "\(source): \(text) in \(server.log)") }
        }
    }

    @Test func badURLFilesAndURLsAreRefusedWithoutEchoingThePath() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let secret = try WebhookCLITests.secret(workspace)
        let good = "http://127.0.0.1:9/hooks/S3CR3TPATH"
        let loose = try Self.urlFile(workspace, good, name: "loose.url", mode: 0o644)
        let twoLines = try Self.urlFile(workspace, good + "\n" + good + "\n", name: "two.url")
        let notHTTP = try Self.urlFile(workspace, "ftp://127.0.0.1/hooks/S3CR3TPATH\n", name: "ftp.url")
        let file = try Self.urlFile(workspace, good + "\n")
        try FileManager.default.createDirectory(atPath: workspace.path + "/dir.url", withIntermediateDirectories: true)
        let cases: [([String], Int32, String)] = [
            (["--webhook-url-file", loose], 1, "chmod 600"),
            (["--webhook-url-file", twoLines], 1, "must hold one line"),
            (["--webhook-url-file", notHTTP], 64, "--webhook-url-file: 'ftp://127.0.0.1/…' is not an http"),
            (["--webhook-url-file", workspace.path + "/dir.url"], 1, "is not a regular file"),
            (["--webhook-url-file", workspace.path + "/none.url"], 1, "no webhook URL file"),
            (["--webhook-url-file", file, "--webhook", good], 64, "give one of them"),
            (["--webhook", "http://127.0.0.1:99999/hooks/S3CR3TPATH"], 64, "'http://127.0.0.1:99999/…': bad port"),
        ]
        for (extra, status, message) in cases {
            let result = try cli.run(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--webhook-secret-file", secret] + extra)
            #expect(result.status == status && result.stderr.contains(message), "\(extra): \(result.status) \(result.stderr)")
            #expect(!result.stderr.contains("S3CR3TPATH"), "\(result.stderr)")
        }
    }
}
