import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets

/// A keybag: the per-user file that holds the seven class keys, each wrapped under a key-encryption
/// key derived from the password (password classes) or from a stored seed (Always classes).
///
/// A value type holding only the file's contents (nothing unwrapped), so it can be passed around
/// and compared freely. Format and derivations: docs/KEYBAG.md.
package struct Keybag: Sendable, Equatable, CustomStringConvertible {
    /// The only format version this build reads and writes.
    package static let formatVersion: UInt16 = 1
    /// Size in bytes of a version 1 keybag file.
    package static let fileSize = KeybagLayout.fileSize

    /// Random 16-byte identifier, fixed for the keybag's life; bound into every wrapped key.
    package let id: [UInt8]
    /// Argon2id parameters the master key is derived with.
    package let parameters: Argon2Parameters
    /// Argon2id salt (16 bytes), replaced on every password change.
    package let salt: [UInt8]
    /// HKDF-derived password verifier (32 bytes).
    let verifier: [UInt8]
    /// Seed S for the Always classes' KEKs. Stored in clear on purpose (docs/KEYBAG.md); still kept
    /// internal so no caller is tempted to treat it as public data.
    let alwaysSeed: [UInt8]
    /// Class → 60-byte wrapped key, for all seven classes.
    let wrappedKeys: [ProtectionClass: [UInt8]]
    /// Whether the ThisDeviceOnly classes are bound to a machine: their KEKs then also take the device
    /// factor (flags bit 0, docs/KEYBAG.md "Device binding").
    package let isDeviceBound: Bool
    /// Where the keybag came from, for error messages only (not part of equality).
    let origin: String

    init(
        id: [UInt8], parameters: Argon2Parameters, salt: [UInt8], verifier: [UInt8], alwaysSeed: [UInt8],
        wrappedKeys: [ProtectionClass: [UInt8]], deviceBound: Bool, origin: String
    ) {
        self.id = id
        self.parameters = parameters
        self.salt = salt
        self.verifier = verifier
        self.alwaysSeed = alwaysSeed
        self.wrappedKeys = wrappedKeys
        self.isDeviceBound = deviceBound
        self.origin = origin
    }

    /// Origin recorded for keybags that have not been read from a file.
    static let inMemoryOrigin = "(new keybag)"

    /// Equal when the file contents are equal; where the value came from does not matter.
    package static func == (a: Keybag, b: Keybag) -> Bool {
        a.id == b.id && a.parameters == b.parameters && a.salt == b.salt && a.verifier == b.verifier
            && a.alwaysSeed == b.alwaysSeed && a.wrappedKeys == b.wrappedKeys && a.isDeviceBound == b.isDeviceBound
    }

    /// Identifier and cost parameters only; the default reflection would print the always seed.
    package var description: String {
        let idHex = id.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        return
            "Keybag(id: \(idHex), argon2id t=\(parameters.timeCost) m=\(parameters.memoryKiB)KiB p=\(parameters.parallelism)\(isDeviceBound ? ", device-bound" : ""))"
    }

    // MARK: Creation

    /// Creates a keybag with fresh random id, salt, always seed, class keys and nonces, and returns
    /// it with all seven class keys unwrapped. Refuses parameters that fail `validate()` or use less
    /// than `Argon2Parameters.minimumMemoryKiB`, unless `allowWeakParameters` (tests only).
    /// With `deviceFactor` the keybag is created device-bound.
    package static func create(
        password: SecretBytes, parameters: Argon2Parameters = .default,
        allowWeakParameters: Bool = false,
        deviceFactor: SecretBytes? = nil
    ) throws -> (Keybag, ClassKeys) {
        try checkParameters(parameters, allowWeak: allowWeakParameters)
        var keys: [ProtectionClass: SecretBytes] = [:]
        for protectionClass in ProtectionClass.allCases {
            keys[protectionClass] = try SecureRandom.secret(KeyHierarchy.keyLength)
        }
        let classKeys = ClassKeys(keys)
        let keybag = try create(
            password: password, parameters: parameters,
            salt: SecureRandom.bytes(KeybagLayout.saltLength),
            id: SecureRandom.bytes(KeybagLayout.idLength),
            alwaysSeed: SecureRandom.bytes(KeyHierarchy.keyLength),
            classKeys: classKeys, nonces: nil, deviceFactor: deviceFactor)
        return (keybag, classKeys)
    }

    /// Deterministic creation from explicit inputs, for the test vectors. `nonces` nil draws random
    /// nonces. Applies `validate()` but not the 64 MiB floor. With `deviceFactor` the keybag is
    /// device-bound.
    static func create(
        password: SecretBytes, parameters: Argon2Parameters, salt: [UInt8], id: [UInt8],
        alwaysSeed: [UInt8], classKeys: ClassKeys,
        nonces: [ProtectionClass: [UInt8]]?, deviceFactor: SecretBytes? = nil
    ) throws -> Keybag {
        try checkParameters(parameters, allowWeak: true)
        guard salt.count == KeybagLayout.saltLength, id.count == KeybagLayout.idLength,
            alwaysSeed.count == KeyHierarchy.keyLength
        else {
            throw CryptoError.invalidInput("keybag salt, id or seed has the wrong length")
        }
        for protectionClass in ProtectionClass.allCases
        where classKeys[protectionClass]?.count != KeyHierarchy.keyLength {
            throw CryptoError.invalidInput("class key \(protectionClass.rawValue) missing or not 32 bytes")
        }
        let master = try KeyHierarchy.masterKey(password: password, salt: salt, parameters: parameters)
        let seed = SecretBytes(copying: alwaysSeed)
        var wrapped: [ProtectionClass: [UInt8]] = [:]
        for protectionClass in ProtectionClass.allCases {
            let ikm = KeyHierarchy.kekInput(
                for: protectionClass, base: protectionClass.requiresPassword ? master : seed,
                deviceFactor: deviceFactor)
            let kek = try KeyHierarchy.kek(for: protectionClass, ikm: ikm)
            wrapped[protectionClass] = try KeyHierarchy.wrap(
                classKey: classKeys[protectionClass]!,
                protectionClass: protectionClass, kek: kek, id: id,
                nonce: nonces?[protectionClass])
        }
        return Keybag(
            id: id, parameters: parameters, salt: salt,
            verifier: try KeyHierarchy.verifier(masterKey: master), alwaysSeed: alwaysSeed,
            wrappedKeys: wrapped, deviceBound: deviceFactor != nil, origin: inMemoryOrigin)
    }

    /// `validate()` failures and, unless allowed, memory below the floor → `.weakParameters`.
    static func checkParameters(_ parameters: Argon2Parameters, allowWeak: Bool) throws {
        do {
            try parameters.validate()
        } catch CryptoError.invalidInput(let reason) {
            throw KeybagError.weakParameters(reason)
        }
        if !allowWeak, parameters.memoryKiB < Argon2Parameters.minimumMemoryKiB {
            throw KeybagError.weakParameters("memory below \(Argon2Parameters.minimumMemoryKiB) KiB")
        }
        // pam_latchkey and the agent refuse a keybag beyond the derivation limits (docs/KEYBAG.md
        // "Derivation limits"); never write one.
        guard parameters.isWithinDerivationLimits else {
            throw KeybagError.weakParameters(
                "Argon2 parameters above the derivation limits (\(Argon2Parameters.derivationLimitsText))")
        }
    }

    // MARK: Unlocking

    /// M = Argon2id(password, salt, parameters). The slow step (about 0.2–0.5 s with the defaults);
    /// do it once per unlock and pass M to `verify`/`unlockPasswordClasses`.
    package func deriveMasterKey(password: SecretBytes) throws -> SecretBytes {
        try KeyHierarchy.masterKey(password: password, salt: salt, parameters: parameters)
    }

    /// Whether `masterKey` matches the stored verifier, compared in constant time.
    package func verify(masterKey: SecretBytes) -> Bool {
        guard var candidate = try? KeyHierarchy.verifier(masterKey: masterKey) else { return false }
        defer { SecretBytes.wipe(&candidate) }
        return candidate.withUnsafeBytes { a in verifier.withUnsafeBytes { b in SecretBytes.constantTimeEquals(a, b) } }
    }

    /// The device factor of this keybag for user `uid` on the machine whose secret is given
    /// (docs/KEYBAG.md "Device binding"). Only root can read a machine secret.
    package func deviceFactor(machineSecret: SecretBytes, uid: UInt32) throws -> SecretBytes {
        try KeyHierarchy.deviceFactor(machineSecret: machineSecret, uid: uid, keybagID: id)
    }

    /// Unwraps the password classes. `.wrongPassword` if the verifier does not match (so a wrong
    /// password never yields garbage keys); `.corrupt` if an entry fails to unwrap although the
    /// password verified.
    ///
    /// The ThisDeviceOnly password classes of a device-bound keybag need `deviceFactor`: without it
    /// they are left out of the result (the rest still unlocks); with a factor that does not open
    /// them, `.wrongDevice`.
    package func unlockPasswordClasses(masterKey: SecretBytes, deviceFactor: SecretBytes? = nil) throws -> ClassKeys {
        guard verify(masterKey: masterKey) else { throw KeybagError.wrongPassword }
        let classes = ProtectionClass.allCases.filter { $0.requiresPassword && canOpen($0, deviceFactor: deviceFactor) }
        return try unwrap(classes: classes, base: masterKey, deviceFactor: deviceFactor)
    }

    /// Unwraps the Always classes, which need no password (file permissions protect them). In a
    /// device-bound keybag AlwaysThisDeviceOnly also needs `deviceFactor` (left out without it;
    /// `.wrongDevice` if the factor does not open it). Cheap, so it also serves to check a factor.
    package func unlockAlwaysClasses(deviceFactor: SecretBytes? = nil) throws -> ClassKeys {
        let classes = ProtectionClass.allCases.filter {
            !$0.requiresPassword && canOpen($0, deviceFactor: deviceFactor)
        }
        return try unwrap(classes: classes, base: SecretBytes(copying: alwaysSeed), deviceFactor: deviceFactor)
    }

    private func canOpen(_ protectionClass: ProtectionClass, deviceFactor: SecretBytes?) -> Bool {
        !(isDeviceBound && protectionClass.isThisDeviceOnly && deviceFactor == nil)
    }

    private func unwrap(classes: [ProtectionClass], base: SecretBytes, deviceFactor: SecretBytes?) throws -> ClassKeys {
        var keys: [ProtectionClass: SecretBytes] = [:]
        for protectionClass in classes {
            let usesFactor = isDeviceBound && protectionClass.isThisDeviceOnly
            let ikm = KeyHierarchy.kekInput(
                for: protectionClass, base: base, deviceFactor: usesFactor ? deviceFactor : nil)
            let kek = try KeyHierarchy.kek(for: protectionClass, ikm: ikm)
            do {
                keys[protectionClass] = try KeyHierarchy.unwrap(
                    wrappedKeys[protectionClass]!, protectionClass: protectionClass,
                    kek: kek, id: id)
            } catch CryptoError.authenticationFailed {
                // The checksum rules out accidental damage, so with a factor involved the likely
                // cause is a factor from another machine (or another uid).
                if usesFactor { throw KeybagError.wrongDevice(path: origin) }
                throw KeybagError.corrupt(path: origin, reason: "class \(protectionClass.rawValue) key does not unwrap")
            }
        }
        return ClassKeys(keys)
    }

    // MARK: Device binding

    /// A copy of this (unbound) keybag with its ThisDeviceOnly classes re-wrapped under KEKs that
    /// also take `deviceFactor`, with fresh nonces. Everything else is unchanged byte for byte.
    /// Needs the current master key, since three of the four classes are password classes.
    package func binding(masterKey: SecretBytes, deviceFactor: SecretBytes) throws -> Keybag {
        try binding(masterKey: masterKey, deviceFactor: deviceFactor, nonces: nil)
    }

    func binding(masterKey: SecretBytes, deviceFactor: SecretBytes, nonces: [ProtectionClass: [UInt8]]?) throws
        -> Keybag
    {
        guard !isDeviceBound else { return self }
        guard deviceFactor.count == KeyHierarchy.keyLength else {
            throw CryptoError.invalidInput("device factor must be 32 bytes")
        }
        let keys = try unlockPasswordClasses(masterKey: masterKey).merging(unlockAlwaysClasses())
        let seed = SecretBytes(copying: alwaysSeed)
        var wrapped = wrappedKeys
        for protectionClass in ProtectionClass.allCases where protectionClass.isThisDeviceOnly {
            let base = protectionClass.requiresPassword ? masterKey : seed
            let kek = try KeyHierarchy.kek(
                for: protectionClass,
                ikm: KeyHierarchy.kekInput(for: protectionClass, base: base, deviceFactor: deviceFactor))
            wrapped[protectionClass] = try KeyHierarchy.wrap(
                classKey: keys[protectionClass]!, protectionClass: protectionClass,
                kek: kek, id: id, nonce: nonces?[protectionClass])
        }
        return Keybag(
            id: id, parameters: parameters, salt: salt, verifier: verifier, alwaysSeed: alwaysSeed,
            wrappedKeys: wrapped, deviceBound: true, origin: origin)
    }

    // MARK: Password change

    /// A copy of this keybag under a new password: new random salt, optionally new parameters, new
    /// verifier, and every password class re-wrapped with fresh nonces. Class keys, the Always
    /// entries and the id are unchanged, so no item needs re-encrypting.
    ///
    /// `masterKey` must be the current one (`.wrongPassword` otherwise). Explicit new `parameters`
    /// are held to the 64 MiB floor unless `allowWeakParameters`; keeping the current parameters is
    /// always allowed, so a keybag created with weak parameters can still change its password.
    /// A device-bound keybag also needs its `deviceFactor` (`.deviceFactorRequired` without it).
    package func changingPassword(
        masterKey: SecretBytes, deviceFactor: SecretBytes? = nil, newPassword: SecretBytes,
        parameters: Argon2Parameters? = nil, allowWeakParameters: Bool = false
    ) throws -> Keybag {
        let newParameters = parameters ?? self.parameters
        try Keybag.checkParameters(newParameters, allowWeak: allowWeakParameters || parameters == nil)
        return try changingPassword(
            masterKey: masterKey, deviceFactor: deviceFactor, newPassword: newPassword,
            parameters: newParameters, salt: SecureRandom.bytes(KeybagLayout.saltLength), nonces: nil)
    }

    /// Deterministic password change for tests; checks `validate()` only.
    func changingPassword(
        masterKey: SecretBytes, deviceFactor: SecretBytes? = nil, newPassword: SecretBytes,
        parameters: Argon2Parameters, salt: [UInt8], nonces: [ProtectionClass: [UInt8]]?
    ) throws -> Keybag {
        try Keybag.checkParameters(parameters, allowWeak: true)
        if isDeviceBound && deviceFactor == nil { throw KeybagError.deviceFactorRequired(path: origin) }
        let factor = isDeviceBound ? deviceFactor : nil
        let classKeys = try unlockPasswordClasses(masterKey: masterKey, deviceFactor: factor)
        let newMaster = try KeyHierarchy.masterKey(password: newPassword, salt: salt, parameters: parameters)
        var wrapped = wrappedKeys
        for protectionClass in classKeys.classes {
            let kek = try KeyHierarchy.kek(
                for: protectionClass,
                ikm: KeyHierarchy.kekInput(for: protectionClass, base: newMaster, deviceFactor: factor))
            wrapped[protectionClass] = try KeyHierarchy.wrap(
                classKey: classKeys[protectionClass]!,
                protectionClass: protectionClass, kek: kek, id: id,
                nonce: nonces?[protectionClass])
        }
        return Keybag(
            id: id, parameters: parameters, salt: salt,
            verifier: try KeyHierarchy.verifier(masterKey: newMaster), alwaysSeed: alwaysSeed,
            wrappedKeys: wrapped, deviceBound: isDeviceBound, origin: origin)
    }
}
