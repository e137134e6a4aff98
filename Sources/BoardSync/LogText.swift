/// Text for an operator's log, made safe: what peers control (error texts, display names,
/// header names, board names refused as invalid) must never forge a log line, move the
/// cursor, recolour a terminal or reorder what follows. Every C0 and C1 control (newlines and
/// ESC included), DEL, and the Unicode controls that change direction or hide text (bidi
/// embeddings, overrides and isolates, the line and paragraph separators, zero-width joiners
/// and the BOM) is written as `\u{XX}`. Escaping is idempotent (a backslash is kept as is), so
/// layers may each apply it: hosts apply it to every line they log (`SyncHost`, `WebView`,
/// `RedisCluster`, the command line's log), so one forgotten call site cannot undo it.
package enum LogText {
    /// `text` with every control and invisible direction mark escaped (see the type).
    package static func escaped(_ text: String) -> String {
        // The common case (a line of plain text) is returned as is, without building a copy.
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            if needsEscape(scalar) {
                out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// A peer's text quoted for a log line: escaped and cut to `limit` characters, a backslash
    /// written `\\` and a quote `\'`, so the quoted value cannot end early and what follows it
    /// cannot pose as a field of the line (`ServeLog` reads fields only outside quotes).
    package static func quoted(_ text: String, limit: Int = 200) -> String {
        let cut = text.count > limit ? String(text.prefix(limit)) + "…" : text
        var marked = ""
        for character in cut {
            if character == "\\" || character == "'" { marked.append("\\") }
            marked.append(character)
        }
        return "'" + escaped(marked) + "'"
    }

    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: return true          // C0, DEL, C1
        case 0x200B...0x200F: return true                    // zero-width space/joiners, LRM, RLM
        case 0x2028...0x202E: return true                    // line/paragraph separators, embeddings, overrides
        case 0x2060...0x2069: return true                    // word joiner, invisible operators, isolates
        case 0x061C, 0xFEFF, 0x00AD, 0x180E: return true     // Arabic letter mark, BOM, soft hyphen, Mongolian vowel separator
        case 0xFFF9...0xFFFB: return true                    // interlinear annotation marks
        case 0xE0000...0xE007F: return true                  // tag characters
        default: return false
        }
    }
}
