/// An accessibility class (`kSecAttrAccessible`, stored as `pdmn`). Each has its own class key.
///
/// The raw values are the class identifiers used on disk (keybag entries, store rows) and on the wire;
/// they are part of the file formats in docs/KEYBAG.md and must never be renumbered.
package enum ProtectionClass: UInt8, CaseIterable, Sendable, Comparable {
    /// `kSecAttrAccessibleWhenUnlocked` ("ak"), the default.
    case whenUnlocked = 1
    /// `kSecAttrAccessibleAfterFirstUnlock` ("ck").
    case afterFirstUnlock = 2
    /// `kSecAttrAccessibleAlways` ("dk"), deprecated by Apple.
    case always = 3
    /// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly` ("aku").
    case whenUnlockedThisDeviceOnly = 4
    /// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly` ("cku").
    case afterFirstUnlockThisDeviceOnly = 5
    /// `kSecAttrAccessibleAlwaysThisDeviceOnly` ("dku"), deprecated by Apple.
    case alwaysThisDeviceOnly = 6
    /// `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly` ("akpu").
    case whenPasscodeSetThisDeviceOnly = 7

    /// Apple's `pdmn` string for the class.
    package var pdmn: String {
        switch self {
        case .whenUnlocked: "ak"
        case .afterFirstUnlock: "ck"
        case .always: "dk"
        case .whenUnlockedThisDeviceOnly: "aku"
        case .afterFirstUnlockThisDeviceOnly: "cku"
        case .alwaysThisDeviceOnly: "dku"
        case .whenPasscodeSetThisDeviceOnly: "akpu"
        }
    }

    /// The class for an Apple `pdmn` string, or nil if there is none.
    package init?(pdmn: String) {
        guard let match = ProtectionClass.allCases.first(where: { $0.pdmn == pdmn }) else { return nil }
        self = match
    }

    /// Human-readable name, as `latchkey status` prints it.
    package var displayName: String {
        switch self {
        case .whenUnlocked: "WhenUnlocked"
        case .afterFirstUnlock: "AfterFirstUnlock"
        case .always: "Always"
        case .whenUnlockedThisDeviceOnly: "WhenUnlockedThisDeviceOnly"
        case .afterFirstUnlockThisDeviceOnly: "AfterFirstUnlockThisDeviceOnly"
        case .alwaysThisDeviceOnly: "AlwaysThisDeviceOnly"
        case .whenPasscodeSetThisDeviceOnly: "WhenPasscodeSetThisDeviceOnly"
        }
    }

    /// Whether the class key is protected by the keychain password (false for the Always classes,
    /// which are available whenever the agent runs, like Apple's class D).
    package var requiresPassword: Bool {
        switch self {
        case .always, .alwaysThisDeviceOnly: false
        default: true
        }
    }

    /// Whether the class belongs to the `WhenUnlocked` family that a screen lock (`latchkey lock`) drops.
    package var isWhenUnlockedFamily: Bool {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: true
        default: false
        }
    }

    /// Whether the class is one of the `...ThisDeviceOnly` variants.
    package var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly,
            .whenPasscodeSetThisDeviceOnly:
            true
        default: false
        }
    }

    package static func < (lhs: ProtectionClass, rhs: ProtectionClass) -> Bool { lhs.rawValue < rhs.rawValue }
}
