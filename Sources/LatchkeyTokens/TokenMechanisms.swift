import CP11Kit
import LatchkeyCrypto
import LatchkeyModel

/// A `SecKeyAlgorithm` as a PKCS#11 operation (docs/TOKENS.md, "Operations"): the mechanism, its
/// parameters, the input the token is given (a message is hashed here first, since many tokens, SoftHSM's
/// and most smart cards', offer only the raw mechanisms), and what is done to the token's output.
struct TokenMechanism: Sendable {
    enum Parameters: Sendable {
        case none
        case pss(hash: CK_MECHANISM_TYPE, mgf: CK_RSA_PKCS_MGF_TYPE, saltLength: CK_ULONG)
        case oaep(hash: CK_MECHANISM_TYPE, mgf: CK_RSA_PKCS_MGF_TYPE)
    }

    var kind: PKCS11Module.SinglePart
    var mechanism: CK_MECHANISM_TYPE
    var parameters: Parameters
    var input: [UInt8]
    /// ECDSA with X9.62 output: the token's r ‖ s becomes a DER signature.
    var derSignature: Bool

    /// The mechanism for `algorithm` on a key of `keyType`; errSecUnimplemented for what a token cannot do
    /// here, errSecParam for input of the wrong size.
    init(operation: KeyOperation, algorithm name: String, keyType: Int64, input: [UInt8]) throws(SecError) {
        switch operation {
        case .sign:
            guard let algorithm = SignatureAlgorithm(rawValue: name),
                (algorithm.keyAlgorithm == .rsa) == (keyType == KeyReference.typeRSA)
            else { throw Self.unsupported(name, operation) }
            try self.init(signing: algorithm, name: name, input: input)
        case .decrypt:
            try self.init(decrypting: name, keyType: keyType, input: input)
        case .exchange, .export:
            throw Self.unsupported(name, operation)
        }
    }

    private init(decrypting name: String, keyType: Int64, input: [UInt8]) throws(SecError) {
        guard let algorithm = EncryptionAlgorithm(rawValue: name), keyType == KeyReference.typeRSA else {
            throw Self.unsupported(name, .decrypt)
        }
        kind = .decrypt
        derSignature = false
        self.input = input
        switch name {
        case EncryptionAlgorithm.rsaEncryptionRaw.rawValue:
            mechanism = CK_MECHANISM_TYPE(CKM_RSA_X_509)
            parameters = .none
        case EncryptionAlgorithm.rsaEncryptionPKCS1.rawValue:
            mechanism = CK_MECHANISM_TYPE(CKM_RSA_PKCS)
            parameters = .none
        default:
            // OAEP alone: the AES-GCM and ECIES variants decrypt a key first and then data, which a
            // token's single operation does not cover.
            guard name.hasPrefix("algid:encrypt:RSA:OAEP:"), !name.hasSuffix(":AESGCM"), let digest = algorithm.digest
            else { throw Self.unsupported(name, .decrypt) }
            mechanism = CK_MECHANISM_TYPE(CKM_RSA_PKCS_OAEP)
            parameters = .oaep(hash: Self.hashMechanism(digest), mgf: Self.mgf(digest))
        }
    }

    private init(signing algorithm: SignatureAlgorithm, name: String, input: [UInt8]) throws(SecError) {
        kind = .sign
        derSignature = false
        parameters = .none
        var digest = input
        if let hash = algorithm.digest {
            if algorithm.hashesInput {
                do {
                    digest = try hash.hash(input)
                } catch {
                    throw SecError(SecStatus.param, "hashing the message failed: \(error)")
                }
            } else if input.count != hash.size {
                throw SecError(SecStatus.param, "\(name) signs a digest of \(hash.size) bytes, not \(input.count)")
            }
        }
        if name.contains(":ECDSA:") {
            mechanism = CK_MECHANISM_TYPE(CKM_ECDSA)
            derSignature = !name.contains("RFC4754")
            self.input = digest
        } else if name.contains("PKCS1v15") {
            mechanism = CK_MECHANISM_TYPE(CKM_RSA_PKCS)
            if let hash = algorithm.digest {
                guard let prefix = TokenDER.digestInfoPrefix(hash.size) else {
                    throw Self.unsupported(name, .sign)
                }
                self.input = prefix + digest
            } else {
                self.input = digest  // digest-PKCS1v15 without a hash: the caller's DigestInfo as it is
            }
        } else if name.contains("PSS") {
            guard let hash = algorithm.digest else { throw Self.unsupported(name, .sign) }
            mechanism = CK_MECHANISM_TYPE(CKM_RSA_PKCS_PSS)
            parameters = .pss(hash: Self.hashMechanism(hash), mgf: Self.mgf(hash), saltLength: CK_ULONG(hash.size))
            self.input = digest
        } else if algorithm == .rsaSignatureRaw {
            mechanism = CK_MECHANISM_TYPE(CKM_RSA_X_509)
            self.input = input
        } else {
            throw Self.unsupported(name, .sign)
        }
    }

