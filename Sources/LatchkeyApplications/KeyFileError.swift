/// Why a key file was refused, and on which line (1-based; nil for the file as a whole).
package struct KeyFileError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong.
    package enum Problem: Error, Sendable, Equatable {
        case tooLarge(bytes: Int, limit: Int)
        case notUTF8
        case byteOrderMark
        case lineTooLong(limit: Int)
        /// A control character (its code point): a tab, a carriage return, an escape...
        case controlCharacter(UInt32)
        /// A line starting with `[` that is not `[Name]` (ASCII, no brackets inside, nothing after).
        case badGroupHeader
        case duplicateGroup(String)
        case tooManyGroups(limit: Int)
        /// A line that is neither blank, a comment, a group header nor `Key=Value`.
        case notAnEntry
        case entryBeforeGroup
        /// A key outside `[A-Za-z0-9-]+`, or a malformed `[locale]` after it.
        case badKey(String)
        case duplicateKey(String, group: String)
        case tooManyEntries(group: String, limit: Int)
        /// A backslash followed by something that is not a known escape (or by nothing), in `key`.
        case badEscape(key: String)
    }

    package var line: Int?
    package var problem: Problem

    package init(line: Int?, _ problem: Problem) {
        self.line = line
        self.problem = problem
    }

    package var description: String {
        let message =
            switch problem {
            case .tooLarge(let bytes, let limit): "larger than \(limit) bytes (\(bytes) or more)"
            case .notUTF8: "not valid UTF-8"
            case .byteOrderMark: "starts with a byte-order mark"
            case .lineTooLong(let limit): "a line longer than \(limit) bytes"
            case .controlCharacter(let value) where value == 13:
                "a carriage return (the file must have Unix line ends)"
            case .controlCharacter(let value): "a control character (U+\(hex4(value)))"
            case .badGroupHeader: "a malformed group header (expected [Name])"
            case .duplicateGroup(let name): "a second [\(name)] group"
            case .tooManyGroups(let limit): "more than \(limit) groups"
            case .notAnEntry: "neither a comment, a [Group] nor a Key=Value entry"
            case .entryBeforeGroup: "an entry before the first [Group]"
            case .badKey(let key): "a malformed key '\(key)' (letters, digits and '-' only)"
            case .duplicateKey(let key, let group): "a second \(key)= in [\(group)]"
            case .tooManyEntries(let group, let limit): "more than \(limit) entries in [\(group)]"
            case .badEscape(let key): "an unknown escape in \(key)= (known: \\s \\n \\t \\r \\\\, and \\; in lists)"
            }
        return line.map { "line \($0): \(message)" } ?? message
    }

    private func hex4(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

extension KeyFile.Group {
    /// The value of `key` as a string, its escapes resolved (`\s \n \t \r \\`); nil if the group has
    /// no such key.
    package func string(_ key: String) throws(KeyFileError) -> String? {
        guard let raw = entries[key] else { return nil }
        guard let elements = Self.unescape(raw, listSeparator: false), let value = elements.first else {
            throw KeyFileError(line: lines[key], .badEscape(key: key))
        }
        return value
    }

    /// The value of `key` as a `;`-separated list, escapes resolved (`\;` is a semicolon inside an
    /// element); a `;` at the very end ends the last element rather than starting an empty one, so
    /// `a;b` and `a;b;` are the same list. Nil if the group has no such key; `[]` for an empty value.
    package func list(_ key: String) throws(KeyFileError) -> [String]? {
        guard let raw = entries[key] else { return nil }
        guard var elements = Self.unescape(raw, listSeparator: true) else {
            throw KeyFileError(line: lines[key], .badEscape(key: key))
        }
        if elements.last == "" { elements.removeLast() }
        return elements
    }

    /// Resolves escapes; with `listSeparator`, splits at unescaped `;` too. Nil for an unknown escape
    /// or a trailing backslash. Without `listSeparator` the result is one element.
    private static func unescape(_ raw: String, listSeparator: Bool) -> [String]? {
        var elements: [String] = []
        var current = ""
        var scalars = raw.unicodeScalars.makeIterator()
        while let scalar = scalars.next() {
            switch scalar {
            case "\\":
                switch scalars.next() {
                case "s": current.unicodeScalars.append(" ")
                case "n": current.unicodeScalars.append("\n")
                case "t": current.unicodeScalars.append("\t")
                case "r": current.unicodeScalars.append("\r")
                case "\\": current.unicodeScalars.append("\\")
                case ";" where listSeparator: current.unicodeScalars.append(";")
                default: return nil
                }
            case ";" where listSeparator:
                elements.append(current)
                current = ""
            default:
                current.unicodeScalars.append(scalar)
            }
        }
        elements.append(current)
        return elements
    }
}
