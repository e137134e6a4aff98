import BoardNet
import Foundation

/// `serve --config FILE` and `BOARD_SYNC_*` variables: every `serve` option may come from the
/// command line (first), a variable named after it (`--max-connections` is
/// `BOARD_SYNC_MAX_CONNECTIONS`; repeatable options take a comma-separated list), or the JSON
/// object in the config file (`{"max-connections": 4096, "web-host": ["a", "b"]}`), in that
/// order: each setting is taken from the first that gives it. The settings then go through the
/// same checks as flags. `--print-config` prints what is in force and where each came from.
///
/// No setting holds a secret itself (secrets live in files: --secret-file, --redis-password-file,
/// --admin-token-file, --web-token-file, --tls-key, --webhook-secret-file), so `--print-config`
/// shows their paths, never what they hold; the one setting that may carry a secret in its
/// value, `--webhook` (a receiver's path or query), is printed redacted (scheme, host, port).
struct ServeConfig {
    /// Options that may be given more than once.
    static let repeatable: Set<String> = ["web-host", "web-origin", "admin-host"]
    /// The config file's largest size.
    static let maxFileBytes = 1 << 20

    /// The command line with the settings the environment and the config file add.
    var arguments: [String]
    /// Where each setting in force came from: "command line", "BOARD_SYNC_…" or the config file.
    var sources: [String: String] = [:]

