import Foundation
import Latchkey

/// Renders items the way macOS `security` does, one attribute per line, in a stable order:
///
///     class: "genp"
///     attributes:
///         "acct"<blob>="alice"
///         "cdat"<timedate>="2025-01-31T09:15:02Z"
///         "svce"<blob>="example.com"
///     password: "hunter2"
///
/// Types: `<blob>` strings and data (data that is not UTF-8 prints as 0x followed by hex), `<int>`
/// numbers, `<bool>` booleans, `<timedate>` dates in UTC, `<access-control>` an item's
/// kSecAttrAccessControl as its protection class and `--access-control` words
/// (`"accc"<access-control>="protection=ak user-presence"`). Quotes, backslashes and control
/// characters in values are escaped (`\"`, `\\`, `\012`), so every attribute stays on one line.
enum ItemPrinter {
    /// Keys of a result dictionary that are not attributes.
    static let nonAttributeKeys: Set<String> = [
        kSecValueData as String, kSecValuePersistentRef as String, kSecClass as String,
    ]

    /// One item: its class, its attributes sorted by name and, when `secret` is given, its password.
    static func render(itemClass: String, attributes: [String: Any], secret: Data?) -> String {
        var lines = ["class: \(quoted(itemClass))", "attributes:"]
        for key in attributes.keys.sorted() where !nonAttributeKeys.contains(key) {
            lines.append("    \(quoted(key))\(typed(attributes[key]!))")
        }
        if let secret { lines.append("password: \(bytes(secret))") }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A result dictionary as Swift values with string keys.
    static func dictionary(_ object: Any?) -> [String: Any]? {
        guard let object = object as? NSDictionary else { return nil }
        var result: [String: Any] = [:]
        for (key, value) in object {
            if let name = key as? String { result[name] = value }
        }
        return result
    }

    /// `<type>=value` for one attribute value.
    static func typed(_ value: Any) -> String {
        let object = value as AnyObject
        if object === kCFBooleanTrue { return "<bool>=true" }
        if object === kCFBooleanFalse { return "<bool>=false" }
        if let number = value as? NSNumber {
            let type = String(cString: number.objCType)
            if type == "d" || type == "f" { return "<double>=\(number.doubleValue)" }
            return "<int>=\(number.int64Value)"
        }
        if let date = value as? Date { return "<timedate>=\(quoted(timestamp(date)))" }
        if let data = value as? Data { return "<blob>=\(bytes(data))" }
        if let string = value as? String { return "<blob>=\(quoted(string))" }
        if let control = value as? SecAccessControl {
            return "<access-control>=\(quoted(AccessControlWords.describe(control)))"
        }
        return "<?>=\(quoted(String(describing: value)))"
    }

    /// Data as a quoted string when it is UTF-8, else as hex.
    static func bytes(_ data: Data) -> String {
        if let string = String(validating: data, as: UTF8.self) { return quoted(string) }
        return "0x" + data.map { String(format: "%02X", $0) }.joined()
    }

    /// A string in double quotes with `"`, `\` and control characters escaped (control characters as
    /// three-digit octal, as `security` prints them).
    static func quoted(_ string: String) -> String {
        var result = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let octal = String(scalar.value, radix: 8)
                result += "\\" + String(repeating: "0", count: 3 - octal.count) + octal
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    /// A date as ISO 8601 in UTC, whole seconds.
    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }

    /// Writes raw bytes to standard output (a password may not be valid UTF-8, so no `print`).
    static func writeRaw(_ data: Data) {
        FileHandle.standardOutput.write(data)
    }
}
