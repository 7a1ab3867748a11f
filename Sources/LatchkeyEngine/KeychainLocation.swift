import LatchkeyCrypto
import LatchkeyModel

/// Where a keychain's files live: the keybag and the SQLite store in one directory
/// (by default `$XDG_DATA_HOME/latchkey`, chosen by the agent).
public struct KeychainLocation: Sendable, Equatable {
    public var directory: String
    public var keybagPath: String { directory + "/keybag" }
    public var databasePath: String { directory + "/keychain.db" }
    /// Written by pam_latchkey when the login password changed without the old one (or a login
    /// succeeded with a password that does not open the keychain); removed when they agree again.
    public var outOfStepMarkerPath: String { directory + "/password-out-of-step" }

    public init(directory: String) {
        self.directory = directory
    }
}

/// The state of one accessibility class, as `latchkey status` shows it.
public struct KeychainStatus: Sendable, Equatable {
    public var location: KeychainLocation
    public var exists: Bool
    /// Which class keys are held right now.
    public var available: [ProtectionClass: Bool]
    /// Why the keychain cannot be used, when its files are damaged.
    public var problem: String?
    public var argon2: Argon2Parameters?
    /// Whether the ThisDeviceOnly classes are bound to this machine (docs/KEYBAG.md "Device binding").
    public var deviceBound: Bool = false
    /// Whether the agent holds this machine's device factor (handed over by pam_latchkey).
    public var deviceFactorHeld: Bool = false
    /// The first line of the out-of-step marker, when the login password and the keychain password
    /// are known to differ.
    public var passwordOutOfStep: String?
}
