import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeySystem

/// The layer `.applicationPassword` adds to an item's secret (docs/STORE.md, "Application password";
/// docs/ACCESS-CONTROL.md §8): the secret is sealed with AES-256-GCM under a key derived with Argon2id
/// from a password the application supplies and a salt of the item's own, and that box is the secret
/// the item stores (sealed in turn under the item key, like any secret). Without the password the
/// agent cannot read the secret, whatever keys it holds.
///
///     "LKAP" | 0x01 | t (u32 BE) | m KiB (u32 BE) | p (u32 BE) | salt (16) | nonce (12) | ciphertext | tag (16)
///
/// The 33-byte header is the box's associated data, so the parameters and salt cannot be changed
/// without the box failing.
package enum ApplicationPassword {
    static let magic: [UInt8] = Array("LKAP".utf8)
    static let version: UInt8 = 1
    static let saltLength = 16
    static let headerLength = 4 + 1 + 12 + 16
    /// Every new box: Argon2id with 64 MiB, 3 passes, 1 lane (RFC 9106's second recommendation; about a
    /// tenth of a second here). Boxes keep their own parameters, so these may grow.
    package static let parameters = Argon2Parameters(timeCost: 3, memoryKiB: 65_536, parallelism: 1)
    /// Items sealed under an application password one request may open (each a derivation).
    package static let maximumBoxesPerRequest = 16
    /// Longest application password accepted (the protocol's secret field cap).
    package static let maximumPasswordLength = 4096

    /// One derivation at a time in the agent: each takes 64 MiB, and callers wait their turn (a
    /// fraction of a second each) rather than add up their memory.
    private static let derivations = Locked(())

    /// Derivations waiting or running at once; more are refused at once (errSecAllocate) rather than
    /// queued, so that one program's queries cannot hold every request thread of the agent.
    static let maximumWaitingDerivations = 8
    private static let waiting = Locked(0)

    /// Runs `body`, which derives, when no other derivation of an application password runs.
    static func derivingOneAtATime<T>(_ body: () throws(SecError) -> T) throws(SecError) -> T {
        let admitted = waiting.withLock { count -> Bool in
            guard count < maximumWaitingDerivations else { return false }
            count += 1
            return true
        }
        guard admitted else {
            throw SecError(SecStatus.allocate, "too many application-password derivations are waiting")
        }
        defer { waiting.withLock { $0 -= 1 } }
        return try derivations.withLock { () throws(SecError) -> T in try body() }
    }

    /// Refuses `.applicationPassword` where it is not applied: only passwords (generic and internet)
    /// carry a box; a certificate's data is public, and a key's bytes are used by the agent itself.
    static func checkSupported(_ control: AccessControl?, itemClass: ItemClass) throws(SecError) {
        guard let control, control.flags.contains(.applicationPassword) else { return }
        guard itemClass == .genericPassword || itemClass == .internetPassword else {
            throw SecError(SecStatus.unimplemented, "kSecAccessControlApplicationPassword applies to passwords only")
        }
    }

    /// Seals a new item's secret under the request's application password (a fresh salt); errSecAuthNeeded
    /// (phase two asks for the password) when the request brought none and may ask, errSecInteractionNotAllowed
    /// when it may not.
    static func seal(_ request: inout AddRequest, session: UserCheckSession?) throws(SecError) {
        try checkSupported(request.accessControl, itemClass: request.itemClass)
        guard request.accessControl?.flags.contains(.applicationPassword) == true else { return }
        guard let session, let password = session.applicationPassword else {
            guard let session, request.authenticationUI == .allow else {
                throw SecError(SecStatus.interactionNotAllowed, "the item needs an application password")
            }
            var requirement = session.require(items: [], constraints: [], prompt: request.operationPrompt, newBox: true)
            requirement.detail = "a new item needs an application password"
            throw requirement
        }
        let derivation = try Derivation.fresh()
        let key = try derivingOneAtATime { () throws(SecError) -> SecretBytes in try deriveKey(password, derivation) }
        request.data = try wrap(request.data ?? [], key: key, derivation)
    }

    /// The secret to store when `item` is rewritten with `changes`: its box as it is, or the new data in a
    /// box under the same key (the gate derived it, so the password was right). The flag itself cannot
    /// be added or removed: that would need the password's derivation where none is asked for.
    static func secretForRewrite(_ item: OpenItem, _ changes: AttributeChanges) throws(SecError) -> [UInt8] {
        let old = try item.accessControl()?.flags.contains(.applicationPassword) ?? false
        let new = changes.accessControl.map { $0.flags.contains(.applicationPassword) } ?? old
        guard old == new else {
            throw .param("kSecAccessControlApplicationPassword cannot be added or removed by SecItemUpdate")
        }
        guard old else {
            if let data = changes.data { return data }
            return try ItemSealer.openSecret(item)
        }
        let box = try ItemSealer.openStoredSecret(item)
        guard let key = item.applicationKey else {
            throw SecError(SecStatus.interactionNotAllowed, "the item needs its application password")
        }
        var check = try unwrap(box, key: key)  // a wrong password changes nothing
        SecretBytes.wipe(&check)
        guard let data = changes.data else { return box }
        return try wrap(data, key: key, derivation(of: box))
    }

    /// What a key is derived with: a box's salt and parameters.
    package struct Derivation: Sendable, Equatable {
        package let salt: [UInt8]
        package let parameters: Argon2Parameters

        /// A new derivation: a fresh random salt and the current parameters.
        static func fresh() throws(SecError) -> Derivation {
            do {
                return Derivation(
                    salt: try SecureRandom.bytes(saltLength), parameters: ApplicationPassword.parameters)
            } catch {
                throw SecError(SecStatus.internalComponent, "no random bytes for an application password's salt")
            }
        }

        var header: [UInt8] {
            var out = magic + [version]
            for value in [parameters.timeCost, parameters.memoryKiB, parameters.parallelism] {
                out += withUnsafeBytes(of: value.bigEndian) { Array($0) }
            }
            return out + salt
        }
    }

    /// The key `password` gives for `derivation` (Argon2id, 32 bytes). Slow by design: never with the
    /// engine's mutex held.
    package static func deriveKey(_ password: SecretBytes, _ derivation: Derivation) throws(SecError) -> SecretBytes {
        guard password.count <= maximumPasswordLength else { throw .param("the application password is too long") }
        do {
            return try Argon2id.deriveKey(password: password, salt: derivation.salt, parameters: derivation.parameters)
        } catch {
            throw SecError(SecStatus.internalComponent, "the application password's key could not be derived")
        }
    }

    /// Seals `secret` under `key`, derived for `derivation`. `nonce` is for test vectors only (a random
    /// one otherwise).
    static func wrap(_ secret: [UInt8], key: SecretBytes, _ derivation: Derivation, nonce: [UInt8]? = nil)
        throws(SecError) -> [UInt8]
    {
        let header = derivation.header
        do {
            return header + (try AES256GCM.seal(secret, key: key, aad: header, nonce: nonce))
        } catch {
            throw SecError(SecStatus.internalComponent, "the secret could not be sealed under the application password")
        }
    }

    /// The derivation a stored box names; errSecDecode when it is no box of this version, or its
    /// parameters are beyond what any derivation may cost.
    static func derivation(of box: [UInt8]) throws(SecError) -> Derivation {
        guard box.count >= headerLength + AES256GCM.overhead, Array(box[0..<5]) == magic + [version] else {
            throw SecError(SecStatus.decode, "the item's application-password box is malformed")
        }
        func number(at offset: Int) -> UInt32 {
            box[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
        let parameters = Argon2Parameters(
            timeCost: number(at: 5), memoryKiB: number(at: 9), parallelism: number(at: 13))
        // Boxes are made with `parameters`; anything much dearer came from elsewhere (a restored or
        // damaged row) and would make every read of the item hold the agent's one derivation.
        guard (try? parameters.validate()) != nil, parameters.timeCost <= 4, parameters.memoryKiB <= 131_072,
            parameters.parallelism <= 4
        else {
            throw SecError(SecStatus.decode, "the item's application-password box has parameters beyond the limits")
        }
        return Derivation(salt: Array(box[17..<headerLength]), parameters: parameters)
    }

    /// Opens a stored box with `key`; errSecAuthFailed when the key is not the box's (a wrong password).
    static func unwrap(_ box: [UInt8], key: SecretBytes) throws(SecError) -> [UInt8] {
        _ = try derivation(of: box)
        do {
            return try AES256GCM.open(Array(box[headerLength...]), key: key, aad: Array(box[0..<headerLength]))
        } catch {
            throw SecError(SecStatus.authFailed, "wrong application password")
        }
    }
}
