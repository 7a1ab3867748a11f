import Foundation
import LatchkeyModel

/// Apple's `SecAccessControlCreateFlags`, with Apple's raw values (apple-oss-distributions/Security,
/// keychain/headers/SecAccessControl.h). What each means on Linux: docs/ACCESS-CONTROL.md.
public struct SecAccessControlCreateFlags: OptionSet, Sendable, Hashable {
    public let rawValue: CFOptionFlags
    public init(rawValue: CFOptionFlags) { self.rawValue = rawValue }

    /// The user's own authentication: the PAM service `latchkey` (password, or whatever the administrator
    /// put in front of pam_unix, such as pam_fprintd).
    public static let userPresence = SecAccessControlCreateFlags(rawValue: 1 << 0)
    /// Any enrolled biometry: the PAM service `latchkey-biometry` (pam_fprintd, no password fallback);
    /// without that service the item's secret gives errSecAuthFailed, as Apple's without enrolled biometry.
    public static let biometryAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    /// Apple's former name of ``biometryAny``.
    public static let touchIDAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    /// The biometry enrolled now: checked as ``biometryAny`` (PAM cannot tell which enrolment answered).
    public static let biometryCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    /// Apple's former name of ``biometryCurrentSet``.
    public static let touchIDCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    /// The device passcode: the user's password, through the PAM service `latchkey`.
    public static let devicePasscode = SecAccessControlCreateFlags(rawValue: 1 << 4)
    /// A paired watch; Linux has none (errSecAuthFailed).
    public static let watch = SecAccessControlCreateFlags(rawValue: 1 << 5)
    /// A paired companion device (the same bit as ``watch``); Linux has none (errSecAuthFailed).
    public static let companion = SecAccessControlCreateFlags(rawValue: 1 << 5)
    /// At least one of the constraints.
    public static let or = SecAccessControlCreateFlags(rawValue: 1 << 14)
    /// Every constraint (also the meaning of several constraints without a conjunction).
    public static let and = SecAccessControlCreateFlags(rawValue: 1 << 15)
    /// Puts the constraints on the private key's use. Here a key's use and its data both need the check.
    public static let privateKeyUsage = SecAccessControlCreateFlags(rawValue: 1 << 30)
    /// An application-supplied password (`LAContext.setCredential`): a password item's secret is sealed
    /// under a key derived from it (docs/ACCESS-CONTROL.md §8). Keys and certificates do not take it.
    public static let applicationPassword = SecAccessControlCreateFlags(rawValue: 1 << 31)
}

/// Core Foundation's option flags type.
public typealias CFOptionFlags = UInt

/// Apple's `SecAccessControl`: a protection class (what `kSecAttrAccessible` would say) and the user
/// checks the item's secret needs. Give it as `kSecAttrAccessControl`; items return it among their
/// attributes.
public final class SecAccessControl: @unchecked Sendable, Hashable, CustomStringConvertible {
    let control: AccessControl

    init(_ control: AccessControl) { self.control = control }

    /// The access control an item's attributes carry (its encoding, docs/PROTOCOL.md); nil if malformed.
    convenience init?(encoded: [UInt8]) {
        guard let control = try? AccessControl(decoding: encoded) else { return nil }
        self.init(control)
    }

    /// The protection class, as the `kSecAttrAccessible` value.
    public var protection: CFString { NSString(string: control.protection.pdmn) }
    /// The flags it was created with.
    public var flags: SecAccessControlCreateFlags {
        SecAccessControlCreateFlags(rawValue: CFOptionFlags(control.flags.rawValue))
    }

    public static func == (lhs: SecAccessControl, rhs: SecAccessControl) -> Bool { lhs.control == rhs.control }
    public func hash(into hasher: inout Hasher) { hasher.combine(control) }
    public var description: String {
        "<SecAccessControl protection=\(control.protection.pdmn) flags=0x\(String(control.flags.rawValue, radix: 16))>"
    }
}

/// Apple's `SecAccessControlRef`.
public typealias SecAccessControlRef = SecAccessControl

/// Creates an access control (Apple's `SecAccessControlCreateWithFlags`). `protection` is a
/// `kSecAttrAccessible` value. nil, with an errSecParam error, for an unknown protection or flag, Or with
/// And, BiometryAny with BiometryCurrentSet, or UserPresence with another constraint, as Apple's checks.
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?, _ protection: CFTypeRef, _ flags: SecAccessControlCreateFlags,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? {
    secKeyCall(error) { () throws(SecError) -> SecAccessControl in
        guard let pdmn = protection as? String, let protectionClass = ProtectionClass(pdmn: pdmn) else {
            throw .param("the protection is not a kSecAttrAccessible value")
        }
        return SecAccessControl(
            try AccessControl(protection: protectionClass, flags: AccessControlFlags(rawValue: UInt64(flags.rawValue))))
    }
}
