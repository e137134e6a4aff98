import BoardSync
import Foundation
import Synchronization

/// `serve --log-format text|json`. Text (the default) is `TIME line`; JSON is one object per
/// line with the same fields on every line: `time`, `level`, `event`, `board`, `replica`,
/// `subject`, `peer`, `code`, `message` (null when a line has none). The fields are read off
/// the line the server logs (the same line text shows), after `LogText.escaped`, so nothing a
/// peer sends can end a line; they are read outside quoted values only (`Scan`: peers' text is
/// logged through `LogText.quoted`, which escapes quotes), so a quoted header or name cannot
/// forge a board, level, event or code; in JSON the line is also scrubbed of anything
/// shaped like a token (`bst1.…`, `token=…`): a web view's run token appears as `token=REDACTED`.
enum ServeLog {
    enum Format: UInt8 { case text = 0, json = 1 }

    private static let format = Atomic<UInt8>(Format.text.rawValue)

    static var isJSON: Bool { format.load(ordering: .relaxed) == Format.json.rawValue }

    static func setFormat(_ value: Format) { format.store(value.rawValue, ordering: .relaxed) }

    /// Reads `--log-format` (before anything is logged).
    static func configure(_ text: String?) throws {
        guard let text else { return }
        guard let value = ["text": Format.text, "json": .json][text] else {
            throw UsageError("--log-format must be text or json, not '\(text.prefix(40))'")
        }
        setFormat(value)
    }

    /// One JSON object for a logged line (already escaped by `NetCommands.log`'s caller path).
    static func json(_ rawLine: String, stamp: String) -> String {
        let line = redacted(LogText.escaped(rawLine))
        // Fields are read outside quoted values only: what a peer sent is quoted
        // (`LogText.quoted` escapes quotes in it), so it cannot pose as a board, a level or a code.
        let scan = Scan(line)
        let outside = scan.outside
        let fields: [(String, String?)] = [
            ("time", stamp), ("level", level(outside)), ("event", event(outside)), ("board", scan.value(after: "board ")),
            ("replica", word(after: "replica ", in: outside)), ("subject", scan.value(after: "subject ")),
            ("peer", peer(outside)), ("code", code(outside)), ("message", line),
        ]
        return "{" + fields.map { "\"\($0.0)\":\($0.1.map(string) ?? "null")" }.joined(separator: ",") + "}"
    }

