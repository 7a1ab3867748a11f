/// A file in the freedesktop.org key-file syntax (the Desktop Entry Specification's "Basic format",
/// which `.desktop` files and GLib's `GKeyFile` use): `[Group]` headers, `Key=Value` entries, `#`
/// comments and blank lines.
///
/// The parser is strict, because application files grant access to secrets: a file is either read
/// whole or refused with the first problem and its line, never half-read. It refuses what GLib
/// tolerates only where tolerance could hide a mistake: two groups or two keys of the same name (which
/// one would count?), an entry before the first group, bytes that are not UTF-8, control characters
/// (tabs and carriage returns included), a byte-order mark. White space at the start of a line and
/// around `=` is ignored, as the specification and GLib do.
///
/// Localized entries (`Key[xx]=...`) are checked for syntax and then dropped: nothing this module reads
/// is localized. Values are kept raw; `string(_:)` and `list(_:)` unescape them on request.
package struct KeyFile: Sendable, Equatable {
    /// A `[Name]` section and its entries (localized ones dropped), keys unique.
    package struct Group: Sendable, Equatable {
        package var name: String
        /// The raw values (escapes not yet resolved), by key.
        package var entries: [String: String]
        /// The keys in file order, for messages that name the first of something.
        package var keys: [String]
        /// The line of each key's entry, for messages about its value.
        package var lines: [String: Int]
    }

    /// Caps on what one file may hold, checked as it is read, so that a large or repetitive file costs
    /// bounded work. Application files are a few lines long; these leave room to spare.
    package enum Limits {
        /// Bytes in a file; the caller reads at most one more, to tell "too large" from "exactly full".
        package static let fileBytes = 64 * 1024
        /// Bytes in one line (without its newline): room for a key and a path of PATH_MAX bytes.
        package static let lineBytes = 8192
        /// Groups in a file.
        package static let groups = 16
        /// Entries in a group, localized ones included.
        package static let entriesPerGroup = 128
    }

    /// The groups in file order.
    package var groups: [Group]

    /// The group named `name`, if the file has one.
    package func group(_ name: String) -> Group? {
        groups.first { $0.name == name }
    }

    /// Parses `bytes`: the whole file or nothing.
    package static func parse(_ bytes: [UInt8]) throws(KeyFileError) -> KeyFile {
        guard bytes.count <= Limits.fileBytes else {
            throw KeyFileError(line: nil, .tooLarge(bytes: bytes.count, limit: Limits.fileBytes))
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw KeyFileError(line: firstInvalidUTF8Line(bytes), .notUTF8)
        }
        if text.unicodeScalars.first == "\u{FEFF}" { throw KeyFileError(line: 1, .byteOrderMark) }
        var groups: [Group] = []
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }  // the newline that ends the last line
        for (index, rawLine) in lines.enumerated() {
            let number = index + 1
            func fail(_ problem: KeyFileError.Problem) -> KeyFileError { KeyFileError(line: number, problem) }
            guard rawLine.utf8.count <= Limits.lineBytes else { throw fail(.lineTooLong(limit: Limits.lineBytes)) }
            if let control = rawLine.unicodeScalars.first(where: isForbiddenInFile) {
                throw fail(.controlCharacter(control.value))
            }
            let line = rawLine.drop { $0 == " " }
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                let name = try groupName(line).get(orThrow: fail)
                guard !groups.contains(where: { $0.name == name }) else { throw fail(.duplicateGroup(name)) }
                guard groups.count < Limits.groups else { throw fail(.tooManyGroups(limit: Limits.groups)) }
                groups.append(Group(name: name, entries: [:], keys: [], lines: [:]))
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { throw fail(.notAnEntry) }
            guard !groups.isEmpty else { throw fail(.entryBeforeGroup) }
            let key = String(line[..<equals].reversed().drop { $0 == " " }.reversed())
            let value = String(line[line.index(after: equals)...].drop { $0 == " " })
            let (baseKey, isLocalized) = try entryKey(key).get(orThrow: fail)
            var group = groups[groups.count - 1]
            guard group.keys.count < Limits.entriesPerGroup else {
                throw fail(.tooManyEntries(group: group.name, limit: Limits.entriesPerGroup))
            }
            guard !group.keys.contains(key) else { throw fail(.duplicateKey(key, group: group.name)) }
            group.keys.append(key)
            // Localized variants count against the caps and must not repeat, but nothing here reads them.
            if !isLocalized {
                group.entries[baseKey] = value
                group.lines[baseKey] = number
            }
            groups[groups.count - 1] = group
        }
        // Drop the localized keys from `keys`: callers see only the entries they can read.
        return KeyFile(
            groups: groups.map { group in
                Group(
                    name: group.name, entries: group.entries, keys: group.keys.filter { group.entries[$0] != nil },
                    lines: group.lines)
            })
    }

    /// Control characters are refused everywhere (a tab or a carriage return included: CRLF files are
    /// refused with a message saying so) so that no value can hide one; escapes in values are the way
    /// to write them, and the application file's own rules then decide whether a value may hold one.
    private static func isForbiddenInFile(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.generalCategory == .control
    }

    /// The name of a `[Name]` line: ASCII without `[`, `]` or control characters, non-empty, and
    /// nothing after the `]`.
    private static func groupName(_ line: Substring) -> Result<String, KeyFileError.Problem> {
        guard line.hasSuffix("]"), line.count >= 2 else { return .failure(.badGroupHeader) }
        let name = line.dropFirst().dropLast()
        guard !name.isEmpty, name.unicodeScalars.allSatisfy({ $0.isASCII && $0 != "[" && $0 != "]" }) else {
            return .failure(.badGroupHeader)
        }
        return .success(String(name))
    }

    /// A key is `[A-Za-z0-9-]+`, optionally followed by a locale in brackets (`Name[de_DE.UTF-8@euro]`).
    /// Returns the key without its locale, and whether it had one.
    private static func entryKey(_ key: String) -> Result<(String, Bool), KeyFileError.Problem> {
        func isKeyCharacter(_ c: Unicode.Scalar) -> Bool {
            ("A"..."Z").contains(c) || ("a"..."z").contains(c) || ("0"..."9").contains(c) || c == "-"
        }
        func isLocaleCharacter(_ c: Unicode.Scalar) -> Bool {
            isKeyCharacter(c) || c == "_" || c == "." || c == "@"
        }
        var base = Substring(key)
        var isLocalized = false
        if let open = key.firstIndex(of: "[") {
            let locale = key[key.index(after: open)...]
            guard locale.hasSuffix("]"), locale.count >= 2,
                locale.dropLast().unicodeScalars.allSatisfy(isLocaleCharacter)
            else { return .failure(.badKey(key)) }
            base = key[..<open]
            isLocalized = true
        }
        guard !base.isEmpty, base.unicodeScalars.allSatisfy(isKeyCharacter) else { return .failure(.badKey(key)) }
        return .success((String(base), isLocalized))
    }

    /// The line (1-based) of the first byte that breaks UTF-8, for the message.
    private static func firstInvalidUTF8Line(_ bytes: [UInt8]) -> Int? {
        var start = 0
        var line = 1
        for (index, byte) in bytes.enumerated() where byte == 10 {
            if String(validating: bytes[start..<index], as: UTF8.self) == nil { return line }
            start = index + 1
            line += 1
        }
        return line
    }
}

extension Result {
    /// The success value, or the failure turned into an error by `wrap` and thrown.
    fileprivate func get<E: Error>(orThrow wrap: (Failure) -> E) throws(E) -> Success {
        switch self {
        case .success(let value): return value
        case .failure(let failure): throw wrap(failure)
        }
    }
}
