import CP11Kit
import LatchkeyCrypto
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets

/// A token key operation as a whole (docs/TOKENS.md, "Operations"): one mechanism on the token (a
/// signature, a decryption), or an algorithm of two steps whose private-key step runs on the token and
/// the rest here, by the code that runs it for software keys (LatchkeyCrypto), so that both give Apple's
/// bytes:
///
/// - key exchange: ECDH on the token (`C_DeriveKey`, `CKM_ECDH1_DERIVE`), then the X9.63 KDF here for the
///   KDF variants;
/// - ECIES decryption: ECDH on the token with the ciphertext's ephemeral key, then the KDF and AES-GCM here;
/// - RSA-OAEP+AES-GCM decryption: the first modulus-size block unwrapped on the token (`CKM_RSA_PKCS_OAEP`),
///   then AES-GCM here.
///
/// The Cofactor variants use `CKM_ECDH1_DERIVE` too: on the NIST curves, the only ones keys have here, the
/// cofactor is 1 and cofactor ECDH gives the same secret (as LatchkeyCrypto's own code says), while
/// `CKM_ECDH1_COFACTOR_DERIVE` is missing from many tokens (SoftHSM 2.6 among them); one mechanism for
/// both keeps the variants alike on every token.
///
/// Every check of the request (the algorithm against the key, the peer or ephemeral point on the key's
/// curve, the sizes) is made before the token is asked, so a bad request asks for no PIN.
struct TokenOperation: Sendable {
    /// What the token's step gives back: the result, or a secret for the step here.
    enum Output: Sendable {
        case bytes([UInt8])
        case secret(SecretBytes)
    }

    private enum Step: Sendable {
        case single(TokenMechanism)
        /// ECDH with a peer's X9.63 point (checked), the secret `length` bytes (the field size).
        case derive(peerPoint: [UInt8], length: Int)
        /// An AES key unwrapped with OAEP.
        case unwrap(TokenMechanism)
    }

    private enum Finish: Sendable {
        case none
        case exchange(KeyExchangeAlgorithm, requestedSize: Int?, sharedInfo: [UInt8])
        /// With the token key's public half, whose curve and sizes the step needs.
        case ecies(AsymmetricKey, ciphertext: [UInt8], digest: DigestAlgorithm, variableIV: Bool)
        case rsaAESGCM(AsymmetricKey, ciphertext: [UInt8])
    }

    private let step: Step
    private let finish: Finish
    private let name: String
    private let operation: KeyOperation

    /// The operation a request asks for; errSecUnimplemented for what the key or the token cannot do,
    /// errSecParam (errSecDecode for a peer key that does not parse, as for software keys) for bad input.
    init(_ request: TokenKeyRequest) throws(SecError) {
        try self.init(
            request.operation, algorithm: request.algorithm, item: request.item, input: request.input,
            peer: request.peer, requestedSize: request.requestedSize, sharedInfo: request.sharedInfo)
    }

    /// `init(_:)` from the request's parts.
    init(
        _ operation: KeyOperation, algorithm name: String, item: TokenItem, input: [UInt8], peer: [UInt8] = [],
        requestedSize: Int? = nil, sharedInfo: [UInt8] = []
    ) throws(SecError) {
        self.name = name
        self.operation = operation
        let plan: (Step, Finish)
        if operation == .exchange {
            plan = try Self.exchange(name, item, peer: peer, requestedSize: requestedSize, sharedInfo: sharedInfo)
        } else if operation == .decrypt, let algorithm = EncryptionAlgorithm(rawValue: name),
            Self.isTwoStep(algorithm)
        {
            plan = try Self.twoStepDecryption(algorithm, item, input: input)
        } else {
            plan = (
                .single(try TokenMechanism(operation: operation, algorithm: name, keyType: item.keyType, input: input)),
                .none
            )
        }
        (step, finish) = plan
    }

    /// ECDH with the peer's point (parsed and checked as for software keys), then what the algorithm asks.
    private static func exchange(
        _ name: String, _ item: TokenItem, peer peerBytes: [UInt8], requestedSize: Int?, sharedInfo: [UInt8]
    ) throws(SecError) -> (Step, Finish) {
        guard let algorithm = KeyExchangeAlgorithm(rawValue: name) else {
            throw TokenMechanism.unsupported(name, .exchange)
        }
        let own = try publicHalf(.keyExchange, name, item)
        let peer: AsymmetricKey
        do {
            peer = try AsymmetricKey(externalRepresentation: peerBytes, algorithm: .ec, isPrivate: false)
        } catch {
            throw SecError(SecStatus.decode, "the key data is not a EC public key: \(error)")
        }
        do throws(CryptoError) {
            try own.checkExchangePeer(peer)
            _ = try AsymmetricKey.keyExchangeOutputSize(algorithm, requestedSize: requestedSize)
        } catch {
            throw failed(.exchange, name, error)
        }
        return (
            .derive(peerPoint: peer.publicKeyBytes, length: own.blockSize),
            .exchange(algorithm, requestedSize: requestedSize, sharedInfo: sharedInfo)
        )
    }

