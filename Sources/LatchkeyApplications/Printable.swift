/// Text from files and file names made safe to print: `latchkey apps` shows what a file or directory
/// holds, and a name with an escape sequence must not be able to rewrite the terminal or pass for
/// another name.
package enum Printable {
    /// `text` with control, format and separator characters and backslashes written as `\u{…}` escapes
    /// (a backslash as `\\`).
    package static func escaped(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            if scalar == "\\" {
                result += "\\\\"
            } else if ApplicationNames.isInvisibleOrControl(scalar) {
                result += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// `escaped(text)` in single quotes.
    package static func quoted(_ text: String) -> String {
        "'" + escaped(text) + "'"
    }

    /// A file name's bytes as text: UTF-8 escaped as above; any byte that is not part of valid UTF-8 as
    /// `\xHH`.
    package static func name(_ bytes: [UInt8]) -> String {
        if let text = String(validating: bytes, as: UTF8.self) { return escaped(text) }
        return bytes.map { $0 < 0x80 ? escaped(String(UnicodeScalar($0))) : "\\x" + hex2($0) }.joined()
    }

    private static func hex2(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16)
        return digits.count == 1 ? "0" + digits : digits
    }
}
