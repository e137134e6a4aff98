import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The client side of a peer's control channel (`ControlServer`): a command whose package a
/// running `peer` holds is sent to it, and what the peer answers is printed, written and exited
/// with as if the command had run here.
enum ControlClient {
    /// Seconds a command waits for a stopping peer to release its package.
    static let stoppingSeconds = 10.0
    /// Seconds a command waits for a held package's socket to appear (a peer between opening its
    /// package and binding the socket) or for a short-lived holder (another command) to finish.
    static let socketGraceSeconds = 1.0

    /// Runs `here` (the command on the package, reading its images from disk); when a process
    /// holds the package, sends the command to the peer serving it.
    static func run(_ name: String, _ raw: [String], here: (CommandImages) throws -> Void) throws {
        var waitingSince: Double?
        let started = ControlSocket.now()
        while true {
            let images = CommandImages()
            do {
                return try here(images)
            } catch let held as PackageHeld {
                guard Commands.throughPeer.contains(name) else { throw held.error }
                // Every image was read before the package was opened: the request carries them.
                for (path, bytes) in images.read where bytes.count > ControlLimits.imageBytes {
                    throw Failure("\(held.path) is held by a running peer, and the image \(path) (\(bytes.count) bytes) is over the \(ControlLimits.imageBytes >> 20) MiB a command sent to a peer may carry; stop the peer to add it")
                }
                let request = ControlRequest(command: name, arguments: raw, directory: FileManager.default.currentDirectoryPath,
                                             images: images.read, package: ControlPackageID(path: held.path))
                switch try send(request, to: held.path) {
                case .none:
                    if let since = waitingSince, ControlSocket.now() - since < stoppingSeconds {
                        usleep(100_000)  // the peer stopping: its socket is gone, its lock not yet
                        continue
                    }
                    if ControlSocket.now() - started < socketGraceSeconds {
                        usleep(50_000)
                        continue
                    }
                    throw Failure("\(held.error) (no peer answers on its control socket: a running `peer` takes other commands, `serve`, `sync` and the other commands do not)")
                case .some(let response) where response.outcome == .stopping:
                    if waitingSince == nil { waitingSince = ControlSocket.now() }
                    guard ControlSocket.now() - waitingSince! < stoppingSeconds else {
                        throw Failure("\(held.path): the peer holding it is stopping and did not release it within \(Int(stoppingSeconds)) s; the command was not run")
                    }
                    usleep(100_000)
                    continue
                case .some(let response):
                    return try deliver(response, command: name, package: held.path, arguments: raw)
                }
            }
        }
    }

    /// The peer's answer, or nil when no peer listens on the package's socket.
    static func send(_ request: ControlRequest, to package: String) throws -> ControlResponse? {
        let path = ControlSocket.path(package: package)
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }  // no socket: nobody serves the package (yet)
        guard info.st_mode & S_IFMT == S_IFSOCK, info.st_uid == geteuid() else {
            throw Failure("\(path) is not a socket of this user's (a symbolic link, or a file someone else put there); not sending it the command")
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let connected = try ControlSocket.withAddress(path) { connect(fd, $0, $1) == 0 }
        guard connected else { return nil }  // no socket, or one a killed peer left: nobody serves it
        guard ControlSocket.peerUID(fd) == geteuid() else {
            throw Failure("\(path) is served by a process of another user; not sending it the command")
        }
        ControlSocket.setNonBlocking(fd)
        let deadline = ControlSocket.now() + ControlLimits.clientSeconds
        let frame: Data
        do {
            do {
                try ControlSocket.send(fd, try JSONEncoder().encode(request), until: deadline)
            } catch let trouble as ControlSocket.Trouble {
                // A peer that refuses (busy) answers before it reads and closes: its answer is here.
                guard let answer = try? ControlSocket.receive(fd, limit: ControlLimits.responseBytes, until: ControlSocket.now() + 1),
                      let response = try? JSONDecoder().decode(ControlResponse.self, from: answer) else { throw trouble }
                return response
            }
            frame = try ControlSocket.receive(fd, limit: ControlLimits.responseBytes, until: deadline)
        } catch let trouble as ControlSocket.Trouble {
            throw Failure("\(package) is held by a running peer, which did not answer the command (\(trouble)); it may or may not have run: check with `board-sync show \(package)`")
        }
        do {
            return try JSONDecoder().decode(ControlResponse.self, from: frame)
        } catch {
            throw Failure("the peer holding \(package) answered something that is not a control response: \(error)")
        }
    }

    /// Prints, writes and fails as the command would have here.
    static func deliver(_ response: ControlResponse, command: String, package: String, arguments: [String]) throws {
        if let file = response.file {
            // Only an export that ran writes a file, and only at a path its command line named.
            guard command == "export", response.outcome == .done, arguments.contains(file.path) else {
                throw Failure("the peer holding \(package) answered with a file for \(file.path), which this command did not ask for; nothing written")
            }
            try CommandOutput.writeExport(file.path, file.bytes)
        }
        FileHandle.standardOutput.write(response.stdout)
        FileHandle.standardError.write(response.stderr)
        switch response.outcome {
        case .done: return
        case .usage: throw UsageError(response.message)
        case .failure: throw Failure(response.message)
        case .refused: throw Failure("the peer holding \(package) refused the command: \(response.message)")
        case .stopping: throw Failure("the peer holding \(package) is stopping; the command was not run")
        }
    }
}
