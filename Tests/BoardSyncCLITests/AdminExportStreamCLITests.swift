import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `board-sync admin export` streams to a temporary file beside its output and renames it only
/// when the export came whole: against a real server, and against a stand-in that cuts its
/// answer short.
@Suite(.serialized) struct AdminExportStreamCLITests {
    /// Answers one connection with `answer`, then closes it (a server that stops mid-export).
    final class CutShortServer: @unchecked Sendable {  // the listening socket is only read after init
        let fd: Int32
        let port: Int
        let done: DispatchSemaphore

        init(_ answer: [UInt8]) {
            let (listening, port) = loopbackListener(backlog: 4)
            fd = listening
            self.port = port
            let done = DispatchSemaphore(value: 0)
            self.done = done
            Thread {
                let client = accept(listening, nil, nil)
                if client >= 0 {
                    var buffer = [UInt8](repeating: 0, count: 65536)
                    var request: [UInt8] = []
                    while request.firstRange(of: Array("\r\n\r\n".utf8)) == nil {
                        let count = recv(client, &buffer, buffer.count, 0)
                        if count <= 0 { break }
                        request += buffer[0..<count]
                    }
                    _ = answer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    close(client)
                }
                done.signal()
            }.start()
        }

        deinit { close(fd) }
    }

    static func leftovers(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".part-") }
    }

    @Test func aCutShortExportLeavesNoOutputAndSaysWhatHappened() throws {
        let workspace = try Workspace()
        try ("token\n").write(toFile: workspace.path + "/admin.token", atomically: true, encoding: .utf8)
        // An earlier export at the output stays as it was.
        try Data("an earlier export".utf8).write(to: URL(fileURLWithPath: workspace.path + "/team.tar"))
        let cases: [(String, [UInt8], String)] = [
            // A tar runs to the connection's end: this one ends before its end blocks.
            ("team.tar", Array("HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\n\r\n".utf8) + [UInt8](repeating: 65, count: 3000), "ended early (3000 bytes, no end of archive"),
            // A rendering names its length: this one stops short of it.
            ("team.png", Array("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 5000\r\n\r\n".utf8) + [UInt8](repeating: 66, count: 100), "cut short (100 of 5000 bytes)"),
            // Chunked, without the last chunk.
            ("team.svg", Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n".utf8), "a chunked response was cut short (after 16 bytes"),
        ]
        for (output, answer, message) in cases {
            let server = CutShortServer(answer)
            let result = try workspace.cli.run("admin", "export", "team", output, "--server", "127.0.0.1:\(server.port)", "--token-file", "admin.token")
            server.done.wait()
            #expect(result.status == 1, "\(output): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains(message) && result.stderr.contains("nothing was written to \(output)"), "\(output): \(result.stderr)")
            #expect(try Self.leftovers(workspace.path).isEmpty, "\(output): no partial file")
        }
        #expect(try String(contentsOfFile: workspace.path + "/team.tar", encoding: .utf8) == "an earlier export")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/team.png"))
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/team.svg"))
    }

    @Test func aWholeExportFromARealServerReplacesTheOutput() throws {
        let server = try AdminAPICLITests.Server()
        try server.upload("team")
        let placed = try server.workspace.cli.run("sticker", "team.boardpkg", "--image", "red.png", "--at", "5,5")
        #expect(placed.status == 0, "\(placed.stderr)")
        try server.upload("team")
        try Data("an earlier export".utf8).write(to: URL(fileURLWithPath: server.workspace.path + "/team.tar"))
        let exported = try server.admin("export", "team", "team.tar", "--json")
        #expect(exported.status == 0, "\(exported.stderr)")
        let report = try server.json(exported)
        let size = try FileManager.default.attributesOfItem(atPath: server.workspace.path + "/team.tar")[.size] as? Int
        #expect(report["bytes"] as? Int == size && (size ?? 0) % 512 == 0 && (size ?? 0) > 1024, "\(report) \(String(describing: size))")
        #expect(try Self.leftovers(server.workspace.path).isEmpty)
        let list = Process()
        list.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        list.arguments = ["tar", "-tf", "team.tar"]
        list.currentDirectoryURL = URL(fileURLWithPath: server.workspace.path)
        let out = Pipe()
        list.standardOutput = out
        try list.run()
        let names = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        list.waitUntilExit()
        #expect(list.terminationStatus == 0 && names.contains("team.boardpkg/sync/oplog") && names.contains("team.boardpkg/sync/assets/"), "\(names)")
        // A refusal writes nothing either.
        let missing = try server.admin("export", "nothing", "nothing.tar")
        #expect(missing.status == 1 && missing.stderr.contains("404"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: server.workspace.path + "/nothing.tar"))
        #expect(try Self.leftovers(server.workspace.path).isEmpty)
        #expect(server.daemon.terminate() == 0)
    }
}
