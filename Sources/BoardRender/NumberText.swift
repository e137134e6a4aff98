/// Shortest fixed notation with at most three decimals ("12", "0.5", "-3.125"), written without
/// Foundation's formatter: exports write hundreds of thousands of coordinates.
enum NumberText {
    static func append(_ value: Double, to out: inout [UInt8]) {
        guard value.isFinite else { out.append(UInt8(ascii: "0")); return }
        var thousandths = (value * 1000).rounded()
        guard abs(thousandths) < 9e15 else {
            out += Array(String(Int64(value.rounded())).utf8)
            return
        }
        if thousandths == 0 { thousandths = 0 }  // no "-0"
        var whole = Int64(thousandths)
        if whole < 0 { out.append(UInt8(ascii: "-")); whole = -whole }
        let integer = whole / 1000
        var fraction = whole % 1000
        appendDigits(integer, to: &out)
        guard fraction != 0 else { return }
        out.append(UInt8(ascii: "."))
        var digits = 3
        while fraction % 10 == 0 { fraction /= 10; digits -= 1 }
        var divisor: Int64 = 1
        for _ in 1..<digits { divisor *= 10 }
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(fraction / divisor % 10))
            divisor /= 10
        }
    }

    static func appendDigits(_ value: Int64, to out: inout [UInt8]) {
        if value < 10 { out.append(UInt8(ascii: "0") + UInt8(value)); return }
        appendDigits(value / 10, to: &out)
        out.append(UInt8(ascii: "0") + UInt8(value % 10))
    }

    static func string(_ value: Double) -> String {
        var bytes: [UInt8] = []
        append(value, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
