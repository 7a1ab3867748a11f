import ArgumentParser
import Latchkey

/// An accessibility class (`kSecAttrAccessible`) as given to `--accessible`: a readable name or
/// Apple's raw `pdmn` value.
struct Accessibility: ExpressibleByArgument, Equatable {
    /// Apple's `pdmn` value ("ak", "ck", ...), which is also the `kSecAttrAccessible*` constant's value.
    var pdmn: String

    /// The readable names, in the order of Apple's classes, with their `kSecAttrAccessible*` values.
    static let named: [(name: String, pdmn: String)] = [
        ("when-unlocked", kSecAttrAccessibleWhenUnlocked as String),
        ("after-first-unlock", kSecAttrAccessibleAfterFirstUnlock as String),
        ("always", kSecAttrAccessibleAlways as String),
        ("when-unlocked-this-device-only", kSecAttrAccessibleWhenUnlockedThisDeviceOnly as String),
        ("after-first-unlock-this-device-only", kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly as String),
        ("always-this-device-only", kSecAttrAccessibleAlwaysThisDeviceOnly as String),
        ("when-passcode-set-this-device-only", kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly as String),
    ]

    /// Every `pdmn` value, in the order `status` and `dump-keychain` list them.
    static var allPdmn: [String] { named.map(\.pdmn) }

    init?(argument: String) {
        let lowered = argument.lowercased()
        if let match = Accessibility.named.first(where: { $0.name == lowered || $0.pdmn == lowered }) {
            pdmn = match.pdmn
        } else {
            return nil
        }
    }

    static var allValueStrings: [String] { named.map(\.name) + allPdmn }

    /// Help text shared by the add verbs; ArgumentParser lists the values from `allValueStrings`.
    static let help = ArgumentHelp(
        "Accessibility class (kSecAttrAccessible): a name or a raw pdmn value. New items default to when-unlocked; "
            + "with -U an existing item keeps its class unless this is given.",
        valueName: "class")
}