    /// ECIES (ECDH with the ciphertext's ephemeral point) or RSA-OAEP+AES-GCM (the wrapped AES key).
    private static func twoStepDecryption(_ algorithm: EncryptionAlgorithm, _ item: TokenItem, input: [UInt8])
        throws(SecError) -> (Step, Finish)
    {
        let name = algorithm.rawValue
        let own = try publicHalf(.decrypt, name, item)
        guard let digest = algorithm.digest else { throw TokenMechanism.unsupported(name, .decrypt) }
        do throws(CryptoError) {
            if case .ecies(_, let variableIV) = algorithm.scheme {
                let ephemeral = try own.eciesEphemeralKey(input)
                return (
                    .derive(peerPoint: ephemeral.publicKeyBytes, length: own.blockSize),
                    .ecies(own, ciphertext: input, digest: digest, variableIV: variableIV)
                )
            }
            let wrapped = Array(try own.rsaAESGCMWrappedKey(input))
            return (
                .unwrap(TokenMechanism(oaepDecrypting: wrapped, digest: digest)), .rsaAESGCM(own, ciphertext: input)
            )
        } catch {
            throw failed(.decrypt, name, error)
        }
    }

    private static func isTwoStep(_ algorithm: EncryptionAlgorithm) -> Bool {
        switch algorithm.scheme {
        case .ecies, .rsaOAEPAESGCM: true
        case .rsaRaw, .rsaPKCS1, .rsaOAEP: false
        }
    }

    /// The token key's public half, as its item shows it (parsed and checked as SecItemAdd checks a key),
    /// once the algorithm is known to fit the key (errSecUnimplemented otherwise, as for software keys).
    private static func publicHalf(_ operation: AsymmetricKey.Operation, _ name: String, _ item: TokenItem)
        throws(SecError) -> AsymmetricKey
    {
        let keyOperation: KeyOperation = operation == .keyExchange ? .exchange : .decrypt
        let algorithm: AsymmetricKey.Algorithm
        switch item.keyType {
        case KeyReference.typeEC: algorithm = .ec
        case KeyReference.typeRSA: algorithm = .rsa
        default: throw TokenMechanism.unsupported(name, keyOperation)
        }
        guard
            AsymmetricKey.isSupported(
                operation, algorithm: name, keyAlgorithm: algorithm, isPrivate: true, sizeInBits: Int(item.sizeInBits))
        else { throw TokenMechanism.unsupported(name, keyOperation) }
        do throws(CryptoError) {
            let key = try AsymmetricKey(externalRepresentation: item.data, algorithm: algorithm, isPrivate: false)
            guard key.sizeInBits == Int(item.sizeInBits) else { throw CryptoError.invalidInput("size") }
            return key
        } catch {
            throw SecError(SecStatus.internalComponent, "the token key's public half does not parse: \(error)")
        }
    }

    /// Apple reports bad input and a failed decryption (a wrong tag) as errSecParam.
    private static func failed(_ operation: KeyOperation, _ name: String, _ error: CryptoError) -> SecError {
        SecError(SecStatus.param, "\(operation.rawValue) with \(name) failed: \(error)")
    }

    /// The token's step, on the module's thread.
    func run(
        _ module: PKCS11Module, session: CK_SESSION_HANDLE, key: CK_OBJECT_HANDLE, login: (() -> CK_RV)?
    ) -> Result<Output, PKCS11Module.Failure> {
        switch step {
        case .single(let mechanism):
            return mechanism.run(module, session: session, key: key, login: login).map { .bytes($0) }
        case .derive(let peerPoint, let length):
            return module.deriveECDH(session, key: key, peerPoint: peerPoint, length: length, login: login)
                .map { .secret($0) }
        case .unwrap(let mechanism):
            var result = mechanism.run(module, session: session, key: key, login: login)
            guard case .success(var unwrapped) = result else {
                return result.map { _ in .bytes([]) }
            }
            // The AES key goes to wiping storage; dropping `result` first leaves one copy of it, wiped.
            result = .success([])
            return .success(.secret(SecretBytes(consuming: &unwrapped)))
        }
    }

    /// The agent's step, with what the token gave back: the result.
    func complete(_ output: Output) throws(SecError) -> [UInt8] {
        let result: SecretBytes
        do throws(CryptoError) {
            switch (finish, output) {
            case (.none, .bytes(let bytes)):
                return bytes
            case (.exchange(let algorithm, let requestedSize, let sharedInfo), .secret(let secret)):
                result = try AsymmetricKey.keyExchangeResult(
                    algorithm, secret: secret, requestedSize: requestedSize, sharedInfo: sharedInfo)
            case (.ecies(let own, let ciphertext, let digest, let variableIV), .secret(let secret)):
                result = try own.eciesOpen(ciphertext, secret: secret, digest: digest, variableIV: variableIV)
            case (.rsaAESGCM(let own, let ciphertext), .secret(let sessionKey)):
                result = try own.rsaAESGCMOpen(ciphertext, sessionKey: sessionKey)
            default:
                throw CryptoError.invalidInput("the token's step gave no usable output")
            }
        } catch {
            throw Self.failed(operation, name, error)
        }
        // The caller's copy, as for software keys (the agent wipes a response's data once sent).
        return result.withUnsafeBytes { Array($0) }
    }
}

extension TokenMechanism {
    /// `CKM_RSA_PKCS_OAEP` with `digest` (and MGF1 of it, no label), for the wrapped key of RSA-OAEP+AES-GCM.
    init(oaepDecrypting input: [UInt8], digest: DigestAlgorithm) {
        kind = .decrypt
        mechanism = CK_MECHANISM_TYPE(CKM_RSA_PKCS_OAEP)
        parameters = .oaep(hash: Self.hashMechanism(digest), mgf: Self.mgf(digest))
        self.input = input
        derSignature = false
    }
}
