import LatchkeyModel
import LatchkeySecrets
import LatchkeyWire

// `KeychainControl` takes passwords as `SecretBytes`; re-export the type so `import Latchkey` is enough.
@_exported import class LatchkeySecrets.SecretBytes

/// Managing the user's keychain through the agent: create, unlock, lock, status, change password.
/// Not part of Apple's API (on Apple systems the OS does this); the `latchkey` command uses it.
public enum KeychainControl {
    /// The state of one accessibility class.
    public struct ClassState: Sendable, Equatable {
        /// The class's `kSecAttrAccessible` value: `ak`, `ck`, `dk`, `aku`, `cku`, `dku` or `akpu`.
        public var pdmn: String
        /// Whether the agent holds the class key, so that items of the class can be read and written.
        public var unlocked: Bool
    }

    /// What `status` reports.
    public struct Status: Sendable, Equatable {
        /// The keychain directory the agent uses (by default `~/.local/share/latchkey`).
        public var directory: String
        /// Whether a keychain has been created in that directory.
        public var exists: Bool
        /// Every accessibility class and whether it is unlocked; empty when the agent reported none.
        public var classes: [ClassState]
        /// Why the keychain cannot be used (for example a damaged file, named by path), when it cannot.
        public var problem: String?
        /// Argon2id parameters of the keybag: time cost, memory in KiB, parallelism.
        public var argon2: (t: Int64, m: Int64, p: Int64)?
        /// Whether the ThisDeviceOnly classes are bound to this machine.
        public var deviceBound = false
        /// Whether the agent holds this machine's device factor (from a login through pam_latchkey).
        public var deviceFactorHeld = false
        /// Set when the login password and the keychain password are known to differ.
        public var passwordOutOfStep: String?
        /// Login sessions announced by pam_latchkey.
        public var sessions: Int64 = 0

        /// Compares every field except `argon2`, whose tuple type cannot be `Equatable`.
        public static func == (a: Status, b: Status) -> Bool {
            a.directory == b.directory && a.exists == b.exists && a.classes == b.classes && a.problem == b.problem
                && a.deviceBound == b.deviceBound && a.deviceFactorHeld == b.deviceFactorHeld
                && a.passwordOutOfStep == b.passwordOutOfStep && a.sessions == b.sessions
        }
    }

    /// A failed control call: the status and the agent's detail.
    public struct Failure: Error, Sendable {
        /// The result code, with Apple's values (`errSecAuthFailed` for a wrong password, ...).
        public var status: OSStatus
        /// The agent's explanation, when it gave one.
        public var detail: String?
    }

    /// Argon2id parameters for `create`; nil fields keep the defaults.
    public struct Argon2Options: Sendable {
        /// Argon2id passes over memory (t); nil keeps the agent's default.
        public var timeCost: UInt32?
        /// Argon2id memory in KiB (m); nil keeps the agent's default.
        public var memoryKiB: UInt32?
        /// Argon2id lanes (p); nil keeps the agent's default.
        public var parallelism: UInt32?
        /// Allow less than 64 MiB (tests only).
        public var allowWeak = false

        /// Options for `create`; every parameter left nil keeps the agent's default.
        public init(
            timeCost: UInt32? = nil, memoryKiB: UInt32? = nil, parallelism: UInt32? = nil, allowWeak: Bool = false
        ) {
            self.timeCost = timeCost
            self.memoryKiB = memoryKiB
            self.parallelism = parallelism
            self.allowWeak = allowWeak
        }
    }

    /// Creates the keychain with `password` (the agent derives the keys and forgets the password).
    public static func create(password: SecretBytes, options: Argon2Options = Argon2Options()) throws(Failure) {
        var dictionary: SecDictionary = [:]
        if let t = options.timeCost { dictionary["argon2.t"] = .int(Int64(t)) }
        if let m = options.memoryKiB { dictionary["argon2.m"] = .int(Int64(m)) }
        if let p = options.parallelism { dictionary["argon2.p"] = .int(Int64(p)) }
        if options.allowWeak { dictionary["argon2.allowWeak"] = .bool(true) }
        _ = try call(.create(password: password, options: dictionary))
    }

    /// Unlocks every password-protected class.
    public static func unlock(password: SecretBytes) throws(Failure) {
        _ = try call(.unlock(password: password))
    }

    /// Drops the WhenUnlocked family of class keys, or (all) every password-protected one.
    public static func lock(all: Bool) throws(Failure) {
        _ = try call(.lock(all: all))
    }

    /// Re-wraps the class keys under a new password.
    public static func changePassword(old: SecretBytes, new: SecretBytes) throws(Failure) {
        _ = try call(.changePassword(old: old, new: new))
    }

    /// Lets this process's connection to the agent use `groups` (`["*"]`: every group) besides its own
    /// access groups, once `password` is the keychain password (errSecAuthFailed otherwise). For the
    /// administrator's tool: the widening lasts as long as the connection, which the library may close
    /// when it is idle; a later request then runs with the process's own groups again.
    public static func authorizeAccessGroups(_ groups: [String], password: SecretBytes) throws(Failure) {
        _ = try call(.authorizeGroups(password: password, groups: groups))
    }

    /// The keychain's state.
    public static func status() throws(Failure) -> Status {
        guard case .dictionary(let d)? = try call(.status) else {
            throw Failure(status: SecStatus.decode, detail: "malformed status reply")
        }
        var classes: [ClassState] = []
        if case .dictionary(let entries)? = d["classes"] {
            for cls in ProtectionClass.allCases {
                classes.append(ClassState(pdmn: cls.pdmn, unlocked: entries[cls.pdmn] == .string("unlocked")))
            }
        }
        var argon2: (Int64, Int64, Int64)?
        if case .int(let t)? = d["argon2.t"], case .int(let m)? = d["argon2.m"], case .int(let p)? = d["argon2.p"] {
            argon2 = (t, m, p)
        }
        var status = Status(
            directory: d["keychain"]?.stringValue ?? "?", exists: d["exists"] == .bool(true),
            classes: classes, problem: d["problem"]?.stringValue, argon2: argon2)
        status.deviceBound = d["deviceBound"] == .bool(true)
        status.deviceFactorHeld = d["deviceFactor"] == .string("held")
        status.passwordOutOfStep = d["passwordOutOfStep"]?.stringValue
        if case .int(let n)? = d["sessions"] { status.sessions = n }
        return status
    }

    /// The display name of an accessibility class (`ak` → `WhenUnlocked`).
    public static func displayName(pdmn: String) -> String {
        ProtectionClass(pdmn: pdmn)?.displayName ?? pdmn
    }

    static func call(_ request: Request) throws(Failure) -> SecValue? {
        let response = AgentClient.shared.send(request)
        guard response.status == SecStatus.success else {
            throw Failure(status: response.status, detail: response.message)
        }
        return response.value
    }
}
