/// `SecKeyIsAlgorithmSupported`: which algorithm a key can run for which operation.
///
/// The rules follow Security's key backends and adaptors (`SecRSAKey.c`, `SecECKey.m`,
/// `SecKeyAdaptors.m`): private keys sign, decrypt and (EC) exchange keys; public keys verify and
/// encrypt; ECDSA and ECIES need EC keys, the RSA algorithms RSA keys; RSA-PSS signing and OAEP or
/// PKCS#1 v1.5 encryption need a modulus long enough for the padding (2·hLen+2 and 11 bytes).
/// Apple's backend answers yes to a few combinations that cannot work (verifying through an RSA
/// private key's raw decryption); latchkey answers no to those.
extension AsymmetricKey {
    /// Apple's `SecKeyOperationType`, with Apple's raw values.
    package enum Operation: Int, Sendable, CaseIterable {
        /// `kSecKeyOperationTypeSign` (`SecKeyCreateSignature`).
        case sign = 0
        /// `kSecKeyOperationTypeVerify` (`SecKeyVerifySignature`).
        case verify = 1
        /// `kSecKeyOperationTypeEncrypt` (`SecKeyCreateEncryptedData`).
        case encrypt = 2
        /// `kSecKeyOperationTypeDecrypt` (`SecKeyCreateDecryptedData`).
        case decrypt = 3
        /// `kSecKeyOperationTypeKeyExchange` (`SecKeyCopyKeyExchangeResult`).
        case keyExchange = 4
    }

    /// Whether this key supports `algorithm` (an Apple algorithm string) for `operation`.
    package func isSupported(_ operation: Operation, algorithm: String) -> Bool {
        Self.isSupported(
            operation, algorithm: algorithm, keyAlgorithm: self.algorithm, isPrivate: isPrivate,
            sizeInBits: sizeInBits)
    }

    /// The same answer from a key's attributes alone (type, class, size), for code that does not
    /// hold the key itself (the library answers for keys that stay inside the agent).
    package static func isSupported(
        _ operation: Operation, algorithm: String, keyAlgorithm: Algorithm,
        isPrivate: Bool, sizeInBits: Int
    ) -> Bool {
        let blockSize = (sizeInBits + 7) / 8
        switch operation {
        case .sign, .verify:
            guard let signature = SignatureAlgorithm(rawValue: algorithm), signature.keyAlgorithm == keyAlgorithm,
                isPrivate == (operation == .sign)
            else { return false }
            if operation == .sign, signature.scheme == .rsaPSS, let digest = signature.digest {
                return blockSize >= 2 * digest.size + 2
            }
            return true
        case .encrypt, .decrypt:
            guard let encryption = EncryptionAlgorithm(rawValue: algorithm), encryption.keyAlgorithm == keyAlgorithm,
                isPrivate == (operation == .decrypt)
            else { return false }
            if let minimum = encryption.minimumRSABlockSize { return blockSize >= minimum }
            return true
        case .keyExchange:
            return KeyExchangeAlgorithm(rawValue: algorithm) != nil && keyAlgorithm == .ec && isPrivate
        }
    }

    /// Whether this key can use a signature algorithm in the direction its class allows: signing
    /// for a private key, verifying for a public one.
    package func supports(_ algorithm: SignatureAlgorithm) -> Bool {
        isSupported(isPrivate ? .sign : .verify, algorithm: algorithm.rawValue)
    }

    /// Whether this key can use an encryption algorithm in the direction its class allows:
    /// decrypting for a private key, encrypting for a public one.
    package func supports(_ algorithm: EncryptionAlgorithm) -> Bool {
        isSupported(isPrivate ? .decrypt : .encrypt, algorithm: algorithm.rawValue)
    }

    /// Whether this key can run a key-exchange algorithm (an EC private key).
    package func supports(_ algorithm: KeyExchangeAlgorithm) -> Bool {
        isSupported(.keyExchange, algorithm: algorithm.rawValue)
    }
}
