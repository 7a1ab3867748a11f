/// The parts of a Flatpak sandbox's `/.flatpak-info` that name its application, read the way
/// xdg-desktop-portal reads them (`xdp_app_info_flatpak_new`): a key file whose `[Application]`
/// group's `name` is the application id, or the `[Runtime]` group's when that group is there (a runtime
/// run as its own sandbox); the `[Instance]` group's `instance-id` must be there too, or the file is
/// not one that `flatpak run` wrote.
package struct FlatpakInfo: Sendable, Equatable {
    /// The file's name at the sandbox's root.
    static let fileName = ".flatpak-info"
    /// A longer file is not read: flatpak writes a few KiB (the application's permissions among them).
    static let cap = 64 * 1024

    /// The application id (`org.example.App`), valid by Flatpak's own rules (`isValidApplicationID`).
    package var applicationID: String

    /// Parses a key file; nil when it names no valid application, or is not UTF-8.
    package init?(_ bytes: [UInt8]) {
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        var group = ""
        var names: [String: String] = [:]  // group -> its `name`, the last one written (as GKeyFile)
        var instance: String?
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = rawLine.drop(while: { $0 == " " || $0 == "\t" })
            if line.isEmpty || line.first == "#" { continue }
            if line.first == "[" {
                guard line.last == "]" else { return nil }
                group = String(line.dropFirst().dropLast())
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { return nil }
            let key = line[..<equals].trimmingSpaces, value = line[line.index(after: equals)...].trimmingSpaces
            if key == "name" && (group == "Application" || group == "Runtime") {
                names[group] = String(value)
            } else if key == "instance-id" && group == "Instance" {
                instance = String(value)
            }
        }
        guard let instance, !instance.isEmpty,
            let id = names["Runtime"] ?? names["Application"], Self.isValidApplicationID(id)
        else { return nil }
        applicationID = id
    }

    /// Flatpak's `flatpak_is_valid_name`: at most 255 bytes; three or more non-empty elements separated
    /// by `.`; each of `A-Z a-z 0-9 _` and not starting with a digit; `-` allowed in the last element
    /// only. Every installed application's id passes (Flatpak installs no other), and an id that does
    /// is a D-Bus name and a safe file name.
    package static func isValidApplicationID(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard !bytes.isEmpty, bytes.count <= 255 else { return false }
        let elements = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard elements.count >= 3 else { return false }
        for (index, element) in elements.enumerated() {
            guard let first = element.first, !isDigit(first) else { return false }
            let last = index == elements.count - 1
            for byte in element where !(isLetter(byte) || isDigit(byte) || byte == UInt8(ascii: "_")) {
                guard last && byte == UInt8(ascii: "-") else { return false }
            }
        }
        return true
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    private static func isLetter(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }
}

extension Substring {
    /// Without spaces and tabs at either end (GKeyFile's trimming of keys and values).
    fileprivate var trimmingSpaces: Substring {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !blank($0) }), let last = lastIndex(where: { !blank($0) }) else {
            return self[endIndex...]
        }
        return self[first...last]
    }
}
