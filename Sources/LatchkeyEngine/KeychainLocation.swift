import LatchkeyCrypto
import LatchkeyModel

/// Where a keychain's files live: the keybag and the SQLite store in one directory
/// (by default `$XDG_DATA_HOME/latchkey`, chosen by the agent).
package struct KeychainLocation: Sendable, Equatable {
    package var directory: String
    package var keybagPath: String { directory + "/keybag" }
    package var databasePath: String { directory + "/keychain.db" }
    /// Written by pam_latchkey when the login password changed without the old one (or a login
    /// succeeded with a password that does not open the keychain); removed when they agree again.
    package var outOfStepMarkerPath: String { directory + "/password-out-of-step" }
    /// Held with `flock` by the one agent that serves this keychain (the agent's business; the engine
    /// never opens it). It lives with the keychain, not with the socket, so that two agents started
    /// with different runtime directories still cannot serve one keychain.
    package var agentLockPath: String { directory + "/agent.lock" }

    package init(directory: String) {
        self.directory = directory
    }
}

/// The state of one accessibility class, as `latchkey status` shows it.
package struct KeychainStatus: Sendable, Equatable {
    package var location: KeychainLocation
    package var exists: Bool
    /// Which class keys are held right now.
    package var available: [ProtectionClass: Bool]
    /// Why the keychain cannot be used, when its files are damaged.
    package var problem: String?
    package var argon2: Argon2Parameters?
    /// Whether the ThisDeviceOnly classes are bound to this machine (docs/KEYBAG.md "Device binding").
    package var deviceBound: Bool = false
    /// Whether the agent holds this machine's device factor (handed over by pam_latchkey).
    package var deviceFactorHeld: Bool = false
    /// The first line of the out-of-step marker, when the login password and the keychain password
    /// are known to differ.
    package var passwordOutOfStep: String?
}
