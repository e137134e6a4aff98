import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// moto's S3 server from PyPI (`pip install 'moto[server]'`; `.ci/run` does) on a free loopback
/// port. `authenticating`: moto checks every request's SigV4 signature and key (after the few
/// unauthenticated calls `setUpAccount` makes to create a user and its key).
final class MotoProcess {
    static let available: Bool = {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        probe.arguments = ["python3", "-c", "import moto.server, boto3"]
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    let port = RedisProcess.freePort()
    let process = Process()
    var endpoint: String { "http://127.0.0.1:\(port)" }

    init(authenticating: Bool) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-m", "moto.server", "-H", "127.0.0.1", "-p", String(port)]
        var environment = ProcessInfo.processInfo.environment
        if authenticating { environment["INITIAL_NO_AUTH_ACTION_COUNT"] = "3" }
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if MotoProcess.accepts(port) { return }
            usleep(50_000)
        }
        throw CLI.Failure("moto did not start on port \(port)")
    }

    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    /// Runs a Python script (boto3 against this moto); returns its standard output.
    @discardableResult
    func python(_ script: String, in directory: String) throws -> String {
        let run = Process()
        run.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        run.arguments = ["python3", "-c", script]
        run.currentDirectoryURL = URL(fileURLWithPath: directory)
        let out = Pipe()
        run.standardOutput = out
        run.standardError = out
        try run.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        run.waitUntilExit()
        guard run.terminationStatus == 0 else { throw CLI.Failure("python failed: \(text)") }
        return text
    }

    /// A bucket (and, when authenticating, a user allowed everything, whose key goes to
    /// `credentials`, mode 0600).
    func setUp(bucket: String, credentials: String, in directory: String) throws {
        try python("""
            import boto3, json, os
            e = '\(endpoint)'
            iam = boto3.client('iam', endpoint_url=e, region_name='us-east-1', aws_access_key_id='x', aws_secret_access_key='y')
            try:
                iam.create_user(UserName='backup')
                iam.put_user_policy(UserName='backup', PolicyName='all', PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
                k = iam.create_access_key(UserName='backup')['AccessKey']
                key, secret = k['AccessKeyId'], k['SecretAccessKey']
            except Exception:
                key, secret = 'AKIDEXAMPLE', 'not-checked-without-authentication'
            fd = os.open('\(credentials)', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, (key + '\\n' + secret + '\\n').encode())
            os.close(fd)
            boto3.client('s3', endpoint_url=e, region_name='us-east-1', aws_access_key_id=key, aws_secret_access_key=secret).create_bucket(Bucket='\(bucket)')
            """, in: directory)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    }
}
