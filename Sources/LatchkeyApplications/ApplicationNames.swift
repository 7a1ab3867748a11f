/// The forms of the names an application file holds, and of the groups a sandboxed application gets
/// without a file. Kept strict so that a name means one thing when it is matched, stored and printed.
package enum ApplicationNames {
    /// Bytes in an application id, a Flatpak id or an access group's name.
    package static let maximumNameBytes = 255
    /// Groups in one `AccessGroups=`.
    package static let maximumGroups = 64
    /// Bytes in an `Executable=` path (PATH_MAX, its terminating NUL excluded).
    package static let maximumPathBytes = 4095

    /// An `Id=`: ASCII letters, digits, `.`, `_` and `-`, starting with a letter or a digit (a
    /// reverse-DNS name such as `org.example.Mail` fits).
    package static func isValidApplicationID(_ id: String) -> Bool {
        guard let first = id.unicodeScalars.first, isASCIILetterOrDigit(first), id.utf8.count <= maximumNameBytes
        else { return false }
        return id.unicodeScalars.allSatisfy { isASCIILetterOrDigit($0) || $0 == "." || $0 == "_" || $0 == "-" }
    }

    /// A Flatpak application id as Flatpak accepts it: at least three dot-separated elements, each of
    /// ASCII letters, digits, `_` and `-`, not starting with a digit or `-`. Having dots, it can never
    /// be `default` or a snap's `snap.NAME`, so a Flatpak's own group cannot be one of those.
    package static func isValidFlatpakID(_ id: String) -> Bool {
        guard id.utf8.count <= maximumNameBytes else { return false }
        let elements = id.split(separator: ".", omittingEmptySubsequences: false)
        guard elements.count >= 3 else { return false }
        return elements.allSatisfy { element in
            guard let first = element.unicodeScalars.first, isASCIILetter(first) || first == "_" else { return false }
            return element.unicodeScalars.allSatisfy { isASCIILetterOrDigit($0) || $0 == "_" || $0 == "-" }
        }
    }

    /// A snap's name as snapd accepts it: 2 to 40 lowercase ASCII letters, digits and `-`, at least one
    /// letter, no `-` at either end or twice in a row.
    package static func isValidSnapName(_ name: String) -> Bool {
        let scalars = Array(name.unicodeScalars)
        guard (2...40).contains(scalars.count), scalars.first != "-", scalars.last != "-", !name.contains("--")
        else { return false }
        guard scalars.contains(where: { ("a"..."z").contains($0) }) else { return false }
        return scalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }
    }

    /// The group a snap without an application file gets: `snap.NAME`. Not the bare name, which could
    /// be `default` or an administrator's group; with its one dot it cannot be a Flatpak id (which has
    /// at least two) either.
    package static func snapGroup(_ name: String) -> String {
        "snap." + name
    }

    /// An access group's name: 1 to 255 bytes of UTF-8 without control, format (bidirectional overrides,
    /// zero-width characters) or line-separator characters, and no white space at either end, so that
    /// two groups that print alike are the same group.
    package static func isValidAccessGroup(_ group: String) -> Bool {
        guard !group.isEmpty, group.utf8.count <= maximumNameBytes else { return false }
        guard let first = group.unicodeScalars.first, let last = group.unicodeScalars.last,
            !first.properties.isWhitespace, !last.properties.isWhitespace
        else { return false }
        return !group.unicodeScalars.contains(where: isInvisibleOrControl)
    }

    /// An `Executable=` path: absolute and normalized (no empty, `.` or `..` component, no trailing
    /// `/`), at most PATH_MAX, without control or format characters. The path is matched against what
    /// the kernel reports for a process, which is always in this form.
    package static func isValidExecutablePath(_ path: String) -> Bool {
        isNormalizedAbsolutePath(path)
    }

    /// An absolute path with no empty, `.` or `..` component and no trailing `/`, at most PATH_MAX,
    /// without control or format characters: the form of `Executable=` and of the directories a
    /// registry is loaded from.
    package static func isNormalizedAbsolutePath(_ path: String) -> Bool {
        guard path.hasPrefix("/"), path.count > 1, path.utf8.count <= maximumPathBytes else { return false }
        guard !path.unicodeScalars.contains(where: isInvisibleOrControl) else { return false }
        let components = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        return components.allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
    }

    /// Control (Cc), format (Cf: bidirectional controls, zero-width joiners) and line or paragraph
    /// separator characters: none may appear in a name, where they could make two names print alike.
    static func isInvisibleOrControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }

    private static func isASCIILetter(_ c: Unicode.Scalar) -> Bool {
        ("A"..."Z").contains(c) || ("a"..."z").contains(c)
    }

    private static func isASCIILetterOrDigit(_ c: Unicode.Scalar) -> Bool {
        isASCIILetter(c) || ("0"..."9").contains(c)
    }
}
