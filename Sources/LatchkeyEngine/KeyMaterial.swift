import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets

/// The engine's one door to the asymmetric cryptography of LatchkeyCrypto: what a key's or a
/// certificate's bytes say about it (the attributes Apple derives when a `SecKey` or `SecCertificate`
/// is added), and the private-key operations the agent performs for its callers.
enum KeyMaterial {
    /// `kSecAttrKeyType` numbers.
    static func algorithm(_ keyType: Int64) throws(SecError) -> AsymmetricKey.Algorithm {
        switch keyType {
        case KeyReference.typeRSA: return .rsa
        case KeyReference.typeEC: return .ec
        default: throw SecError(SecStatus.unimplemented, "key type \(keyType) is not supported (RSA 42 and EC 73 are)")
        }
    }

    static func keyType(_ algorithm: AsymmetricKey.Algorithm) -> Int64 {
        switch algorithm {
        case .rsa: KeyReference.typeRSA
        case .ec: KeyReference.typeEC
        }
    }

    /// Parses a key's external representation; errSecDecode when the bytes are not such a key.
    /// `stored`: the bytes come from a keychain item, so they were validated when it was added and
    /// authenticated when it was opened; OpenSSL's (costly) key check is skipped.
    static func key(_ material: [UInt8], keyType: Int64, keyClass: Int64, stored: Bool = false) throws(SecError)
        -> AsymmetricKey
    {
        let algorithm = try algorithm(keyType)
        guard keyClass == KeyReference.classPublic || keyClass == KeyReference.classPrivate else {
            throw SecError(
                SecStatus.unimplemented, "key class \(keyClass) is not supported (public 0 and private 1 are)")
        }
        do {
            return try AsymmetricKey(
                externalRepresentation: material, algorithm: algorithm,
                isPrivate: keyClass == KeyReference.classPrivate, validate: !stored)
        } catch {
            throw SecError(
                SecStatus.decode,
                "the key data is not a \(algorithm == .rsa ? "RSA" : "EC") "
                    + "\(keyClass == KeyReference.classPrivate ? "private" : "public") key: \(error)")
        }
    }

    /// The reference of a key the caller holds (public half, size), from its external representation.
    /// `material` is nil for a private key: a reference carries its bytes only when it is public, and then
    /// the bytes as parsed, never the stored blob as such.
    static func reference(material: [UInt8], keyType: Int64, keyClass: Int64, stored: Bool = false) throws(SecError)
        -> KeyReference
    {
        let key = try key(material, keyType: keyType, keyClass: keyClass, stored: stored)
        return KeyReference(
            keyType: keyType, keyClass: keyClass, sizeInBits: Int64(key.sizeInBits),
            publicKey: key.publicKeyBytes, material: key.isPrivate ? nil : key.publicKeyBytes)
    }

    /// The attributes Apple derives for a key added through `kSecValueRef` (secitem-semantics §7.1):
    /// class, `klbl` = SHA-1 of the public key bytes, type, sizes, and the default usage flags.
    static func attributes(of key: KeyReference) -> SecDictionary {
        key.derivedAttributes(applicationLabel: SHA1.hash(key.publicKey))
    }

    /// The attributes Apple derives for a certificate added through `kSecValueRef` (secitem-semantics
    /// §7.2), and the certificate's public key hash. errSecDecode when the bytes are not a certificate.
    static func attributes(ofCertificate der: [UInt8]) throws(SecError) -> SecDictionary {
        let certificate = try certificate(der)
        var attributes: SecDictionary = [
            SecAttr.certificateType: .int(Int64(certificate.version)),
            SecAttr.certificateEncoding: .int(3),  // DER
            SecAttr.subject: .data(certificate.normalizedSubject),
            SecAttr.issuer: .data(certificate.normalizedIssuer),
            SecAttr.serialNumber: .data(certificate.serialNumber),
            SecAttr.publicKeyHash: .data(certificate.publicKeyHash),
        ]
        if let summary = certificate.subjectSummary { attributes[SecAttr.label] = .string(summary) }
        if let skid = certificate.subjectKeyIdentifier { attributes[SecAttr.subjectKeyID] = .data(skid) }
        return attributes
    }

