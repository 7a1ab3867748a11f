import CP11Kit
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto
@testable import LatchkeyTokens

/// Which step a token key operation takes on the token and which it leaves to the agent, and the checks
/// made before the token is asked (no module needed: a bad request never reaches one).
final class TokenOperationTests: XCTestCase {
    private func operation(
        _ key: AsymmetricKey, _ operation: KeyOperation, _ algorithm: String, input: [UInt8] = [],
        peer: [UInt8] = [], requestedSize: Int? = nil
    ) throws -> TokenOperation {
        let keyType = key.algorithm == .ec ? KeyReference.typeEC : KeyReference.typeRSA
        return try TokenOperation(
            operation, algorithm: algorithm,
            item: TokenItem(
                ref: [UInt8](repeating: 1, count: 16), itemClass: .key, attributes: [:], data: key.publicKeyBytes,
                keyType: keyType, keyClass: KeyReference.classPrivate, sizeInBits: Int64(key.sizeInBits)),
            input: input, peer: peer, requestedSize: requestedSize)
    }

    /// The status `body` fails with; nil when it succeeds.
    private func status(_ body: () throws -> Void) -> Int32? {
        do {
            try body()
            return nil
        } catch let error as SecError {
            return error.status
        } catch {
            return -1
        }
    }

    func testExchangeChecksThePeerAndTheSizeBeforeTheToken() throws {
        let key = try AsymmetricKey.generateEC(bits: 256)
        let peer = try AsymmetricKey.generateEC(bits: 256).publicKeyBytes
        XCTAssertNil(status { _ = try self.operation(key, .exchange, "algid:keyexchange:ECDH", peer: peer) })
        XCTAssertNil(
            status {
                _ = try self.operation(
                    key, .exchange, "algid:keyexchange:ECDHC:KDFX963:SHA256", peer: peer, requestedSize: 16)
            })
        // The KDF variants need a size in range.
        for size in [nil, 0, AsymmetricKey.maximumKeyExchangeOutput + 1] {
            XCTAssertEqual(
                status {
                    _ = try self.operation(
                        key, .exchange, "algid:keyexchange:ECDH:KDFX963:SHA256", peer: peer, requestedSize: size)
                }, SecStatus.param, "\(String(describing: size))")
        }
        // A peer on another curve, and one that is not a point at all (errSecDecode, as for software keys).
        let other = try AsymmetricKey.generateEC(bits: 384).publicKeyBytes
        XCTAssertEqual(
            status { _ = try self.operation(key, .exchange, "algid:keyexchange:ECDH", peer: other) },
            SecStatus.param)
        var offCurve = peer
        offCurve[40] ^= 1
        XCTAssertEqual(
            status { _ = try self.operation(key, .exchange, "algid:keyexchange:ECDH", peer: offCurve) },
            SecStatus.decode)
        // An RSA key, an unknown algorithm.
        let rsa = try AsymmetricKey.generateRSA(bits: 1024)
        XCTAssertEqual(
            status { _ = try self.operation(rsa, .exchange, "algid:keyexchange:ECDH", peer: peer) },
            SecStatus.unimplemented)
        XCTAssertEqual(
            status { _ = try self.operation(key, .exchange, "algid:keyexchange:DH", peer: peer) },
            SecStatus.unimplemented)
    }

    func testTwoStepDecryptionsCheckTheCiphertextBeforeTheToken() throws {
        let ec = try AsymmetricKey.generateEC(bits: 256)
        let ecies = EncryptionAlgorithm.eciesEncryptionStandardVariableIVX963SHA256AESGCM
        let sealed = try ec.publicKey().encrypt(ecies, Array("m".utf8))
        XCTAssertNil(status { _ = try self.operation(ec, .decrypt, ecies.rawValue, input: sealed) })
        XCTAssertEqual(
            status { _ = try self.operation(ec, .decrypt, ecies.rawValue, input: Array(sealed.prefix(80))) },
            SecStatus.param)
        var badPoint = sealed
        badPoint[5] ^= 1
        XCTAssertEqual(
            status { _ = try self.operation(ec, .decrypt, ecies.rawValue, input: badPoint) }, SecStatus.param)

        let rsa = try AsymmetricKey.generateRSA(bits: 1024)
        let wrapped = EncryptionAlgorithm.rsaEncryptionOAEPSHA256AESGCM
        let rsaSealed = try rsa.publicKey().encrypt(wrapped, Array("m".utf8))
        XCTAssertNil(status { _ = try self.operation(rsa, .decrypt, wrapped.rawValue, input: rsaSealed) })
        XCTAssertEqual(
            status {
                _ = try self.operation(rsa, .decrypt, wrapped.rawValue, input: Array(rsaSealed.prefix(140)))
            }, SecStatus.param)
        // Not for the other key type.
        XCTAssertEqual(
            status { _ = try self.operation(rsa, .decrypt, ecies.rawValue, input: sealed) },
            SecStatus.unimplemented)
        XCTAssertEqual(
            status { _ = try self.operation(ec, .decrypt, wrapped.rawValue, input: rsaSealed) },
            SecStatus.unimplemented)
    }

