import BoardCRDT
import BoardModel
import Foundation

/// Bad usage: printed as `Error: …` followed by the command's usage, exit 64.
struct UsageError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// A runtime failure: printed as `Error: …`, exit 1.
struct Failure: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// Options and positionals of one command line, parsed against what the command declares.
struct Arguments {
    private(set) var positionals: [String] = []
    private var values: [String: String] = [:]
    private var allValues: [String: [String]] = [:]
    private var present: Set<String> = []

    /// `options` take a value (`--to X,Y` or `--to=X,Y`); `flags` do not.
    init(_ arguments: [String], options: Set<String>, flags: Set<String>) throws {
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if onlyPositionals || !argument.hasPrefix("--") || argument == "-" {
                // A lone "-5,3" style value is a positional, not an option.
                positionals.append(argument)
                continue
            }
            if argument == "--" { onlyPositionals = true; continue }
            var name = String(argument.dropFirst(2))
            var inline: String?
            if let equals = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if flags.contains(name) {
                guard inline == nil else { throw UsageError("--\(name) takes no value") }
                present.insert(name)
            } else if options.contains(name) {
                let value: String
                if let inline {
                    value = inline
                } else {
                    guard index < arguments.count else { throw UsageError("--\(name) needs a value") }
                    value = arguments[index]
                    index += 1
                }
                values[name] = value
                allValues[name, default: []].append(value)
                present.insert(name)
            } else {
                throw UsageError("unknown option --\(name)\(Suggest.didYouMean(name, among: options.union(flags), prefix: "--"))")
            }
        }
    }

    func has(_ flag: String) -> Bool { present.contains(flag) }
    func value(_ option: String) -> String? { values[option] }
    /// Every value of an option that may repeat.
    func values(_ option: String) -> [String] { allValues[option] ?? [] }

    /// Exactly `names.count` positionals, named in errors by `names`.
    func positionals(_ names: [String]) throws -> [String] {
        if positionals.count < names.count {
            throw UsageError("missing \(names[positionals.count])")
        }
        if positionals.count > names.count {
            throw UsageError("unexpected argument '\(positionals[names.count])'")
        }
        return positionals
    }
}

/// "Did you mean" for a mistyped option or subcommand: the closest known name within a couple
/// of edits (Levenshtein distance), if there is one.
enum Suggest {
    static func didYouMean(_ typed: String, among names: some Collection<String>, prefix: String = "") -> String {
        var best: (name: String, cost: Int)?
        for name in names.sorted() {
            let cost = distance(typed, name)
            if best == nil || cost < best!.cost { best = (name, cost) }
        }
        let allowed = max(1, min(2, typed.count / 3))
        guard let best, best.cost <= allowed else { return "" }
        return "; did you mean \(prefix)\(best.name)?"
    }

    /// Edits (insert, delete, replace, swap two neighbours) from `a` to `b`.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let replace = table[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                var best = min(table[i - 1][j] + 1, table[i][j - 1] + 1, replace)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { best = min(best, table[i - 2][j - 2] + 1) }
                table[i][j] = best
            }
        }
        return table[a.count][b.count]
    }
}

/// Strict parsers for the values the commands take. Each error names the option and the value.
/// Values a board cannot hold are refused with the option named (exit 64), never clamped:
/// coordinates, widths and canvas sides lie within ±2^40 points (`FixedPoint`), and are kept to
/// 1/16 of a point; widths, scales and canvas sides are positive.
enum Parse {
    /// The largest coordinate, width or canvas side a board holds, in points.
    static let limit = FixedPoint.points(FixedPoint.limit)

    static func number(_ text: String, _ what: String) throws -> Double {
        guard !text.isEmpty else { throw UsageError("\(what) needs a number") }
        guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value.isFinite else {
            throw UsageError("\(what) '\(text)' is not a finite number")
        }
        return value
    }

    /// A coordinate (points): within ±2^40.
    static func coordinate(_ text: String, _ what: String) throws -> Double {
        let value = try number(text, what)
        guard abs(value) <= limit else {
            throw UsageError("\(what) '\(text)' is outside ±\(Int64(limit)) points, the largest coordinate a board holds")
        }
        return value
    }

    /// A length or factor that must be positive (a stroke's width, a sticker's scale).
    static func positive(_ text: String, _ what: String, max: Double = limit) throws -> Double {
        let value = try number(text, what)
        guard value > 0 else { throw UsageError("\(what) '\(text)' must be positive") }
        guard value <= max else { throw UsageError("\(what) '\(text)' is over \(Int64(max)), the most a board holds") }
        return value
    }

    static func point(_ text: String, _ what: String) throws -> CodablePoint {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { throw UsageError("\(what) '\(text)' is not a point X,Y") }
        return CodablePoint(x: try coordinate(String(parts[0]), what), y: try coordinate(String(parts[1]), what))
    }

    static func points(_ text: String, _ what: String) throws -> [CodablePoint] {
        let items = text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" })
        guard !items.isEmpty else { throw UsageError("\(what) needs at least one point X,Y") }
        return try items.map { try point(String($0), what) }
    }

    static func size(_ text: String, _ what: String) throws -> CodableSize {
        let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw UsageError("\(what) '\(text)' is not a size WxH (width and height in points, such as 1600x1200)")
        }
        let width = try number(String(parts[0]), what), height = try number(String(parts[1]), what)
        guard width > 0, height > 0 else { throw UsageError("\(what) '\(text)' must be positive") }
        guard width <= limit, height <= limit else { throw UsageError("\(what) '\(text)' is over \(Int64(limit)) points on a side, the most a board holds") }
        return CodableSize(width: width, height: height)
    }

    static func color(_ text: String) throws -> RGBAColor {
        var digits = Substring(text)
        if digits.hasPrefix("#") { digits = digits.dropFirst() }
        guard digits.count == 6 || digits.count == 8, digits.allSatisfy(\.isHexDigit),
              let value = UInt32(digits, radix: 16) else {
            throw UsageError("--color '\(text)' is not #RRGGBB or #RRGGBBAA")
        }
        let full = digits.count == 6 ? value << 8 | 0xFF : value
        func channel(_ shift: UInt32) -> Double { Double((full >> shift) & 0xFF) / 255 }
        return RGBAColor(red: channel(24), green: channel(16), blue: channel(8), alpha: channel(0))
    }

    static func uuid(_ text: String) throws -> UUID {
        guard let uuid = UUID(uuidString: text) else { throw UsageError("'\(text)' is not an item id (a UUID as `show` prints it)") }
        return uuid
    }
}
