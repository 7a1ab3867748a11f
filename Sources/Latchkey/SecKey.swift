import Foundation
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeyWire

/// Apple's `SecKey`: an RSA or elliptic-curve key, public or private.
///
/// A key is held either by this process (made by `SecKeyCreateRandomKey` without
/// `kSecAttrIsPermanent`, by `SecKeyCreateWithData`, or a public key read from the keychain), or by the
/// agent: a private key read from the keychain, or generated straight into it, never enters the
/// calling process. Its `SecKey` carries the public half and the item's persistent reference, and
/// signing, decryption and export are requests to the agent, which applies the lock state (a locked
/// class: errSecInteractionNotAllowed) and `kSecAttrIsExtractable`.
public final class SecKey: @unchecked Sendable, Hashable, CustomStringConvertible {
    /// Type, class, size, public half; and for a key the agent holds, the persistent reference.
    let reference: KeyReference
    /// The key itself, when this process holds it.
    let local: AsymmetricKey?
    /// The `LAContext` of the query that returned this key (`kSecUseAuthenticationContext`): its
    /// evaluation serves the key's operations too, as Apple's key reference carries its context.
    /// Set once, before the key is handed to the caller.
    nonisolated(unsafe) var authenticationContext: LAContext?

    init(local key: AsymmetricKey) {
        local = key
        reference = KeyReference(
            keyType: key.algorithm == .rsa ? KeyReference.typeRSA : KeyReference.typeEC,
            keyClass: key.isPrivate ? KeyReference.classPrivate : KeyReference.classPublic,
            sizeInBits: Int64(key.sizeInBits), publicKey: key.publicKeyBytes)
    }

    /// A key from a reference the agent returned.
    init(reference: KeyReference) throws(SecError) {
        self.reference = reference
        if reference.isPrivate {
            guard reference.persistentRef != nil else { throw .param("a private key reference without its item") }
            local = nil
        } else {
            local = try SecKey.publicKey(reference)
        }
    }

    var algorithm: AsymmetricKey.Algorithm { reference.keyType == KeyReference.typeRSA ? .rsa : .ec }

    /// The public half as a key this process can use (verify, encrypt).
    func publicHalf() throws(SecError) -> AsymmetricKey {
        if let local, !local.isPrivate { return local }
        return try SecKey.publicKey(reference)
    }

    private static func publicKey(_ reference: KeyReference) throws(SecError) -> AsymmetricKey {
        do {
            return try AsymmetricKey(
                externalRepresentation: reference.publicKey,
                algorithm: reference.keyType == KeyReference.typeRSA ? .rsa : .ec, isPrivate: false)
        } catch {
            throw SecError(SecStatus.decode, "the public key is malformed: \(error)")
        }
    }

    /// The wire form, for `kSecValueRef` in a SecItem dictionary: the key's bytes when this process
    /// holds it, otherwise its item.
    var wireReference: KeyReference {
        var wire = reference
        if let local {
            wire.material =
                local.isPrivate ? (try? local.externalRepresentation())?.unsafeCopyToArray() : local.publicKeyBytes
        }
        return wire
    }

    var secValue: SecValue { ItemReference.key(wireReference).secValue }

    /// A summary for debugging: type, size, public or private, and whether the agent holds the key;
    /// never key bytes.
    public var description: String {
        let kind = reference.keyType == KeyReference.typeRSA ? "RSA" : "EC"
        let role = reference.isPrivate ? "private" : "public"
        let place = local == nil ? ", in the keychain" : ""
        return "<SecKey \(kind) \(reference.sizeInBits)-bit \(role)\(place)>"
    }

    /// Two keys are equal when they are the same object, or have the same type, class and public key
    /// (so a private key read from the keychain equals the key that was added).
    public static func == (a: SecKey, b: SecKey) -> Bool {
        a === b
            || (a.reference.keyClass == b.reference.keyClass && a.reference.keyType == b.reference.keyType
                && a.reference.publicKey == b.reference.publicKey)
    }

    /// Hashes the key class and the public key, which equal keys share.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(reference.keyClass)
        hasher.combine(reference.publicKey)
    }
}

/// Apple's `SecKeyOperationType`.
public enum SecKeyOperationType: Int, Sendable {
    /// Creating a signature (`SecKeyCreateSignature`); needs a private key.
    case sign = 0
    /// Verifying a signature (`SecKeyVerifySignature`); done with the public key.
    case verify = 1
    /// Encrypting (`SecKeyCreateEncryptedData`); done with the public key.
    case encrypt = 2
    /// Decrypting (`SecKeyCreateDecryptedData`); needs a private key.
    case decrypt = 3
    /// Key exchange (`SecKeyCopyKeyExchangeResult`); needs a private key.
    case keyExchange = 4
}

// MARK: - Errors

/// Sets a SecKey function's `error` out-parameter (a retained `CFError` of `NSOSStatusErrorDomain`)
/// and records the detail for `LatchkeyDiagnostics`.
func setError(_ error: UnsafeMutablePointer<Unmanaged<CFError>?>?, _ failure: SecError) {
    LastError.record(failure.detail)
    guard let error else { return }
    let message = failure.detail ?? SecStatus.message(for: failure.status) ?? "OSStatus \(failure.status)"
    error.pointee = Unmanaged.passRetained(
        NSError(
            domain: NSOSStatusErrorDomain, code: Int(failure.status),
            userInfo: [NSLocalizedDescriptionKey: message]))
}

/// Runs a SecKey function body, turning a thrown `SecError` into the `error` out-parameter and nil.
func secKeyCall<T>(_ error: UnsafeMutablePointer<Unmanaged<CFError>?>?, _ body: () throws(SecError) -> T) -> T? {
    do {
        let value = try body()
        LastError.record(nil)
        return value
    } catch let failure {
        setError(error, failure)
        return nil
    }
}

/// Sends a request about keys to the agent; the value of a successful response.
func agentCall(_ request: Request) throws(SecError) -> SecValue? {
    let response = AgentClient.shared.send(request)
    guard response.status == SecStatus.success else { throw SecError(response.status, response.message) }
    return response.value
}

/// A cryptographic failure as the OSStatus Apple gives for it.
func secError(_ error: any Error, _ what: String) -> SecError {
    switch error {
    case let error as SecError: error
    case CryptoError.invalidInput(let why): SecError(SecStatus.param, "\(what): \(why)")
    case CryptoError.unsupported(let why): SecError(SecStatus.unimplemented, "\(what): \(why)")
    case CryptoError.authenticationFailed: SecError(SecStatus.decode, "\(what): authentication failed")
    default: SecError(SecStatus.decode, "\(what): \(error)")
    }
}