    /// The agent's step gives the software key's bytes from the secret the token would give.
    func testTheAgentsStepMatchesTheSoftwareKey() throws {
        let key = try AsymmetricKey.generateEC(bits: 384)
        let peer = try AsymmetricKey.generateEC(bits: 384)
        let operation = try self.operation(
            key, .exchange, "algid:keyexchange:ECDH:KDFX963:SHA512", peer: peer.publicKeyBytes, requestedSize: 40)
        let secret = try key.keyExchange(.ecdhKeyExchangeStandard, with: peer.publicKey())
        XCTAssertEqual(
            try operation.complete(.secret(secret)),
            try key.keyExchange(.ecdhKeyExchangeStandardX963SHA512, with: peer.publicKey(), requestedSize: 40)
                .withUnsafeBytes { Array($0) })
        // An output of the wrong kind, a secret of the wrong size: errSecParam, never a result.
        XCTAssertEqual(status { _ = try operation.complete(.bytes([1, 2, 3])) }, SecStatus.param)

        let ecies = EncryptionAlgorithm.eciesEncryptionCofactorX963SHA384AESGCM
        let sealed = try key.publicKey().encrypt(ecies, Array("plain".utf8))
        let decrypting = try self.operation(key, .decrypt, ecies.rawValue, input: sealed)
        let ephemeral = try AsymmetricKey(
            externalRepresentation: Array(sealed.prefix(97)), algorithm: .ec, isPrivate: false)
        let shared = try key.keyExchange(.ecdhKeyExchangeCofactor, with: ephemeral)
        XCTAssertEqual(try decrypting.complete(.secret(shared)), Array("plain".utf8))
        XCTAssertEqual(
            status { _ = try decrypting.complete(.secret(SecretBytes(count: 48))) }, SecStatus.param)
        XCTAssertEqual(
            status { _ = try decrypting.complete(.secret(SecretBytes(count: 47))) }, SecStatus.param)
    }

    func testRSAOAEPAESGCMRefusesAnAESKeyOfAnotherSize() throws {
        let rsa = try AsymmetricKey.generateRSA(bits: 1024)
        let wrapped = EncryptionAlgorithm.rsaEncryptionOAEPSHA1AESGCM
        let sealed = try rsa.publicKey().encrypt(wrapped, Array("m".utf8))
        let operation = try self.operation(rsa, .decrypt, wrapped.rawValue, input: sealed)
        let aesKey = try rsa.decrypt(.rsaEncryptionOAEPSHA1, Array(sealed.prefix(128)))
        XCTAssertEqual(aesKey.count, 16)
        XCTAssertEqual(try operation.complete(.secret(aesKey)), Array("m".utf8))
        // A module that hands back a 32-byte key for a 1024-bit modulus (whose AES key is 16 bytes) is
        // refused, even when the data was sealed under that very key.
        let longer = SecretBytes(copying: [UInt8](repeating: 7, count: 32))
        let forged =
            Array(sealed.prefix(128))
            + (try Array("forged".utf8).withUnsafeBytes {
                try AESGCMCore.seal(
                    $0, key: longer, iv: [UInt8](repeating: 0, count: 16), aad: rsa.publicKeyBytes)
            })
        let forgedOperation = try self.operation(rsa, .decrypt, wrapped.rawValue, input: forged)
        XCTAssertEqual(status { _ = try forgedOperation.complete(.secret(longer)) }, SecStatus.param)
        // The single-part algorithms stay one mechanism, whose output is the result.
        let oaep = try self.operation(rsa, .decrypt, "algid:encrypt:RSA:OAEP:SHA1", input: sealed)
        XCTAssertEqual(try oaep.complete(.bytes([7])), [7])
    }

    func testARefusedInitIsUnimplementedAndARefusedDecryptionParam() {
        let refused = TokenService.operationError(
            PKCS11Module.Failure(rv: CKR_ARGUMENTS_BAD, call: "C_DecryptInit"), "softhsm2:1")
        XCTAssertEqual(refused.status, SecStatus.unimplemented)
        let failed = TokenService.operationError(
            PKCS11Module.Failure(rv: CKR_ARGUMENTS_BAD, call: "C_Decrypt"), "softhsm2:1")
        XCTAssertEqual(failed.status, SecStatus.param)
        let notPermitted = TokenService.operationError(
            PKCS11Module.Failure(rv: CKR_KEY_FUNCTION_NOT_PERMITTED, call: "C_DeriveKey"), "softhsm2:1")
        XCTAssertEqual(notPermitted.status, SecStatus.param)
    }
}
