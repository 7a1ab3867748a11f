import ArgumentParser
import Foundation
import Latchkey

/// `--access-control`: Apple's `SecAccessControlCreateFlags` as words separated by commas, in the
/// order one reads them (`biometry-any,or,device-passcode`), and how `find-*` and `dump-keychain`
/// print an item's access control (the same words, so what is printed can be given back).
enum AccessControlWords {
    /// Each word and its flag, in the order they are printed.
    static let words: [(word: String, flag: SecAccessControlCreateFlags)] = [
        ("user-presence", .userPresence),
        ("biometry-any", .biometryAny),
        ("biometry-current-set", .biometryCurrentSet),
        ("device-passcode", .devicePasscode),
        ("companion", .companion),
        ("or", .or),
        ("and", .and),
        ("private-key-usage", .privateKeyUsage),
        ("application-password", .applicationPassword),
    ]

    /// The words that are constraints (a user check), as opposed to conjunctions and modifiers.
    static let constraints: SecAccessControlCreateFlags = [
        .userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .companion,
    ]

    /// Help shared by the commands that take `--access-control`.
    static let help = ArgumentHelp(
        "Needs the user present to read or change the item's secret, or to use the key (kSecAttrAccessControl).",
        discussion: """
            Words separated by commas, Apple's flags: user-presence, biometry-any, \
            biometry-current-set, device-passcode, joined by or / and (several without either: \
            all of them), and private-key-usage for keys. Examples: user-presence; \
            biometry-any,or,device-passcode. The protection class is --accessible's \
            (default when-unlocked). See latchkey(1), ACCESS CONTROL.
            """,
        valueName: "words")

    /// The flags `text` names; a `ValidationError` (a usage error) for an unknown word or a
    /// combination `SecAccessControlCreateWithFlags` refuses, saying which.
    static func parse(_ text: String) throws(ValidationError) -> SecAccessControlCreateFlags {
        var flags: SecAccessControlCreateFlags = []
        for word in text.split(separator: ",", omittingEmptySubsequences: false) {
            let name = word.trimmingCharacters(in: .whitespaces).lowercased()
            // application-password needs a password from the application (LAContext), which a command
            // line cannot give safely; companion is never satisfied on Linux. Neither is offered here.
            guard let match = words.first(where: { $0.word == name }), match.flag != .applicationPassword,
                match.flag != .companion
            else {
                let known = words.map(\.word).filter { $0 != "application-password" && $0 != "companion" }
                throw ValidationError(
                    "--access-control: unknown word '\(word)' (known: \(known.joined(separator: ", ")))")
            }
            flags.insert(match.flag)
        }
        let checks = flags.intersection(constraints)
        let count = words.filter { checks.contains($0.flag) }.count
        if flags.contains(.or) && flags.contains(.and) {
            throw ValidationError("--access-control: give 'or' or 'and', not both")
        }
        if flags.contains(.biometryAny) && flags.contains(.biometryCurrentSet) {
            throw ValidationError("--access-control: biometry-any and biometry-current-set exclude each other")
        }
        if flags.contains(.userPresence) && count > 1 {
            throw ValidationError(
                "--access-control: user-presence already means biometry or the password; it combines with no "
                    + "other check (use biometry-any,or,device-passcode)")
        }
        if count == 0 {
            throw ValidationError(
                "--access-control: name a check (user-presence, biometry-any, biometry-current-set, device-passcode)")
        }
        if (flags.contains(.or) || flags.contains(.and)) && count < 2 {
            throw ValidationError("--access-control: 'or' and 'and' join two checks")
        }
        return flags
    }

    /// The access control for `flags` under the protection class `pdmn` (a `kSecAttrAccessible` value).
    static func make(_ flags: SecAccessControlCreateFlags, protection pdmn: String) throws(ExitCode)
        -> SecAccessControl
    {
        var error: Unmanaged<CFError>?
        guard let control = SecAccessControlCreateWithFlags(nil, pdmn as CFString, flags, &error) else {
            throw keyFailure("SecAccessControlCreateWithFlags", error)
        }
        return control
    }

    /// An access control as the words that make it, with its protection class:
    /// `protection=ak biometry-any,or,device-passcode`.
    static func describe(_ control: SecAccessControl) -> String {
        let flags = control.flags
        let checks = words.filter { constraints.contains($0.flag) && flags.contains($0.flag) }.map(\.word)
        let joiner = flags.contains(.or) ? ",or," : flags.contains(.and) ? ",and," : ","
        var parts: [String] = []
        if !checks.isEmpty { parts.append(checks.joined(separator: joiner)) }
        if flags.contains(.privateKeyUsage) { parts.append("private-key-usage") }
        if flags.contains(.applicationPassword) { parts.append("application-password") }
        // A conjunction without two checks is still one of the item's flags: shown, not dropped.
        if checks.count < 2 {
            if flags.contains(.or) { parts.append("or") }
            if flags.contains(.and) { parts.append("and") }
        }
        let unknown = flags.subtracting(words.reduce(into: SecAccessControlCreateFlags()) { $0.formUnion($1.flag) })
        if !unknown.isEmpty { parts.append("0x" + String(unknown.rawValue, radix: 16)) }
        let shown = parts.isEmpty ? "none" : parts.joined(separator: ",")
        return "protection=\(control.protection as String) \(shown)"
    }
}
