import BoardModel
import BoardNet
import BoardStore
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The admin port against what a review found: a crowd of strangers dropping an admin's
/// export, renderings that could each take a gigabyte, a tar of many small files holding the
/// loop, a tar that ended cleanly without files deleted meanwhile.
@Suite struct AdminReviewTests {
    /// A socket to `address` from `source` (127.0.0.2 is loopback too: another "address").
    static func connect(_ address: SocketAddress, from source: String) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        _ = inet_pton(AF_INET, source, &local.sin_addr)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = address.port.bigEndian
        _ = inet_pton(AF_INET, address.host, &remote.sin_addr)
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, connected == 0 else { close(fd); return nil }
        return fd
    }

    /// Everything the server sends on `fd` until it closes (or `seconds` pass): head and body.
    static func readAll(_ fd: Int32, seconds: Double = 30) -> (status: Int, body: [UInt8]) {
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let deadline = Date().addingTimeInterval(seconds)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while Date() < deadline {
            let got = recv(fd, &chunk, chunk.count, 0)
            if got > 0 { bytes += chunk[0..<got] } else if got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) { break }
        }
        guard let end = (0..<max(0, bytes.count - 3)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 && bytes[$0 + 2] == 13 && bytes[$0 + 3] == 10 }) else {
            return (0, [])
        }
        let status = Int(String(decoding: bytes[..<end], as: UTF8.self).split(separator: " ")[1]) ?? 0
        return (status, Array(bytes[(end + 4)...]))
    }

    static func send(_ fd: Int32, _ text: String) {
        _ = Array(text.utf8).withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// A rendering in progress is past its request: a crowd of strangers cannot drop it; a
    /// second rendering meanwhile is told 503; the crowd's own address gives way first.
    @Test func aCrowdCannotDropARenderingAndOneRendersAtATime() throws {
        var options = AdminServer.Options()
        options.maxUnanswered = 4
        options.maxConnectionsPerAddress = 16
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let first = NSLock()
        nonisolated(unsafe) var renders = 0
        options.render = { _, _, _ in
            first.lock(); renders += 1; let isFirst = renders == 1; first.unlock()
            if isFirst {
                started.signal()
                release.wait()
            }
            return Array("<svg/>".utf8)
        }
        let fixture = try AdminFixture(adminOptions: options)
        defer { fixture.stop() }
        let package = try makePackage(fixture.temp.path + "/data/team.boardpkg", id: 7)
        try package.commit { try $0.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 0), width: 2, points: [pt(1, 1), pt(4, 4)]) }
        try package.save()
        package.close()
        let token = try fixture.token(.admin)
        let rendering = try #require(Self.connect(fixture.address, from: "127.0.0.1"))
        defer { close(rendering) }
        Self.send(rendering, "GET /boards/team/export?format=svg HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n")
        #expect(started.wait(timeout: .now() + 20) == .success, "the rendering started")
        #expect(try fixture.request("/boards/team/export?format=png", token: token).status == 503, "one rendering at a time")
        // A slow admin from 127.0.0.1 that has not finished its request yet, then a crowd from
        // 127.0.0.2 twice the waiting limit.
        let slow = try WebClient(fixture.address)
        slow.send(Array("GET /healthz HTTP/1.1\r\n".utf8))
        var crowd: [Int32] = []
        defer { crowd.forEach { close($0) } }
        for _ in 0..<8 {
            guard let fd = Self.connect(fixture.address, from: "127.0.0.2") else { Issue.record("cannot connect from 127.0.0.2"); return }
            crowd.append(fd)
            usleep(20_000)
        }
        let admin = fixture.admin
        #expect(try fixture.server.thread.wait { admin.connectionCount == 2 + 3 }, "the crowd made room among its own: 3 of it are left")
        slow.send(Array("Host: 127.0.0.1\r\n\r\n".utf8))
        #expect(slow.response()?.status == 200, "the slow admin was not dropped")
        release.signal()
        let answer = Self.readAll(rendering)
        #expect(answer.status == 200, "the rendering was answered")
        #expect(String(decoding: answer.body, as: UTF8.self) == "<svg/>")
        #expect(try fixture.request("/boards/team/export?format=svg", token: token).status == 200, "its place is free again")
    }

    /// A package of many small files is streamed over many loop turns (the port answers a
    /// probe between them), leaves out the lock, view and replica identity, and a file deleted
    /// while it streams stops the tar short instead of ending it cleanly without the file.
    @Test func aTarOfManyFilesIsCutOverLoopTurnsAndStopsShortIfFilesGo() throws {
        let fixture = try AdminFixture()
        defer { fixture.stop() }
        let path = fixture.temp.path + "/data/team.boardpkg"
        let package = try makePackage(path, id: 7)
        try package.save()
        package.close()
        // 1,200 small files in sync/assets (the tar takes any regular file there): 12 MB of tar,
        // more than the socket buffers hold for a client that does not read.
        let assets = path + "/" + PackageLayout.assets
        try FileManager.default.createDirectory(atPath: assets, withIntermediateDirectories: true)
        let filler = Data(repeating: 7, count: 10_000)
        for index in 0..<1_200 { try filler.write(to: URL(fileURLWithPath: assets + "/f\(index)")) }
        let token = try fixture.token(.admin)
        let request = "GET /boards/team/export HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n"
        let client = try #require(Self.connect(fixture.address, from: "127.0.0.1"))
        defer { close(client) }
        Self.send(client, request)
        let answer = Self.readAll(client)
        #expect(answer.status == 200)
        let names = Self.tarNames(answer.body)
        #expect(names.filter { $0.hasPrefix("team.boardpkg/sync/assets/f") }.count == 1_200)
        for left in [PackageLayout.lock, PackageLayout.view, PackageLayout.undo, PackageLayout.identity] {
            #expect(!names.contains("team.boardpkg/" + left), "\(left) is not exported")
        }
        #expect(answer.body.suffix(1024).allSatisfy { $0 == 0 }, "the tar ends with its two zero blocks")
        // Deleted while streaming: a client that reads slowly, files removed after its first bytes.
        let slow = try #require(Self.connect(fixture.address, from: "127.0.0.1"))
        defer { close(slow) }
        Self.send(slow, request)
        usleep(300_000)
        for index in 0..<1_200 { unlink(assets + "/f\(index)") }
        let cut = Self.readAll(slow)
        #expect(cut.status == 200)
        #expect(Self.tarNames(cut.body).count < 1_200, "the tar stopped at the first file gone")
        #expect(!cut.body.suffix(1024).allSatisfy { $0 == 0 }, "a tar missing deleted files does not end cleanly")
        #expect(try fixture.request("/healthz").status == 200)
    }

    /// A stranger refused in a loop cannot flood the log: a burst, then lines counted.
    @Test func refusalsAreLoggedAtABoundedRate() throws {
        var options = AdminServer.Options()
        let lock = NSLock()
        nonisolated(unsafe) var lines: [String] = []
        options.log = { line in lock.lock(); lines.append(line); lock.unlock() }
        let fixture = try AdminFixture(adminOptions: options)
        defer { fixture.stop() }
        for _ in 0..<200 { #expect(try fixture.request("/healthz", host: "evil.example").status == 421) }
        #expect(try fixture.request("/healthz").status == 200)
        lock.lock(); let refused = lines.filter { $0.contains("for host") }; lock.unlock()
        #expect(refused.count >= 20 && refused.count < 200, "\(refused.count) lines for 200 refusals")
        // After a pause the next refusal is logged, with the count of those left out.
        usleep(1_000_000)
        #expect(try fixture.request("/healthz", host: "evil.example").status == 421)
        lock.lock(); let last = lines.last { $0.contains("for host") }; lock.unlock()
        #expect(last?.contains("refusals before it not logged") == true, "\(String(describing: last))")
    }

    /// The names of a ustar stream's entries (up to where it stops).
    static func tarNames(_ bytes: [UInt8]) -> [String] {
        var names: [String] = []
        var offset = 0
        while offset + 512 <= bytes.count {
            let header = bytes[offset..<offset + 512]
            if header.allSatisfy({ $0 == 0 }) { break }
            let name = String(decoding: header.prefix(100).prefix { $0 != 0 }, as: UTF8.self)
            let prefix = String(decoding: header.dropFirst(345).prefix(155).prefix { $0 != 0 }, as: UTF8.self)
            let sizeText = String(decoding: header.dropFirst(124).prefix(12).prefix { $0 != 0 && $0 != 32 }, as: UTF8.self)
            let size = Int(sizeText, radix: 8) ?? 0
            names.append(prefix.isEmpty ? name : prefix + "/" + name)
            offset += 512 + (size + 511) / 512 * 512
        }
        return names
    }
}