    /// A JSON string literal: quotes, backslashes and every control character escaped.
    static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || (0x2028...0x2029).contains(scalar.value) {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// The line without token-shaped text: `bst1.` tokens and `token=` values.
    static func redacted(_ line: String) -> String {
        var result = line
        for marker in ["bst1.", "token="] {
            var searchFrom = result.startIndex
            while let range = result.range(of: marker, range: searchFrom..<result.endIndex) {
                let end = result[range.upperBound...].firstIndex { $0 == " " || $0 == "&" || $0 == "\"" || $0 == "'" || $0 == ")" } ?? result.endIndex
                result.replaceSubrange(range.upperBound..<end, with: "REDACTED")
                searchFrom = result.index(range.upperBound, offsetBy: "REDACTED".count)
            }
        }
        return result
    }

    private static func level(_ line: String) -> String {
        if line.hasPrefix("WARNING") { return "warning" }
        if line.hasPrefix("ERROR") { return "error" }  // a board too large to back up, a final backup cut short
        let lower = line.lowercased()
        if failedMeansFailure(lower) || lower.contains("cannot ") || lower.contains("internal error") { return "error" }
        if lower.contains("access denied") || lower.contains("refused") || code(line) != nil { return "warning" }
        return "info"
    }

    /// Whether "failed" in a line says something failed: a count of none ("2 written, 0 failed")
    /// does not.
    static func failedMeansFailure(_ lower: String) -> Bool {
        var words = lower.split(whereSeparator: { $0 == " " || $0 == "," || $0 == ";" || $0 == "(" || $0 == ")" })[...]
        var previous: Substring?
        while let word = words.popFirst() {
            if word.hasPrefix("failed"), previous.map({ $0.allSatisfy(\.isNumber) && Int($0) == 0 }) != true { return true }
            previous = word
        }
        return false
    }

    private static func event(_ line: String) -> String {
        let rules: [(String, String)] = [
            ("access denied", "access_denied"), ("listening on ", "listening"), ("connection from ", "connection_opened"),
            ("save failed", "save_failed"), ("signal ", "signal"), ("web view at ", "web_view"), ("admin port at ", "admin_port"),
            ("scale-out", "redis"), ("Redis ", "redis"),
        ]
        if line.hasPrefix("connection "), line.contains(" closed") { return "connection_closed" }
        for (needle, name) in rules where line.contains(needle) { return name }
        if line.hasPrefix("backup ") || line.hasPrefix("backups: ") || line.hasPrefix("final backup ") || line.hasPrefix("ERROR final backup ") { return "backup" }
        if line.hasPrefix("web: ") { return "web" }
        if line.hasPrefix("admin: ") { return "admin" }
        if line.hasPrefix("board '") {
            for (needle, name) in [("': opened ", "board_opened"), ("': created ", "board_created"), ("': closed", "board_closed"), ("session ", "session_closed")]
            where line.contains(needle) { return name }
            return "board"
        }
        if line.hasPrefix("WARNING") { return "warning" }
        if line == "stopped" { return "stopped" }
        return "message"
    }

    /// A line split into the text outside quotes (each quoted value replaced by `'#N'`) and the
    /// quoted values. A quote opens a value only at the start of a word (`server's` opens
    /// nothing); inside, a backslash escapes the next character and an unescaped quote closes it.
    struct Scan {
        var outside = ""
        var values: [String] = []

        init(_ line: String) {
            var value: String?
            var escaping = false
            var previous: Character = " "
            for character in line {
                if var current = value {
                    if escaping {
                        current.append(character)
                        escaping = false
                    } else if character == "\\" {
                        escaping = true
                    } else if character == "'" {
                        outside += "'#\(values.count)'"
                        values.append(current)
                        value = nil
                        previous = character
                        continue
                    } else {
                        current.append(character)
                    }
                    value = current
                } else if character == "'", " ([=,:".contains(previous) {
                    value = ""
                } else {
                    outside.append(character)
                    previous = character
                }
            }
            // An unterminated quote (an apostrophe of ours, never a peer's `LogText.quoted`
            // value, which always closes): its text is ours, kept outside.
            if let value { outside += "'" + value }
        }

        /// The quoted value right after `prefix` outside quotes (`board 'team'`: "team").
        func value(after prefix: String) -> String? {
            guard let start = outside.range(of: prefix + "'#")?.upperBound else { return nil }
            guard let index = Int(outside[start...].prefix(while: \.isNumber)), values.indices.contains(index) else { return nil }
            return values[index]
        }
    }

    /// The word after `prefix` (up to a space, comma or parenthesis).
    private static func word(after prefix: String, in line: String) -> String? {
        guard let start = line.range(of: prefix)?.upperBound else { return nil }
        let value = line[start...].prefix { !" ,()':;".contains($0) }
        return value.isEmpty ? nil : String(value)
    }

    /// The first IPv4 `a.b.c.d:port` in the line.
    private static func peer(_ line: String) -> String? {
        for token in line.split(whereSeparator: { " ,()'".contains($0) }) {
            let text = token.hasSuffix(":") ? token.dropLast() : token
            let parts = text.split(separator: ":")
            guard parts.count == 2, UInt16(parts[1]) != nil else { continue }
            let octets = parts[0].split(separator: ".")
            if octets.count == 4, octets.allSatisfy({ UInt8($0) != nil }) { return String(text) }
        }
        return nil
    }

    /// The session error code named by `(code N)` (as `SessionError.summary` writes it).
    private static func code(_ line: String) -> String? {
        guard let start = line.range(of: "(code ")?.upperBound else { return nil }
        let digits = line[start...].prefix(while: \.isNumber)
        guard let raw = UInt16(digits), let code = SessionError.Code(rawValue: raw) else { return nil }
        return "\(code)"
    }
}