    static func certificate(_ der: [UInt8]) throws(SecError) -> X509Certificate {
        do {
            return try X509Certificate(der: der)
        } catch {
            throw SecError(SecStatus.decode, "not a DER-encoded X.509 certificate: \(error)")
        }
    }

    /// A `kSecAttrIssuer` or `kSecAttrSubject` value from a query, in the stored (normalised content)
    /// form: a full DER Name is converted as Apple's client does; anything else is left alone.
    static func normalizedName(_ value: SecValue) -> SecValue {
        guard case .data(let bytes) = value else { return value }
        return .data(X509Certificate.normalizedName(fromQueryValue: bytes))
    }

    /// A new private key's external representation.
    static func generate(keyType: Int64, sizeInBits: Int64) throws(SecError) -> (
        material: SecretBytes, publicKey: [UInt8]
    ) {
        let key: AsymmetricKey
        do {
            switch try algorithm(keyType) {
            case .rsa: key = try AsymmetricKey.generateRSA(bits: Int(sizeInBits))
            case .ec: key = try AsymmetricKey.generateEC(bits: Int(sizeInBits))
            }
            return (try key.externalRepresentation(), key.publicKeyBytes)
        } catch let error as SecError {
            throw error
        } catch {
            throw SecError(
                SecStatus.param,
                "cannot generate a \(keyType == KeyReference.typeRSA ? "RSA" : "EC") key "
                    + "of \(sizeInBits) bits: \(error)")
        }
    }

    /// What `SecKeyCopyKeyExchangeResult` passes besides the algorithm.
    struct ExchangeParameters {
        var peer: [UInt8]
        var requestedSize: Int?
        var sharedInfo: [UInt8]
    }

    /// A private-key operation on a stored key's material.
    static func perform(
        _ operation: KeyOperation, algorithm: String, input: [UInt8], exchange: ExchangeParameters,
        material: [UInt8], keyType: Int64, keyClass: Int64
    ) throws(SecError) -> [UInt8] {
        if operation == .export { return material }
        return try perform(
            operation, algorithm: algorithm, input: input, exchange: exchange,
            key: key(material, keyType: keyType, keyClass: keyClass, stored: true), keyType: keyType)
    }

    /// A sign, decrypt or exchange operation with an imported key (export needs the stored bytes).
    static func perform(
        _ operation: KeyOperation, algorithm: String, input: [UInt8], exchange: ExchangeParameters,
        key: AsymmetricKey, keyType: Int64
    ) throws(SecError) -> [UInt8] {
        do {
            switch operation {
            case .sign:
                guard let algorithm = SignatureAlgorithm(rawValue: algorithm), key.supports(algorithm) else {
                    throw unsupported(algorithm, operation)
                }
                return try key.sign(algorithm, input)
            case .decrypt:
                guard let algorithm = EncryptionAlgorithm(rawValue: algorithm), key.supports(algorithm) else {
                    throw unsupported(algorithm, operation)
                }
                return try key.decrypt(algorithm, input).withUnsafeBytes { Array($0) }
            case .exchange:
                guard let algorithm = KeyExchangeAlgorithm(rawValue: algorithm), key.supports(algorithm) else {
                    throw unsupported(algorithm, operation)
                }
                let peer = try self.key(exchange.peer, keyType: keyType, keyClass: KeyReference.classPublic)
                return try key.keyExchange(
                    algorithm, with: peer, requestedSize: exchange.requestedSize,
                    sharedInfo: exchange.sharedInfo
                ).withUnsafeBytes { Array($0) }
            case .export:
                throw SecError(SecStatus.internalComponent, "export needs the stored key bytes")
            }
        } catch let error as SecError {
            throw error
        } catch {
            // Apple reports a failed decryption (bad padding, a wrong tag) and bad input as errSecParam.
            throw SecError(SecStatus.param, "\(operation.rawValue) with \(algorithm) failed: \(error)")
        }
    }

    private static func unsupported(_ algorithm: String, _ operation: KeyOperation) -> SecError {
        SecError(
            SecStatus.unimplemented, "algorithm \(algorithm) is not supported for \(operation.rawValue) by this key")
    }
}