    static func hashMechanism(_ digest: DigestAlgorithm) -> CK_MECHANISM_TYPE {
        switch digest {
        case .sha1: CK_MECHANISM_TYPE(CKM_SHA_1)
        case .sha224: CK_MECHANISM_TYPE(CKM_SHA224)
        case .sha256: CK_MECHANISM_TYPE(CKM_SHA256)
        case .sha384: CK_MECHANISM_TYPE(CKM_SHA384)
        case .sha512: CK_MECHANISM_TYPE(CKM_SHA512)
        }
    }

    static func mgf(_ digest: DigestAlgorithm) -> CK_RSA_PKCS_MGF_TYPE {
        switch digest {
        case .sha1: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA1)
        case .sha224: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA224)
        case .sha256: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA256)
        case .sha384: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA384)
        case .sha512: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA512)
        }
    }

    static func unsupported(_ name: String, _ operation: KeyOperation) -> SecError {
        SecError(SecStatus.unimplemented, "algorithm \(name) is not supported for \(operation.rawValue) by a token key")
    }

    /// Runs the operation on the module's thread: the token's output, transformed.
    func run(
        _ module: PKCS11Module, session: CK_SESSION_HANDLE, key: CK_OBJECT_HANDLE, login: (() -> CK_RV)?
    ) -> Result<[UInt8], PKCS11Module.Failure> {
        var mechanismValue = CK_MECHANISM(mechanism: mechanism, pParameter: nil, ulParameterLen: 0)
        let result: Result<[UInt8], PKCS11Module.Failure>
        switch parameters {
        case .none:
            result = module.singlePart(kind, session, key: key, mechanism: &mechanismValue, input: input, login: login)
        case .pss(let hash, let mgf, let saltLength):
            var pss = CK_RSA_PKCS_PSS_PARAMS(hashAlg: hash, mgf: mgf, sLen: saltLength)
            result = withUnsafeMutablePointer(to: &pss) { pointer in
                mechanismValue.pParameter = UnsafeMutableRawPointer(pointer)
                mechanismValue.ulParameterLen = CK_ULONG(MemoryLayout<CK_RSA_PKCS_PSS_PARAMS>.size)
                return module.singlePart(
                    kind, session, key: key, mechanism: &mechanismValue, input: input, login: login)
            }
        case .oaep(let hash, let mgf):
            var oaep = CK_RSA_PKCS_OAEP_PARAMS(
                hashAlg: hash, mgf: mgf, source: CK_RSA_PKCS_OAEP_SOURCE_TYPE(CKZ_DATA_SPECIFIED), pSourceData: nil,
                ulSourceDataLen: 0)
            result = withUnsafeMutablePointer(to: &oaep) { pointer in
                mechanismValue.pParameter = UnsafeMutableRawPointer(pointer)
                mechanismValue.ulParameterLen = CK_ULONG(MemoryLayout<CK_RSA_PKCS_OAEP_PARAMS>.size)
                return module.singlePart(
                    kind, session, key: key, mechanism: &mechanismValue, input: input, login: login)
            }
        }
        guard derSignature, case .success(let raw) = result else { return result }
        return .success(TokenDER.ecdsaSignature(raw: raw))
    }
}
