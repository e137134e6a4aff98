import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Foundation

/// A scenario's expectations (`expect …`): what the final board, or one peer's, must show.
extension ScenarioRunner {
    /// `expect [PEER:] LABEL at X,Y | LABEL scale S | LABEL rotation R | LABEL deleted |
    /// LABEL visible | LABEL color #RRGGBB | LABEL width W | LABEL points N | LABEL image NAME |
    /// order A B C | canvas WxH | converged`
    mutating func expect(_ words: [String], _ line: Scenario.Line) throws {
        var words = words
        var who = peers
        if let first = words.first, first.hasSuffix(":") {
            who = [try peer(String(first.dropLast()), line)]
            words.removeFirst()
        }
        let text = line.text
        var problems: [String] = []
        if words == ["converged"] {
            let boards = try peers.map { try $0.package.replica.snapshot().canonicalJSON() }
            let serverBoard = try server.boards["scenario"]?.store.replica.snapshot().canonicalJSON()
            if Set(boards).count > 1 || (serverBoard != nil && serverBoard != boards.first) {
                problems.append("the replicas hold different boards")
            }
        } else {
            for peer in who {
                if let problem = try check(words, on: peer.package.replica.snapshot(), line) {
                    problems.append("\(peer.name): \(problem)")
                }
            }
        }
        if problems.isEmpty {
            outcome.transcript.append("\(line.number): \(text) — ok")
        } else {
            outcome.transcript.append("\(line.number): \(text) — FAILED: \(problems.joined(separator: "; "))")
            outcome.failures.append("line \(line.number): \(text): \(problems.joined(separator: "; "))")
        }
    }

    func check(_ words: [String], on board: BoardSnapshot, _ line: Scenario.Line) throws -> String? {
        func fail(_ message: String) -> Scenario.ScenarioError { Scenario.ScenarioError(line: line.number, message: message) }
        if words.first == "order" {
            let wanted = try words.dropFirst().map { try item($0, line).uuid }
            let shown = (board.paintOrder ?? []).filter { wanted.contains($0) }
            return shown == wanted ? nil : "order is \(shown.map { label(for: $0) }.joined(separator: " "))"
        }
        if words.first == "canvas" {
            let size = (words.count > 1 ? words[1] : "").split(separator: "x").compactMap { Double($0) }
            guard size.count == 2 else { throw fail("`canvas WxH`") }
            let shown = board.canvasSize
            return shown == CodableSize(width: size[0], height: size[1]) ? nil : "canvas is \(shown.width)x\(shown.height)"
        }
        guard words.count >= 2 else { throw fail("`expect LABEL PROPERTY [VALUE]`") }
        let id = try item(words[0], line).uuid
        let sticker = board.stickers.first { $0.id == id }
        let stroke = board.strokes.first { $0.id == id }
        let value = words.count > 2 ? words[2] : nil
        switch words[1] {
        case "deleted", "erased": return sticker == nil && stroke == nil ? nil : "\(words[0]) is visible"
        case "visible": return sticker != nil || stroke != nil ? nil : "\(words[0]) is not visible"
        case "at":
            let point = try ScenarioRunner.point(value ?? "", line)
            guard let sticker else { return "\(words[0]) is not a visible sticker" }
            return sticker.position == point ? nil : "\(words[0]) is at \(sticker.position.x),\(sticker.position.y)"
        case "scale":
            guard let sticker else { return "\(words[0]) is not a visible sticker" }
            return sticker.scale == (try ScenarioRunner.number(value, line)) ? nil : "\(words[0]) has scale \(sticker.scale)"
        case "rotation":
            guard let sticker else { return "\(words[0]) is not a visible sticker" }
            return sticker.rotationRadians == (try ScenarioRunner.number(value, line)) ? nil : "\(words[0]) has rotation \(sticker.rotationRadians)"
        case "image":
            guard let sticker, let png = ScenarioRunner.images[value ?? ""] else { return "\(words[0]) is not a visible sticker, or no such image" }
            return sticker.imageSHA256 == AssetHash.of(png).hex ? nil : "\(words[0]) shows another image"
        case "color":
            guard let stroke else { return "\(words[0]) is not a visible stroke" }
            return Color8(stroke.color) == Color8(try ScenarioRunner.color(value ?? "", line)) ? nil : "\(words[0]) has another colour"
        case "width":
            guard let stroke else { return "\(words[0]) is not a visible stroke" }
            return stroke.width == (try ScenarioRunner.number(value, line)) ? nil : "\(words[0]) has width \(stroke.width)"
        case "points":
            guard let stroke else { return "\(words[0]) is not a visible stroke" }
            return Double(stroke.points.count) == (try ScenarioRunner.number(value, line)) ? nil : "\(words[0]) has \(stroke.points.count) points"
        default:
            throw fail("unknown expectation `\(words[1])`")
        }
    }

    func label(for id: UUID) -> String {
        items.first { $0.value.uuid == id }?.key ?? String(id.uuidString.prefix(8))
    }

    static func describe(_ board: BoardSnapshot, labels: [String: ItemID]) -> String {
        func label(_ id: UUID) -> String { labels.first { $0.value.uuid == id }?.key ?? String(id.uuidString.prefix(8)) }
        var lines = ["  canvas \(board.canvasSize.width)x\(board.canvasSize.height)"]
        for id in board.paintOrder ?? [] {
            if let sticker = board.stickers.first(where: { $0.id == id }) {
                let image = images.first { AssetHash.of($0.value).hex == sticker.imageSHA256 }?.key ?? "?"
                lines.append("  sticker \(label(id)) at \(sticker.position.x),\(sticker.position.y) scale \(sticker.scale) rotation \(sticker.rotationRadians) image \(image)")
            } else if let stroke = board.strokes.first(where: { $0.id == id }) {
                lines.append("  stroke \(label(id)) \(stroke.points.count) points width \(stroke.width)")
            }
        }
        return lines.joined(separator: "\n")
    }
}
