import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets

/// The master secrets of xdg-desktop-portal's Secret portal (docs/PORTAL.md): one per Flatpak
/// application id, which libsecret inside the sandbox uses to encrypt the application's own keyring
/// file. Derived, never stored:
///
///     HKDF-SHA-256(ikm: WhenUnlocked class key, salt: empty,
///                  info: "latchkey portal-secret v1" || 0x00 || UTF-8(app id), 64 bytes)
///
/// so a secret exists exactly while the WhenUnlocked class key is held (the keychain is unlocked), is
/// the same for an id across unlocks, agents and password changes (the class keys survive those),
/// and differs between ids. The label is this use's alone: every other HKDF of a class key in latchkey
/// has an `info` without a 0x00 byte (`latchkey ss-memory v1`, `latchkey index v1`, ...), so no other
/// derivation can produce these bytes, and an id cannot end early (the 0x00 is the label's end, the id
/// the whole rest). The length is gnome-keyring's and oo7's (`PORTAL_DEFAULT_KEY_SIZE` 64 in
/// `daemon/dbus/gkd-secret-portal.c`, `Secret::random()` in oo7's `client/src/secret.rs`): an
/// application moving between backends sees a secret of the same size.
extension Keychain {
    /// Bytes in a portal secret.
    package static let portalSecretLength = 64
    /// The HKDF `info` prefix; the id follows a 0x00 byte. Part of what users' applications depend on:
    /// changing it changes every application's secret (and loses its keyring file).
    package static let portalSecretLabel = Array("latchkey portal-secret v1".utf8)
    /// Bytes in an application id at most (Flatpak's own limit).
    package static let maximumPortalApplicationID = 255

    /// The portal secret of the application `appID`, for `caller`: the application, as the agent's policy
    /// makes it once it has found the bus client entitled to ask (xdg-desktop-portal). Put to the access
    /// policy as reading the data of the application's own access group, `appID`, which a Flatpak
    /// application without an application file has as its only group: a caller without that group is
    /// refused (errSecMissingEntitlement) whatever asked. errSecInteractionNotAllowed while the
    /// WhenUnlocked class key is not held; errSecParam for an empty or over-long id.
    package func portalSecret(forApplication appID: String, caller: Caller) throws(SecError) -> SecretBytes {
        guard !appID.isEmpty, appID.utf8.count <= Self.maximumPortalApplicationID, !appID.utf8.contains(0) else {
            throw SecError(SecStatus.param, "not an application id")
        }
        _ = try gate.admit(AccessRequest(.readData, caller: caller, itemClass: .genericPassword, accessGroups: [appID]))
        return try lockState.withStore { (_, keys) throws(SecError) -> SecretBytes in
            let classKey = try keys.key(for: .whenUnlocked)
            do {
                return try Self.portalSecret(classKey: classKey, appID: appID)
            } catch {
                throw EngineErrors.map(error)
            }
        }
    }

    /// The derivation itself (the type's documentation), for the test vector.
    package static func portalSecret(classKey: SecretBytes, appID: String) throws -> SecretBytes {
        try HKDF.sha256(
            ikm: classKey, salt: [], info: portalSecretLabel + [0] + Array(appID.utf8), count: portalSecretLength)
    }
}
