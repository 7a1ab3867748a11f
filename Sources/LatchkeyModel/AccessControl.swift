/// Apple's `SecAccessControlCreateFlags`, with Apple's raw values (apple-oss-distributions/Security,
/// keychain/headers/SecAccessControl.h; docs/ACCESS-CONTROL.md §1). They are part of the `accc` encoding
/// (docs/STORE.md) and must never be renumbered.
package struct AccessControlFlags: OptionSet, Sendable, Hashable {
    package let rawValue: UInt64
    package init(rawValue: UInt64) { self.rawValue = rawValue }

    package static let userPresence = AccessControlFlags(rawValue: 1 << 0)
    package static let biometryAny = AccessControlFlags(rawValue: 1 << 1)
    package static let biometryCurrentSet = AccessControlFlags(rawValue: 1 << 3)
    package static let devicePasscode = AccessControlFlags(rawValue: 1 << 4)
    /// `kSecAccessControlCompanion`, once `kSecAccessControlWatch` (the same bit).
    package static let companion = AccessControlFlags(rawValue: 1 << 5)
    package static let or = AccessControlFlags(rawValue: 1 << 14)
    package static let and = AccessControlFlags(rawValue: 1 << 15)
    package static let privateKeyUsage = AccessControlFlags(rawValue: 1 << 30)
    package static let applicationPassword = AccessControlFlags(rawValue: 1 << 31)

    /// Every bit Apple defines; any other is errSecParam.
    package static let known: AccessControlFlags = [
        .userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .companion, .or, .and,
        .privateKeyUsage, .applicationPassword,
    ]
}

/// One way of checking that the user is present (a leaf of a constraint). The raw values are part of
/// the `accc` encoding.
package enum UserCheckKind: UInt8, Sendable, Hashable, CaseIterable {
    /// Biometry or the device passcode (Apple's DeviceOwnerAuthentication): the PAM service `latchkey`.
    case userPresence = 1
    case biometryAny = 2
    case biometryCurrentSet = 3
    /// The device passcode: on Linux the user's password, through the PAM service `latchkey`.
    case devicePasscode = 4
    /// A paired companion device; Linux has none, so it is never satisfied.
    case companion = 5

    /// The flag that asks for this check.
    var flag: AccessControlFlags {
        switch self {
        case .userPresence: .userPresence
        case .biometryAny: .biometryAny
        case .biometryCurrentSet: .biometryCurrentSet
        case .devicePasscode: .devicePasscode
        case .companion: .companion
        }
    }
}

/// What must succeed before an item's secret is read or its key used: a tree of user checks.
package indirect enum AccessConstraint: Sendable, Hashable {
    case check(UserCheckKind)
    /// Every one of them (Apple's `kSecAccessControlAnd`, and several flags without a conjunction).
    case all([AccessConstraint])
    /// At least one of them (`kSecAccessControlOr`).
    case any([AccessConstraint])

    /// Whether the checks that succeeded (`passed`) satisfy the constraint.
    package func isSatisfied(by passed: Set<UserCheckKind>) -> Bool {
        switch self {
        case .check(let kind): passed.contains(kind)
        case .all(let parts): parts.allSatisfy { $0.isSatisfied(by: passed) }
        case .any(let parts): parts.contains { $0.isSatisfied(by: passed) }
        }
    }

    /// Every kind of check the tree names.
    package var kinds: Set<UserCheckKind> {
        switch self {
        case .check(let kind): [kind]
        case .all(let parts), .any(let parts): parts.reduce(into: []) { $0.formUnion($1.kinds) }
        }
    }
}

