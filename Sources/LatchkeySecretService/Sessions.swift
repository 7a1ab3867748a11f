import LatchkeyCrypto
import LatchkeyDBus
import LatchkeyEngine
import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// The transfer sessions clients open with `OpenSession` (docs/SECRET-SERVICE.md §6): `plain`, or
/// `dh-ietf1024-sha256-aes128-cbc-pkcs7`. A session belongs to the connection that opened it.
///
/// Threading: the bus loop thread only.
final class SessionRegistry {
    static let maxPerClient = 32
    /// High enough that one process with many connections cannot starve the others (each connection
    /// is capped at `maxPerClient`, and dbus-daemon caps connections per user).
    static let defaultMaxTotal = 65_536
    /// `defaultMaxTotal`, or less when `LATCHKEY_MAX_SESSIONS` says so: tests reach the cap with a
    /// few dozen connections instead of 2,048. It can only lower the cap, so an environment a client
    /// set for D-Bus activation can make the service stricter, never laxer.
    static let maxTotal: Int = {
        guard let raw = getenv("LATCHKEY_MAX_SESSIONS"), let limit = Int(String(cString: raw)), limit >= 1 else {
            return defaultMaxTotal
        }
        return min(limit, defaultMaxTotal)
    }()

    enum Transfer {
        case plain
        /// The AES-128 key agreed with the client.
        case aes(SecretBytes)
    }

    struct Session {
        let owner: String
        let transfer: Transfer
    }

    private var sessions: [UInt64: Session] = [:]
    /// Open sessions per owner, so the per-client cap is checked without scanning every session.
    private var perOwner: [String: Int] = [:]
    private var next: UInt64 = 1

    var count: Int { sessions.count }

    /// `OpenSession(algorithm, input)`: the output to return and the new session's path.
    func open(algorithm: String, input: BusValue, owner: String) throws(BusError) -> (output: BusValue, path: String) {
        guard sessions.count < Self.maxTotal, perOwner[owner, default: 0] < Self.maxPerClient else {
            throw BusError(name: SS.ErrorName.limitsExceeded, message: "too many open sessions; close some first")
        }
        let transfer: Transfer
        let output: BusValue
        switch algorithm {
        case SS.Algorithm.plain:
            transfer = .plain
            output = .string("")
        case SS.Algorithm.dh:
            let peer = try Arguments.bytes(input, limit: OakleyGroup2KeyPair.size)
            do {
                let pair = try OakleyGroup2KeyPair()
                let shared = try pair.sharedSecret(peer: peer)
                let key = try HKDF.sha256(ikm: shared, salt: [], info: [], count: AES128CBC.keySize)
                transfer = .aes(key)
                output = Arguments.byteArray(try pair.publicKey())
            } catch CryptoError.invalidInput(let why) {
                throw SecretServiceErrors.invalidArgs(why)
            } catch {
                throw BusError(name: SS.ErrorName.failed, message: "cannot set up the session: \(error)")
            }
        default:
            throw BusError(name: SS.ErrorName.notSupported, message: "algorithm '\(algorithm)' is not supported")
        }
        let n = next
        next += 1
        sessions[n] = Session(owner: owner, transfer: transfer)
        perOwner[owner, default: 0] += 1
        return (.variant(output), ObjectPath.sessionPath(n))
    }

    /// The session at `path`, if it exists and belongs to `caller`; otherwise `NoSession`.
    func session(_ path: String, caller: String) throws(BusError) -> Session {
        guard case .session(let n)? = ObjectPath(path), let session = sessions[n], session.owner == caller else {
            throw SecretServiceErrors.noSession("no session \(path) for this connection")
        }
        return session
    }

    func exists(_ n: UInt64, caller: String) -> Bool { sessions[n]?.owner == caller }

    func close(_ n: UInt64) {
        guard let closed = sessions.removeValue(forKey: n) else { return }
        let left = perOwner[closed.owner, default: 1] - 1
        perOwner[closed.owner] = left > 0 ? left : nil
    }

    /// Closes every session of a connection that left the bus.
    func closeAll(owner: String) {
        sessions = sessions.filter { $0.value.owner != owner }
        perOwner[owner] = nil
    }

    /// A secret as the `(oayays)` struct for `session`. In a `plain` session the value shares the
    /// secret's storage, so wiping either wipes both.
    func encode(_ secret: SecretServiceSecret, sessionPath: String, session: Session) throws(BusError) -> BusValue {
        var parameters: [UInt8] = []
        var value = secret.value
        if case .aes(let key) = session.transfer {
            do {
                parameters = try SecureRandom.bytes(AES128CBC.blockSize)
                value = try AES128CBC.encrypt(secret.value, key: key, iv: parameters)
            } catch {
                throw BusError(name: SS.ErrorName.failed, message: "cannot encrypt the secret: \(error)")
            }
        }
        return .structure([
            .objectPath(sessionPath), Arguments.byteArray(parameters), Arguments.byteArray(value),
            .string(secret.contentType),
        ])
    }

    /// Reads a `(oayays)` secret sent by `caller`, decrypting it with its session. In a `plain`
    /// session the secret shares the storage of the value read; in an encrypted one it is the
    /// decryption's own buffer. Either way `SecretServiceSecret.wipe` zeroes it.
    func decode(_ value: BusValue, caller: String) throws(BusError) -> SecretServiceSecret {
        guard case .structure(let fields) = value, fields.count == 4 else {
            throw SecretServiceErrors.invalidArgs("a secret must be (oayays)")
        }
        let sessionPath = try Arguments.objectPath(fields[0])
        let session = try session(sessionPath, caller: caller)
        let contentType = try Arguments.string(fields[3])
        guard contentType.utf8.count <= SecretServiceLimits.maxContentTypeBytes else {
            throw SecretServiceErrors.invalidArgs("the content type is too long")
        }
        switch session.transfer {
        case .plain:
            let value = try Arguments.bytes(fields[2], limit: SecretServiceLimits.maxSecretBytes)
            return SecretServiceSecret(value: value, contentType: contentType)
        case .aes(let key):
            let parameters = try Arguments.bytes(fields[1], limit: AES128CBC.blockSize)
            let sealed = try Arguments.bytes(fields[2], limit: SecretServiceLimits.maxSecretBytes + AES128CBC.blockSize)
            guard parameters.count == AES128CBC.blockSize else {
                throw SecretServiceErrors.invalidArgs("the secret's parameters must be a 16-byte IV")
            }
            do {
                return SecretServiceSecret(
                    value: try AES128CBC.decrypt(sealed, key: key, iv: parameters),
                    contentType: contentType)
            } catch {
                throw SecretServiceErrors.invalidArgs("the secret cannot be decrypted with this session's key")
            }
        }
    }
}

extension SecretServiceSecret {
    /// Zeroes the secret's bytes in place, in every copy of the array that shares them (see
    /// `BusValue.wipeByteArrays`). Swift may still have made copies of its own that this cannot
    /// reach (docs/SECURITY.md, "Key handling in memory").
    func wipe() {
        BusValue.wipeShared(value)
    }
}
