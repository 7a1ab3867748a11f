import Foundation
import Latchkey
import XCTest

/// Checks that si-40-seckey.c (RSA) and si-41-sececkey.c (EC) make in the same way.
enum KeyCreationChecks {
    // Apple: OSX/sec/Security/Regressions/secitem/si-40-seckey.c and si-41-sececkey.c, testcreatewithdata()
    static func run(_ test: ConformanceTestCase, type: CFString, bits: Int) throws {
        let (privateKey, publicKey) = try test.generatePair(type, bits, [kSecAttrIsPermanent: false])
        var parameters: [CFString: Any] = [
            kSecAttrKeyType: type, kSecAttrKeySizeInBits: bits, kSecAttrIsPermanent: false,
        ]
        var error: Unmanaged<CFError>?
        func create(_ data: Data, _ keyClass: CFString) -> SecKey? {
            parameters[kSecAttrKeyClass] = keyClass
            defer { _ = test.code(&error) }
            return SecKeyCreateWithData(data as CFData, parameters as NSDictionary, &error)
        }
        func modified(_ data: Data) -> Data {
            var copy = data
            copy[0] ^= 0xff
            return copy
        }

        let privateData = try XCTUnwrap(
            SecKeyCopyExternalRepresentation(privateKey, &error) as Data?, "priv key SecKeyCopyExternalRepresentation")
        XCTAssertEqual(create(privateData, kSecAttrKeyClassPrivate), privateKey, "priv keys differ")
        XCTAssertNil(create(privateData, kSecAttrKeyClassPublic), "priv key with invalid kSecAttrKeyClass")
        XCTAssertNil(create(modified(privateData), kSecAttrKeyClassPrivate), "priv key with invalid external data")

        let publicData = try XCTUnwrap(
            SecKeyCopyExternalRepresentation(publicKey, &error) as Data?, "pub key SecKeyCopyExternalRepresentation")
        XCTAssertEqual(create(publicData, kSecAttrKeyClassPublic), publicKey, "pub keys differ")
        XCTAssertNil(create(publicData, kSecAttrKeyClassPrivate), "pub key with invalid kSecAttrKeyClass")
        XCTAssertNil(create(modified(publicData), kSecAttrKeyClassPublic), "pub key with invalid external data")

        XCTAssertNil(create(publicData, kSecAttrKeyClassPrivate), "priv key with public external data")
        XCTAssertNil(create(privateData, kSecAttrKeyClassPublic), "pub key with private external data")
    }
}

/// Every entry of the dictionary Apple's SecKeyCopyAttributes gives for a key the process holds:
/// `SecKeyCopyAttributeDictionaryWithLocalKey` in OSX/sec/Security/SecKey.m, with the changes of
/// `SecRSAPublicKeyCopyAttributeDictionary` / `SecRSAPrivateKeyCopyAttributeDictionary` (SecRSAKey.c) and
/// `SecECPublicKeyCopyAttributeDictionary` (SecECKey.m).
enum KeyAttributeChecks {
    static func assertApplesDictionary(
        _ attributes: [String: Any], isPrivate: Bool, rsa: Bool = true, file: StaticString = #filePath,
        line: UInt = #line
    ) {
        func flag(_ name: CFString, _ expected: Bool) {
            XCTAssertTrue(
                attributes[name as String] as AnyObject === (expected ? kCFBooleanTrue : kCFBooleanFalse),
                "\(name) should be the CFBoolean \(expected), is \(String(describing: attributes[name as String]))",
                file: file, line: line)
        }
        XCTAssertEqual(attributes[kSecClass as String] as? String, kSecClassKey as String, file: file, line: line)
        XCTAssertEqual(
            attributes[kSecAttrKeyClass as String] as? String,
            (isPrivate ? kSecAttrKeyClassPrivate : kSecAttrKeyClassPublic) as String, file: file, line: line)
        XCTAssertEqual(
            attributes[kSecAttrKeyType as String] as? String, (rsa ? kSecAttrKeyTypeRSA : kSecAttrKeyTypeEC) as String,
            file: file, line: line)
        XCTAssertEqual((attributes[kSecAttrApplicationLabel as String] as? Data)?.count, 20, file: file, line: line)
        let size = attributes[kSecAttrKeySizeInBits as String] as? NSNumber
        XCTAssertNotNil(size, file: file, line: line)
        XCTAssertEqual(attributes[kSecAttrEffectiveKeySize as String] as? NSNumber, size, file: file, line: line)
        flag(kSecAttrIsPermanent, true)
        flag(kSecAttrIsPrivate, true)
        flag(kSecAttrIsModifiable, true)
        flag(kSecAttrIsSensitive, false)
        flag(kSecAttrWasAlwaysSensitive, false)
        flag(kSecAttrIsExtractable, true)
        flag(kSecAttrWasNeverExtractable, false)
        flag(kSecAttrCanEncrypt, !isPrivate)
        flag(kSecAttrCanDecrypt, isPrivate || rsa)
        flag(kSecAttrCanDerive, isPrivate && !rsa)
        flag(kSecAttrCanSign, isPrivate)
        flag(kSecAttrCanVerify, !isPrivate)
        flag(kSecAttrCanSignRecover, false)
        flag(kSecAttrCanVerifyRecover, false)
        flag(kSecAttrCanWrap, !isPrivate)
        flag(kSecAttrCanUnwrap, isPrivate)
        XCTAssertTrue(
            attributes[kSecValueData as String] is Data, "the key's external representation", file: file, line: line)
    }
}