/// A `SecAccessControl`: the protection class of the item (which decides its class key exactly like
/// `kSecAttrAccessible`) and the user checks its secret needs (docs/ACCESS-CONTROL.md).
package struct AccessControl: Sendable, Hashable {
    package let protection: ProtectionClass
    package let flags: AccessControlFlags
    /// nil: no user check (`flags` without a constraint, Apple's default ACL "true").
    package let constraint: AccessConstraint?

    /// `SecAccessControlCreateWithFlags`'s checks (secitem-semantics §5.1, from Apple's SecAccessControl.m):
    /// errSecParam for an unknown bit, Or with And, BiometryAny with BiometryCurrentSet, and UserPresence
    /// with another constraint.
    package init(protection: ProtectionClass, flags: AccessControlFlags) throws(SecError) {
        guard AccessControlFlags.known.isSuperset(of: flags) else {
            throw .param("SecAccessControlCreateFlags has an unknown flag")
        }
        if flags.contains(.or) && flags.contains(.and) { throw .param("kSecAccessControlOr and And together") }
        if flags.contains(.biometryAny) && flags.contains(.biometryCurrentSet) {
            throw .param("kSecAccessControlBiometryAny and BiometryCurrentSet together")
        }
        let kinds = UserCheckKind.allCases.filter { flags.contains($0.flag) }
        if kinds.contains(.userPresence) && kinds.count > 1 {
            throw .param("kSecAccessControlUserPresence combines only with PrivateKeyUsage and ApplicationPassword")
        }
        self.protection = protection
        self.flags = flags
        switch kinds.count {
        case 0: constraint = nil
        case 1: constraint = .check(kinds[0])
        default:
            // Without a conjunction Apple ANDs the constraints (k-of-n with k = n).
            let parts = kinds.map { AccessConstraint.check($0) }
            constraint = flags.contains(.or) ? .any(parts) : .all(parts)
        }
    }

    /// Whether reading the item's secret, changing it, or using its key needs a user check, or the
    /// application password its secret is sealed under (which only a SecItem request brings).
    package var needsUserCheck: Bool { constraint != nil || flags.contains(.applicationPassword) }

    // MARK: - Encoding (docs/STORE.md, "The access control")

    /// The encoding's first byte; a new layout gets a new version, never a changed meaning.
    package static let version: UInt8 = 1
    static let magic = Array("LKAC".utf8)

    /// `"LKAC"`, version 1, the protection class, the flags (8 bytes big-endian), then the constraint tree:
    /// 0 none, 1 kind (one byte), 2 all or 3 any (a count byte, then each part).
    package var encoded: [UInt8] {
        var out = Self.magic + [Self.version, protection.rawValue]
        for shift in stride(from: 56, through: 0, by: -8) {
            out.append(UInt8(truncatingIfNeeded: flags.rawValue >> UInt64(shift)))
        }
        Self.encode(constraint, into: &out)
        return out
    }

    private static func encode(_ constraint: AccessConstraint?, into out: inout [UInt8]) {
        switch constraint {
        case nil: out.append(0)
        case .check(let kind)?: out += [1, kind.rawValue]
        case .all(let parts)?:
            out += [2, UInt8(parts.count)]
            for part in parts { encode(part, into: &out) }
        case .any(let parts)?:
            out += [3, UInt8(parts.count)]
            for part in parts { encode(part, into: &out) }
        }
    }

    /// Decodes `encoded`; errSecDecode for anything else (an unknown version, trailing bytes, a tree
    /// other than the one the flags make: one value has one encoding).
    package init(decoding bytes: [UInt8]) throws(SecError) {
        let malformed = SecError(SecStatus.decode, "malformed SecAccessControl")
        guard bytes.count >= 15, bytes.count <= 64, Array(bytes[0..<4]) == Self.magic, bytes[4] == Self.version,
            let protection = ProtectionClass(rawValue: bytes[5])
        else { throw malformed }
        let raw = bytes[6..<14].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let control: AccessControl
        do {
            control = try AccessControl(protection: protection, flags: AccessControlFlags(rawValue: raw))
        } catch {
            throw malformed
        }
        guard control.encoded == bytes else { throw malformed }
        self = control
    }
}
