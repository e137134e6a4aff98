import Foundation
import Testing

/// `serve --config FILE`, `BOARD_SYNC_*` variables and `--print-config` (issue 26, part 7).
@Suite struct ServeConfigCLITests {
    /// Runs board-sync in `workspace` with `environment` added to this process's.
    static func run(_ workspace: Workspace, _ arguments: [String], environment: [String: String] = [:]) throws -> CLI.Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CLI.binary)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: workspace.path)
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return CLI.Result(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }

    static func printed(_ result: CLI.Result) throws -> (settings: [String: Any], sources: [String: String]) {
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stderr)")
        return (try #require(json["settings"] as? [String: Any]), try #require(json["sources"] as? [String: String]))
    }

    @Test func theCommandLineWinsOverTheEnvironmentWhichWinsOverTheFile() throws {
        let workspace = try Workspace()
        try writeSecret(workspace.path + "/secret")
        let config = """
        {"data": "boards", "listen": "127.0.0.1:7999", "max-connections": 100, "max-ops-per-second": 2500.5,
         "secret-file": "secret", "web": "127.0.0.1:0", "web-host": ["a.example", "b.example"], "admin": "127.0.0.1:0"}
        """
        try config.write(toFile: workspace.path + "/serve.json", atomically: true, encoding: .utf8)
        let result = try Self.run(workspace, ["serve", "--config", "serve.json", "--print-config", "--listen", "127.0.0.1:0"],
                                  environment: ["BOARD_SYNC_MAX_CONNECTIONS": "50", "BOARD_SYNC_WEB_ORIGIN": "https://x.example, https://y.example",
                                                "BOARD_SYNC_LOG_FORMAT": "json"])
        #expect(result.status == 0, "\(result.stderr)")
        let (settings, sources) = try Self.printed(result)
        #expect(settings["listen"] as? String == "127.0.0.1:0" && sources["listen"] == "command line")
        #expect(settings["max-connections"] as? String == "50" && sources["max-connections"] == "BOARD_SYNC_MAX_CONNECTIONS")
        #expect(settings["max-ops-per-second"] as? String == "2500.5" && sources["max-ops-per-second"] == "serve.json")
        #expect(settings["web-host"] as? [String] == ["a.example", "b.example"])
        #expect(settings["web-origin"] as? [String] == ["https://x.example", "https://y.example"])
        #expect(settings["log-format"] as? String == "json")
        #expect(settings["max-boards"] as? String == "100000" && sources["max-boards"] == "default")
        #expect(sources["config"] == "serve.json")
        // Checked, printed, nothing started or created, no secret shown.
        let secret = try String(contentsOfFile: workspace.path + "/secret", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!result.stdout.contains(secret) && !result.stderr.contains(secret))
        #expect(settings["secret-file"] as? String == "secret")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/boards"))
        // The file named by BOARD_SYNC_CONFIG works the same.
        let byVariable = try Self.run(workspace, ["serve", "--print-config"], environment: ["BOARD_SYNC_CONFIG": "serve.json"])
        #expect(try Self.printed(byVariable).settings["listen"] as? String == "127.0.0.1:7999", "\(byVariable.stderr)")
    }

    @Test func aServerStartsFromTheEnvironmentAlone() throws {
        let workspace = try Workspace()
        let environment = ["BOARD_SYNC_DATA": "data", "BOARD_SYNC_LISTEN": "127.0.0.1:0", "BOARD_SYNC_ADMIN": "127.0.0.1:0",
                           "BOARD_SYNC_ADMIN_TOKEN_FILE": "admin.token"]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CLI.binary)
        process.arguments = ["serve"]
        process.currentDirectoryURL = URL(fileURLWithPath: workspace.path)
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let err = Pipe()
        process.standardError = err
        try process.run()
        defer { if process.isRunning { process.terminate(); process.waitUntilExit() } }
        var log = ""
        let deadline = Date().addingTimeInterval(10)
        while !log.contains("admin port at"), Date() < deadline {
            let data = err.fileHandleForReading.availableData
            if data.isEmpty { break }
            log += String(decoding: data, as: UTF8.self)
        }
        let admin = String((log.components(separatedBy: "admin port at http://").last ?? "").prefix { $0.isNumber || $0 == "." || $0 == ":" })
        #expect(plainGet(admin, "/readyz").status == 200, "\(log)")
        #expect(FileManager.default.fileExists(atPath: workspace.path + "/data"))
        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    @Test func badConfigurationIsRefusedNamingWhereItCameFrom() throws {
        let workspace = try Workspace()
        let files = [
            ("typo.json", #"{"max-conections": 5}"#, "unknown setting 'max-conections'; did you mean max-connections?"),
            ("bool.json", #"{"data": true}"#, "'data' must be a string or a number"),
            ("list.json", #"{"data": ["a", "b"]}"#, "'data' takes one value, not a list"),
            ("cut.json", #"{"data": "x","#, "is not JSON"),
            ("array.json", #"["data"]"#, "must hold a JSON object"),
            ("range.json", #"{"data": "d", "max-connections": 2.5}"#, "must be a whole number (--max-connections came from range.json)"),
            ("nested.json", #"{"web-host": [["a"]]}"#, "'web-host' must be a string or a number"),
        ]
        for (name, text, says) in files {
            try text.write(toFile: workspace.path + "/" + name, atomically: true, encoding: .utf8)
            let result = try Self.run(workspace, ["serve", "--config", name])
            #expect(result.status == 64, "\(name): \(result.stderr)")
            #expect(result.stderr.contains(says), "\(name): \(result.stderr)")
        }
        let missing = try Self.run(workspace, ["serve", "--config", "nowhere.json"])
        #expect(missing.status == 64 && missing.stderr.contains("nowhere.json"))
        let directory = try Self.run(workspace, ["serve", "--config", "."])
        #expect(directory.status == 64 && directory.stderr.contains("not a regular file"))
        let variable = try Self.run(workspace, ["serve", "--data", "d", "--print-config"], environment: ["BOARD_SYNC_IDLE_TIMEOUT": "-3"])
        #expect(variable.status == 64)
        #expect(variable.stderr.contains("(--idle-timeout came from BOARD_SYNC_IDLE_TIMEOUT)"), "\(variable.stderr)")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/d"), "nothing created for a refused configuration")
    }
}
