import Foundation
import Latchkey
import XCTest

/// OSX/sec/Security/Regressions/secitem/si-42-identity.m, ported to the public library against the real
/// agent, with Apple's certificates and key. Every check is ported; one behaves differently by design:
///
/// - After the key item is deleted, si-42 adds back the identity it read from the keychain. Here a private
///   key read from the keychain is a reference to the agent's item (it never enters the process), so that
///   identity can no longer be added once its key item is gone: the add fails with errSecItemNotFound
///   (README, differences). The test then does what the README says a program should: build the identity
///   again from the certificate and a key the program holds (SecKeyCreateWithData, SecIdentityCreate), and
///   carries on with Apple's checks.
final class IdentityTests: ConformanceTestCase {
    private func privateKey() throws -> SecKey {
        var error: Unmanaged<CFError>?
        return try XCTUnwrap(
            SecKeyCreateWithData(
                try resource("apple/si-42-identity-k1.pkcs1.der") as CFData,
                [kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeyClass: kSecAttrKeyClassPrivate] as NSDictionary, &error
            ),
            "create private key")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-42-identity.m, tests()
    func testSi42Identity() throws {
        let cert = try certificate("apple/si-42-identity-c1.der")
        let privKey = try privateKey()
        XCTAssertEqual(add([kSecValueRef: cert]).status, errSecSuccess, "add certificate")
        XCTAssertEqual(add([kSecValueRef: privKey]).status, errSecSuccess, "add private key")
        let identity = try XCTUnwrap(SecIdentityCreate(nil, cert, privKey), "create identity")

        // The key by its application label, the certificate by its public key hash.
        let digest = Data([
            0x46, 0xe0, 0x8a, 0x05, 0x63, 0x4d, 0x17, 0x3f, 0xca, 0xa4, 0xaa, 0xb6, 0x5a, 0xda, 0xcf, 0xba, 0x84, 0x22,
            0x7c, 0x23,
        ])  // _k1_digest, the localKeyID of Apple's PKCS#12 bag
        var (status, result) = copy([kSecClass: kSecClassKey, kSecAttrApplicationLabel: digest, kSecReturnRef: true])
        XCTAssertEqual(status, errSecSuccess, "lookup key")
        XCTAssertEqual(result as? SecKey, privKey, "keys match")
        (status, result) = copy([kSecClass: kSecClassCertificate, kSecAttrPublicKeyHash: digest, kSecReturnRef: true])
        XCTAssertEqual(status, errSecSuccess, "lookup certificate")
        XCTAssertEqual(result as? SecCertificate, cert, "certificates match")

        // The identity by the key's label.
        (status, result) = copy([kSecClass: kSecClassIdentity, kSecAttrApplicationLabel: digest, kSecReturnRef: true])
        XCTAssertEqual(status, errSecSuccess, "lookup identity")
        let resultIdentity = try XCTUnwrap(result as? SecIdentity, "found identity?")
        XCTAssertEqual(resultIdentity, identity, "identities match")
        var resultCert: SecCertificate?
        XCTAssertEqual(SecIdentityCopyCertificate(resultIdentity, &resultCert), errSecSuccess, "get cert from identity")
        XCTAssertEqual(resultCert, cert, "certificates match")

        XCTAssertEqual(delete([kSecValueRef: cert]), errSecSuccess, "delete certificate via ref")
        XCTAssertEqual(copy([kSecValueRef: cert]).status, errSecItemNotFound, "verify certificate is gone")
        XCTAssertEqual(delete([kSecValueRef: privKey]), errSecSuccess, "delete key via ref")
        XCTAssertEqual(copy([kSecValueRef: privKey]).status, errSecItemNotFound, "verify key is gone")

        // Another certificate first, so that certificate and key rows are not in step.
        let appleCA = try certificate("apple/si-42-identity-c0.der")
        XCTAssertEqual(add([kSecValueRef: appleCA]).status, errSecSuccess, "add apple ca certificate")

        // The identity read from the keychain holds a reference to the key item just deleted (see above).
        XCTAssertEqual(
            add([kSecValueRef: resultIdentity, kSecReturnPersistentRef: true]).status, errSecItemNotFound,
            "latchkey: an identity whose key item was deleted cannot be added back")
        let rebuilt = try XCTUnwrap(SecIdentityCreate(nil, cert, try privateKey()), "identity from a key we hold")

        // Add the identity; a second add is a duplicate that returns nothing.
        let identityAdd: [CFString: Any] = [kSecValueRef: rebuilt, kSecReturnPersistentRef: true]
        let (addStatus, persist) = add(identityAdd)
        XCTAssertEqual(addStatus, errSecSuccess, "add identity ref")
        XCTAssertNotNil(persist, "got back persistent ref")
        let again = add(identityAdd)
        XCTAssertEqual(again.status, errSecDuplicateItem, "fail to add identity ref again")
        XCTAssertNil(again.result, "no persistent ref this time")

        let persistFind: [CFString: Any] = [kSecReturnRef: true, kSecValuePersistentRef: persist as Any]
        XCTAssertEqual(copy(persistFind).status, errSecSuccess, "find identity by persistent ref")
        XCTAssertTrue(copy(persistFind).result is SecIdentity, "an identity")

        // The identity, the key and the certificate, each by ref, give a persistent ref.
        for item in [rebuilt as AnyObject, privKey, cert] {
            let (found, ref) = copy([kSecReturnPersistentRef: true, kSecValueRef: item])
            XCTAssertEqual(found, errSecSuccess, "find persistent ref for \(item)")
            XCTAssertTrue(ref is Data, "good persistent ref")
        }

        XCTAssertEqual(delete(identityAdd), errSecSuccess, "delete identity by identity ref")
        XCTAssertEqual(copy(persistFind).status, errSecItemNotFound, "identity by persistent ref is no longer there")
        let (backStatus, persistBack) = add(identityAdd)
        XCTAssertEqual(backStatus, errSecSuccess, "add identity ref back")

        let persistDelete: [CFString: Any] = [kSecValuePersistentRef: persistBack as Any]
        XCTAssertEqual(delete(persistDelete), errSecSuccess, "delete identity by persistent ref")
        XCTAssertEqual(copy(persistDelete).status, errSecItemNotFound, "identity by persistent ref is no longer there")

        // An identity added with a label: both halves carry it.
        XCTAssertEqual(add([kSecValueRef: rebuilt, kSecAttrLabel: "zomg"]).status, errSecSuccess, "add identity ref")
        XCTAssertEqual(
            SecItemCopyMatching([kSecClass: kSecClassIdentity, kSecAttrLabel: "zomg"] as NSDictionary, nil),
            errSecSuccess,
            "find identity by label")
        let (certStatus, zomgCert) = copy([kSecClass: kSecClassCertificate, kSecAttrLabel: "zomg", kSecReturnRef: true])
        XCTAssertEqual(certStatus, errSecSuccess, "find cert by label")
        let (keyStatus, zomgKey) = copy([kSecClass: kSecClassKey, kSecAttrLabel: "zomg", kSecReturnRef: true])
        XCTAssertEqual(keyStatus, errSecSuccess, "find key by label")

        // The identity's label is its certificate's: relabelling the key leaves it, the certificate's moves it.
        let newLabel: [CFString: Any] = [kSecAttrLabel: "zzzomg"]
        XCTAssertEqual(update([kSecValueRef: zomgKey as Any], newLabel), errSecSuccess, "update label for key")
        let zomgQuery: [CFString: Any] = [kSecReturnRef: true, kSecAttrLabel: "zomg", kSecClass: kSecClassIdentity]
        XCTAssertEqual(copy(zomgQuery).status, errSecSuccess, "still finding zomg ident")
        XCTAssertEqual(update([kSecValueRef: zomgCert as Any], newLabel), errSecSuccess, "update label for cert")
        XCTAssertEqual(copy(zomgQuery).status, errSecItemNotFound, "no longer find identity by label")
        let zzzomgQuery: [CFString: Any] = [kSecReturnRef: true, kSecAttrLabel: "zzzomg", kSecClass: kSecClassIdentity]
        let (zzzStatus, zomgIdentity) = copy(zzzomgQuery)
        XCTAssertEqual(zzzStatus, errSecSuccess, "finding ident with zzzomg label")

        // By issuer: the normalised form, and the full DER Name that Apple's client normalises.
        var data: CFData?
        data = SecCertificateCopyNormalizedIssuerSequence(cert)
        let normalized = try XCTUnwrap(data as Data?)
        for issuer in [normalized, try resource("apple/si-42-identity-issuer-name.der.hex")] {
            let (found, byIssuer) = copy([kSecAttrIssuer: issuer, kSecClass: kSecClassIdentity, kSecReturnRef: true])
            XCTAssertEqual(found, errSecSuccess, "find identity by cert issuer")
            XCTAssertEqual(byIssuer as? SecIdentity, zomgIdentity as? SecIdentity, "should be same as zomg_idnt")
        }

        XCTAssertEqual(delete(zzzomgQuery), errSecSuccess, "delete ident with zzzomg label")
        XCTAssertEqual(delete([kSecValueRef: appleCA]), errSecSuccess, "delete apple ca certificate")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-42-identity.m, test_no_identity_for_mismatch_keys()
    func testNoIdentityForMismatchKeys() throws {
        let cert = try certificate("apple/si-42-identity-c1.der")
        XCTAssertNotNil(SecIdentityCreate(nil, cert, try privateKey()), "create identity")
        let (wrongKey, _) = try generatePair(kSecAttrKeyTypeRSA, 2048, [kSecUseDataProtectionKeychain: true])
        XCTAssertNil(SecIdentityCreate(nil, cert, wrongKey), "No mismatched identity")
    }
}