    /// Merges `raw` (serve's command line) with `environment` and the config file (`--config`
    /// or `BOARD_SYNC_CONFIG`). `options` are serve's options, `flags` its flags.
    init(_ raw: [String], options: Set<String>, flags: Set<String>, environment: [String: String]) throws {
        let given = try Arguments(raw, options: options.union(["config"]), flags: flags.union(["print-config"]))
        arguments = raw
        for name in options where given.value(name) != nil { sources[name] = "command line" }
        for name in options.sorted() where given.value(name) == nil {
            let variable = Self.variable(name)
            guard let text = environment[variable] else { continue }
            let values = Self.repeatable.contains(name) ? text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } : [text]
            for value in values { arguments += ["--\(name)", value] }
            sources[name] = variable
        }
        guard let file = given.value("config") ?? environment["BOARD_SYNC_CONFIG"] else { return }
        sources["config"] = given.value("config") != nil ? "command line" : "BOARD_SYNC_CONFIG"
        for (name, values) in try Self.read(file, options: options).sorted(by: { $0.key < $1.key }) where sources[name] == nil {
            for value in values { arguments += ["--\(name)", value] }
            sources[name] = file
        }
        if given.value("config") == nil { arguments += ["--config", file] }
    }

    /// `BOARD_SYNC_MAX_CONNECTIONS` for `max-connections`.
    static func variable(_ option: String) -> String {
        "BOARD_SYNC_" + option.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// The settings of a config file: a JSON object whose keys are serve's options (strings,
    /// numbers, or arrays of them for repeatable options).
    static func read(_ path: String, options: Set<String>) throws -> [String: [String]] {
        var info = stat()
        guard stat(path, &info) == 0 else { throw UsageError("--config \(path): \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw UsageError("--config \(path) is not a regular file") }
        guard Int(info.st_size) <= maxFileBytes, let data = FileManager.default.contents(atPath: path) else {
            throw UsageError("--config \(path) cannot be read (at most \(maxFileBytes >> 20) MiB of JSON)")
        }
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: data)
        } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
            throw UsageError("--config \(path) is not JSON: \(detail)")
        }
        guard parsed is [String: Any] else {
            throw UsageError("--config \(path) must hold a JSON object of settings ({\"listen\": \"0.0.0.0:7420\", ...})")
        }
        let settings: [String: Setting]
        do {
            settings = try JSONDecoder().decode([String: Setting].self, from: data)
        } catch let error as DecodingError {
            let key = error.path.first?.stringValue ?? "?"
            throw UsageError("--config \(path): '\(key.prefix(80))' must be a string or a number (a list of them for \(repeatable.sorted().joined(separator: ", ")))")
        }
        var result: [String: [String]] = [:]
        for (key, value) in settings {
            guard options.contains(key), key != "config" else {
                throw UsageError("--config \(path): unknown setting '\(key.prefix(80))'\(Suggest.didYouMean(key, among: options))")
            }
            switch value {
            case .one(let text): result[key] = [text]
            case .list(let values):
                guard repeatable.contains(key) else { throw UsageError("--config \(path): '\(key)' takes one value, not a list") }
                result[key] = values
            }
        }
        return result
    }

    /// A config file's value: a string or a number, or a list of them.
    enum Setting: Decodable {
        case one(String)
        case list([String])

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) { self = .one(text); return }
            if (try? container.decode(Bool.self)) != nil {
                throw DecodingError.typeMismatch(Bool.self, .init(codingPath: decoder.codingPath, debugDescription: "true/false is not a setting"))
            }
            if let number = try? container.decode(Double.self) { self = .one(Self.text(number)); return }
            let list = try container.decode([Setting].self)
            self = .list(try list.map { item in
                guard case .one(let text) = item else {
                    throw DecodingError.typeMismatch(String.self, .init(codingPath: decoder.codingPath, debugDescription: "a list in a list"))
                }
                return text
            })
        }

        static func text(_ number: Double) -> String {
            number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
        }
    }

    /// A usage error about a setting that did not come from the command line says where it did.
    func explained(_ error: UsageError) -> UsageError {
        for (name, source) in sources.sorted(by: { $0.key < $1.key }) where source != "command line" && error.message.contains("--\(name)") {
            return UsageError("\(error.message) (--\(name) came from \(source))")
        }
        return error
    }

    /// Settings that have a default, as `--print-config` shows them when nothing sets them.
    static let defaults: [String: String] = {
        var values = ["listen": "127.0.0.1:7420", "log-format": "text"]
        for flag in ServeLimits.flags { values[flag.name] = Setting.text(flag.value) }
        return values
    }()

    static let help: [(String, String)] = [
        ("--config FILE", "Read settings from FILE, a JSON object whose keys are these options without the dashes ({\"data\": \"/srv/boards\", \"max-connections\": 4096, \"web-host\": [\"boards.example\"]}). Unknown keys are refused. Also BOARD_SYNC_CONFIG."),
        ("BOARD_SYNC_<OPTION>", "Every option can also come from the environment: --max-connections from BOARD_SYNC_MAX_CONNECTIONS (repeatable ones as a comma-separated list). The command line wins over the environment, which wins over --config."),
        ("--print-config", "Check the settings, print those in force as JSON with where each came from (command line, variable, file or default), and exit without serving. Secrets are never printed: settings name the files that hold them, and --webhook shows only its scheme, host and port."),
    ]

    /// `--print-config`: every setting in force (the command line's, the environment's and the
    /// file's, plus the limits' defaults), with where it came from.
    func printed(_ args: Arguments, options: Set<String>, defaults: [String: String]) throws {
        var settings: [String: Any] = [:]
        var from: [String: String] = [:]
        for name in options where name != "config" {
            if Self.repeatable.contains(name) {
                let values = args.values(name)
                if !values.isEmpty { settings[name] = values; from[name] = sources[name] ?? "command line" }
            } else if let value = args.value(name) {
                // A webhook URL's path and query may hold the receiver's secret.
                settings[name] = ServeWebhooks.redactedSettings.contains(name) ? HTTPClient.URLParts.redacting(value) : value
                from[name] = sources[name] ?? "command line"
            } else if let value = defaults[name] {
                settings[name] = value
                from[name] = "default"
            }
        }
        if let config = args.value("config") { from["config"] = config }
        try printJSON(["settings": settings, "sources": from])
    }
}

extension DecodingError {
    /// The coding path of the value that failed.
    var path: [any CodingKey] {
        switch self {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context), .dataCorrupted(let context):
            return context.codingPath
        @unknown default:
            return []
        }
    }
}
