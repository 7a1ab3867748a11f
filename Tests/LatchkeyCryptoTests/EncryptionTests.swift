import Foundation
import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// RSA encryption against `openssl pkeyutl`, ECIES against ciphertexts Apple's Security framework
/// produced, ECDH and the X9.63 KDF against `openssl pkeyutl -derive` and `openssl kdf`.
final class EncryptionTests: XCTestCase {
    private let plaintext = Array("attack at dawn, bring the keychain".utf8)

    private func assertCryptoError(
        _ expression: @autoclosure () throws -> Any, _ expected: (CryptoError) -> Bool,
        _ message: String = "", line: UInt = #line
    ) {
        XCTAssertThrowsError(try expression(), message, line: line) {
            XCTAssertTrue(($0 as? CryptoError).map(expected) ?? false, "\(message): \($0)", line: line)
        }
    }

    // MARK: RSA

    func testOAEPInteroperatesWithOpenSSL() throws {
        let workspace = try OpenSSLWorkspace()
        let key = TestKeys.rsa2048, publicKey = try key.publicKey()
        try workspace.write("rsa.pem", try key.pkcs8PEM())
        try workspace.write("rsa-public.pem", try key.subjectPublicKeyInfoPEM())
        try workspace.write("plain", plaintext)
        let cases: [(EncryptionAlgorithm, String)] = [
            (.rsaEncryptionOAEPSHA1, "sha1"), (.rsaEncryptionOAEPSHA224, "sha224"),
            (.rsaEncryptionOAEPSHA256, "sha256"), (.rsaEncryptionOAEPSHA384, "sha384"),
            (.rsaEncryptionOAEPSHA512, "sha512"),
        ]
        for (algorithm, md) in cases {
            let options = [
                "-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:\(md)", "-pkeyopt", "rsa_mgf1_md:\(md)",
            ]
            try workspace.run(
                ["pkeyutl", "-encrypt", "-pubin", "-inkey", "rsa-public.pem", "-in", "plain", "-out", "theirs"]
                    + options)
            XCTAssertEqual(try key.decrypt(algorithm, workspace.read("theirs")).unsafeCopyToArray(), plaintext, md)
            try workspace.write("ours", try publicKey.encrypt(algorithm, plaintext))
            XCTAssertEqual(
                try workspace.run(["pkeyutl", "-decrypt", "-inkey", "rsa.pem", "-in", "ours"] + options), plaintext, md)
        }
        // OpenSSL's default OAEP hash is SHA-1, for both OAEP and MGF1, as Apple's OAEPSHA1.
        try workspace.run([
            "pkeyutl", "-encrypt", "-pubin", "-inkey", "rsa-public.pem", "-in", "plain", "-out", "default",
            "-pkeyopt", "rsa_padding_mode:oaep",
        ])
        XCTAssertEqual(
            try key.decrypt(.rsaEncryptionOAEPSHA1, workspace.read("default")).unsafeCopyToArray(), plaintext)
        // A ciphertext for another hash does not decrypt.
        assertCryptoError(
            try key.decrypt(.rsaEncryptionOAEPSHA256, workspace.read("default")), { $0 == .authenticationFailed })
    }

    func testPKCS1AndRawEncryptionInteroperateWithOpenSSL() throws {
        let workspace = try OpenSSLWorkspace()
        let key = TestKeys.rsa2048, publicKey = try key.publicKey()
        try workspace.write("rsa.pem", try key.pkcs8PEM())
        try workspace.write("rsa-public.pem", try key.subjectPublicKeyInfoPEM())
        try workspace.write("plain", plaintext)
        try workspace.run([
            "pkeyutl", "-encrypt", "-pubin", "-inkey", "rsa-public.pem", "-in", "plain", "-out", "theirs",
        ])
        XCTAssertEqual(try key.decrypt(.rsaEncryptionPKCS1, workspace.read("theirs")).unsafeCopyToArray(), plaintext)
        try workspace.write("ours", try publicKey.encrypt(.rsaEncryptionPKCS1, plaintext))
        XCTAssertEqual(try workspace.run(["pkeyutl", "-decrypt", "-inkey", "rsa.pem", "-in", "ours"]), plaintext)

        let raw = try publicKey.encrypt(.rsaEncryptionRaw, plaintext)
        XCTAssertEqual(raw.count, 256)
        try workspace.write("raw", raw)
        let padded = [UInt8](repeating: 0, count: 256 - plaintext.count) + plaintext
        XCTAssertEqual(
            try workspace.run([
                "pkeyutl", "-decrypt", "-inkey", "rsa.pem", "-in", "raw", "-pkeyopt", "rsa_padding_mode:none",
            ]), padded)
        XCTAssertEqual(
            try key.decrypt(.rsaEncryptionRaw, raw).unsafeCopyToArray(), padded,
            "raw decryption returns the whole block")
    }

    func testRSAEncryptionLimitsAndErrors() throws {
        let key = TestKeys.rsa2048, publicKey = try key.publicKey()
        let isInvalid: (CryptoError) -> Bool = { if case .invalidInput = $0 { true } else { false } }
        let isUnsupported: (CryptoError) -> Bool = { if case .unsupported = $0 { true } else { false } }
        // OAEP-SHA256 fits 256 - 2·32 - 2 = 190 bytes; PKCS#1 v1.5 fits 245.
        XCTAssertNoThrow(try publicKey.encrypt(.rsaEncryptionOAEPSHA256, [UInt8](repeating: 7, count: 190)))
        assertCryptoError(try publicKey.encrypt(.rsaEncryptionOAEPSHA256, [UInt8](repeating: 7, count: 191)), isInvalid)
        XCTAssertNoThrow(try publicKey.encrypt(.rsaEncryptionPKCS1, [UInt8](repeating: 7, count: 245)))
        assertCryptoError(try publicKey.encrypt(.rsaEncryptionPKCS1, [UInt8](repeating: 7, count: 246)), isInvalid)
        assertCryptoError(try publicKey.encrypt(.rsaEncryptionRaw, [UInt8](repeating: 0xFF, count: 256)), isInvalid)
        // Direction and type.
        assertCryptoError(try key.encrypt(.rsaEncryptionOAEPSHA256, plaintext), isUnsupported)
        assertCryptoError(try publicKey.decrypt(.rsaEncryptionOAEPSHA256, [1, 2, 3]), isUnsupported)
        assertCryptoError(try key.decrypt(.eciesEncryptionStandardX963SHA256AESGCM, [1, 2, 3]), isUnsupported)
        // Garbage and truncated ciphertexts.
        let ciphertext = try publicKey.encrypt(.rsaEncryptionOAEPSHA256, plaintext)
        var damaged = ciphertext
        damaged[100] ^= 0x01
        assertCryptoError(try key.decrypt(.rsaEncryptionOAEPSHA256, damaged), { $0 == .authenticationFailed })
        assertCryptoError(try key.decrypt(.rsaEncryptionOAEPSHA256, ciphertext + [0]), isInvalid)
        assertCryptoError(
            try key.decrypt(.rsaEncryptionPKCS1, [UInt8](repeating: 0x55, count: 256)), { $0 == .authenticationFailed })
    }

    func testOAEPWithAESGCMWrapsASessionKey() throws {
        let workspace = try OpenSSLWorkspace()
        let big = try AsymmetricKey.generateRSA(bits: 4096)  // the one 4096-bit key: it selects AES-256
        for (key, sessionKeySize) in [(TestKeys.rsa2048, 16), (big, 32)] {
            let publicKey = try key.publicKey()
            let sealed = try publicKey.encrypt(.rsaEncryptionOAEPSHA256AESGCM, plaintext)
            XCTAssertEqual(sealed.count, key.blockSize + plaintext.count + 16)
            XCTAssertEqual(try key.decrypt(.rsaEncryptionOAEPSHA256AESGCM, sealed).unsafeCopyToArray(), plaintext)
            // The first block is an OAEP-wrapped AES key of Apple's size, as OpenSSL sees it.
            try workspace.write("rsa.pem", try key.pkcs8PEM())
            try workspace.write("wrapped", Array(sealed.prefix(key.blockSize)))
            let sessionKey = try workspace.run([
                "pkeyutl", "-decrypt", "-inkey", "rsa.pem", "-in", "wrapped", "-pkeyopt", "rsa_padding_mode:oaep",
                "-pkeyopt", "rsa_oaep_md:sha256", "-pkeyopt", "rsa_mgf1_md:sha256",
            ])
            XCTAssertEqual(sessionKey.count, sessionKeySize)
            // Every byte is covered: wrapped key, ciphertext and tag.
            for index in [3, key.blockSize + 1, sealed.count - 1] {
                var damaged = sealed
                damaged[index] ^= 0x80
                XCTAssertThrowsError(try key.decrypt(.rsaEncryptionOAEPSHA256AESGCM, damaged), "byte \(index)")
            }
            assertCryptoError(
                try key.decrypt(.rsaEncryptionOAEPSHA256AESGCM, Array(sealed.prefix(key.blockSize + 15))),
                { if case .invalidInput = $0 { true } else { false } })
        }
    }

    // MARK: ECIES

    /// Ciphertexts made by Apple's `SecKeyCreateEncryptedData` on an Apple device, published with
    /// their SEC1 private keys in github.com/jedda/ECIES (`ecies_test.go`, MIT licence). Each
    /// plaintext is the case's name. These are the independent check of the construction.
    private static let appleVectors: [(name: String, algorithm: EncryptionAlgorithm, key: String, ciphertext: String)] =
        [
            (
                "P256-SHA224-0IV", .eciesEncryptionCofactorX963SHA224AESGCM,
                "MHcCAQEEIJyzfcyptwjYkgdcFhfJlztLPmcfyzyCFs7NoQuCbAAhoAoGCCqGSM49AwEHoUQDQgAE7WttwmG8qki5bU2utMaugBWbWD9Jx/UPzgnGxthgHteyqPGofBjBwPZTbxj+lrIGNyHRdbOkSusD7051WG8nmg==",
                "BPIMheQOrz0l9wEjcOHQEQ16D9Go8Sm8bEM3LAgMEHUf/eHy3u0oVlfh2po9ocPCuKG2bQ28wlsQ0N6SNJ3O3auS/QeoUogLVcJ3+R1OOeixEJyqeUkn6zB8LcqoZ+Y2"
            ),
            (
                "P256-SHA256-VIV", .eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
                "MHcCAQEEIHGhxnpu3kG/nW5ozDZJ+TTFQvL6MynCcQWD6jHV4p0UoAoGCCqGSM49AwEHoUQDQgAEzgFYw3Rqc72IIYHV7JH6M245n/nLnxyre1A7sc5nOt31ZyfJQLXGs4dY0cggne28ueXHID5lKz1JNChY49NHYg==",
                "BI6sBCGyf916GQSV3DHOvmFxOmzbV9pq08wcOdKaepP2/Qtepj9M71dYkzXf6OqIstDyyVIxfnAMfUpxZzoCHDbalYRzzwhqHwg7K6RNl1F29PVdLNtJH498yJSfloW/"
            ),
            (
                "P384-SHA224-0IV", .eciesEncryptionCofactorX963SHA224AESGCM,
                "MIGkAgEBBDAI18KI/52miF1/gGpYOOnvkwjXwGz/tOedlcbWhMTEfiAaAHSVTSzxd9Pyun5cRoCgBwYFK4EEACKhZANiAAR498VhIR9tTgyOUFdzJEQyqOU8mCs4mKPHzTcEUgfpX1J85ZOw+oFARLddhHQ7JvmgZfYQNC6CrzoL3H5ockG54Zkq2RV6kmn5mSonQGjD4lJ3ic0B2Jpb4DQHWDbcstA=",
                "BHwqDkIP8+8hwXDlJ3W/Uw4oqVHhpg3Dbj/lx2ukwjwL3xSFNgGpNRhXUIv0Fs2qGxUXGKMGNIa+8/ebvHNuJqjV0pAR52HZ79dQWpB/esIy8/w514TSLSmp6fIk4Yt7gCy+mBKN/bC9nIwMCjiPSdpuhCt+Jc+KZZjgJ7BLUT4="
            ),
            (
                "P384-SHA384-VIV", .eciesEncryptionCofactorVariableIVX963SHA384AESGCM,
                "MIGkAgEBBDC5Lt6wBRiiEC2O71i3lv8Jtgg+YP4Y3gCj7B7nOtdQO/5PQPRjpFPJ3ft0yjbzHEagBwYFK4EEACKhZANiAAToVnztZKN1KVhot+MoN3CiPDZ0PoCDXrdP1uHQ61nz4XVrNdxgxyNUJC6cd0gsbujme66wxrq28zqWYBKvrFtIlS4W+NkuyCi5nABkHno7alAWv/fD7aQ8A3ZmWZohsaU=",
                "BM45TREbxELfwpTVBmltz+sB3vhkM85m/yiAsE8JSNmXVOeeUGzmxP5Z2jegApPxtOS8ilfhTN/m2XkOoJWGw3MKuekq5V5PcdvAi5xKcoOEynkS7uAKS3nhBH/+g+9/iNoTcRSrEpbgm8dOCGe+VRQ7hK8vI0ZRw74kernlNDw="
            ),
            (
                "P384-SHA384-0IV", .eciesEncryptionCofactorX963SHA384AESGCM,
                "MIGkAgEBBDCveSReIMZa6hbWVgmESfu/jMpEqIldBHcx4nQ46zxJ+hvm4lnesKrn0P0BkFYZ0jSgBwYFK4EEACKhZANiAAT0ctzSPeNUinYOJdYtCafXAsTKHLGY4WPPRM8pYL5x1UrvnPN0G1yiF4QsTX2Pgyvh2qositdwRGxv3ruo1yR8TcztRXugZF4a5xmcZuQW8hcEmPuk+xS5XXUMzryiEQc=",
                "BERkPl0YZUa9r7JV4W6n/rxsGBpzwdCpIgRaOKxRYuLHx3v5hGnTM1oGOEZzJQnpfvtperUyFfnPB5GP5ioxK4YkrqfjIlF0ip18v30o7TWReJ+MrKYWcC7/TGe/SxPagi/zX9uz4N0Jzp3GFarI5LUQ9mJNIna/3ajuBC9Du94="
            ),
            (
                "P521-SHA512-0IV", .eciesEncryptionCofactorX963SHA512AESGCM,
                "MIHcAgEBBEIAqKpwdZ9JdC3JdVpM7gj1Bgkep3LNTkYWqEYqwNe5w7oyzDh1yU0LVZzefyZNdaagU6DGNdZ+5u9cHqnh9GrQ5gWgBwYFK4EEACOhgYkDgYYABAD+MDxfbvbe9ZRZcZgWyDBbpf3JxHii0iScjxNqNWClJWlehHfX8niGE6VNktRQ3lMIwDSvUy3Esiex3gu8RHZnwAGzPjwLm1/w2YbOfp2TCNTL8m6eYUfLU0SNW7B61koL+Sk50yTHoseP7+lmM2t8x6uKsyLdo+XCIevpW8IEh0s5wg==",
                "BABqJoMa89aD0rRkZ+WrmWTeqUfcr3uvLmyk7KlbWPm45m0ptDeqsaxFtqeM0VR6IoBMQcvcCcW+hzlLPr7i15LJlADzKYe7al7Vp10fJBnnhM2K7Z12o/VtOynEEt+ed5IkP9BiopN/3swl79caHQqXxX+SWQijwosMh0rGFJZPjsPFcPpe8Aj9CiJ3y0hRH1D4fp+qtpx9LOBLyuXvRwdFi0Y="
            ),
            (
                "P521-SHA512-VIV", .eciesEncryptionCofactorVariableIVX963SHA512AESGCM,
                "MIHcAgEBBEIAg0dkiDMo6frSBz50hC2luT3T0oMv/nPnu4nUR+x9PWuGic4cBHkrlrUOwyTBfGmug8fYxNy2ytJhBEyCGookSK+gBwYFK4EEACOhgYkDgYYABACAYs51q+pIrE2k92p2ltjs0iBHTe8Kj+w1+x5hfmXS1tX0aR+kabb5qe6Q83Bsvq/dmj3R59XWmIaTz6tJprSr2gDqS2i9wpWspmDND2dYvhKECXj099CQt19V94qYyUjbXMEDkpvq5ZWQ2DBOnR3XnuwWOYj+Pskg0lseKkok4CtJ4A==",
                "BABIki+hjR7WmHUZz03yTelbH+eEwn0Dtpv8Fxwh7cyaue2ZceAytjlbQD2YA3FHC2Z0NMlk/B0C2Es8dZmPE9keEgBsUW0PjT4CyefgFIc2YEm5yDpcbJEKhj6FlGnOir1nJz8ZMTMdiY6vIrRCBLo6+Ek7iSfQIOGrdER3ESnE/gOdWsd4O3VmDQrwLboTIjKfngmBGlC5sdYUzSbQlsX2UUs="
            ),
        ]

    func testECIESDecryptsCiphertextsFromApple() throws {
        for vector in Self.appleVectors {
            let keyDER = Array(Data(base64Encoded: vector.key)!)
            let ciphertext = Array(Data(base64Encoded: vector.ciphertext)!)
            let key = try AsymmetricKey(der: SecretBytes(copying: keyDER))
            XCTAssertEqual(
                try key.decrypt(vector.algorithm, ciphertext).unsafeCopyToArray(), Array(vector.name.utf8), vector.name)
            // Standard and cofactor ECDH agree on the NIST curves.
            let standard = EncryptionAlgorithm(
                rawValue: vector.algorithm.rawValue.replacingOccurrences(of: ":ECDHC:", with: ":ECDH:"))!
            XCTAssertEqual(
                try key.decrypt(standard, ciphertext).unsafeCopyToArray(), Array(vector.name.utf8), vector.name)
            // The other IV mode does not open it.
            let otherIV =
                vector.algorithm.rawValue.hasSuffix("-KDFIV")
                ? String(vector.algorithm.rawValue.dropLast("-KDFIV".count)) : vector.algorithm.rawValue + "-KDFIV"
            if let other = EncryptionAlgorithm(rawValue: otherIV) {
                XCTAssertThrowsError(try key.decrypt(other, ciphertext), vector.name)
            }
        }
    }

    func testECIESRoundTripsEveryVariantOnEveryCurve() throws {
        let eciesAlgorithms = EncryptionAlgorithm.allCases.filter { $0.keyAlgorithm == .ec }
        XCTAssertEqual(eciesAlgorithms.count, 18)
        for key in TestKeys.ecKeys {
            let publicKey = try key.publicKey()
            for algorithm in eciesAlgorithms {
                let sealed = try publicKey.encrypt(algorithm, plaintext)
                // ephemeral point ‖ ciphertext ‖ 16-byte tag
                XCTAssertEqual(sealed.count, 1 + 2 * key.blockSize + plaintext.count + 16)
                XCTAssertEqual(sealed.first, 0x04)
                XCTAssertEqual(
                    try key.decrypt(algorithm, sealed).unsafeCopyToArray(), plaintext, "\(algorithm) \(key.sizeInBits)")
                XCTAssertNotEqual(
                    try publicKey.encrypt(algorithm, plaintext), sealed, "a fresh ephemeral key each time")
            }
            // Empty plaintext works too.
            let empty = try publicKey.encrypt(.eciesEncryptionStandardVariableIVX963SHA256AESGCM, [])
            XCTAssertEqual(try key.decrypt(.eciesEncryptionStandardVariableIVX963SHA256AESGCM, empty).count, 0)
        }
    }

    func testECIESDetectsTamperingAndWrongKeys() throws {
        let key = TestKeys.p256, publicKey = try key.publicKey()
        let algorithm = EncryptionAlgorithm.eciesEncryptionStandardVariableIVX963SHA256AESGCM
        let sealed = try publicKey.encrypt(algorithm, plaintext)
        // A changed ciphertext or tag byte fails authentication.
        for index in [65, 65 + plaintext.count / 2, sealed.count - 1] {
            var damaged = sealed
            damaged[index] ^= 0x01
            assertCryptoError(try key.decrypt(algorithm, damaged), { $0 == .authenticationFailed }, "byte \(index)")
        }
        // A changed ephemeral key is either off the curve or the wrong key.
        var movedPoint = sealed
        movedPoint[40] ^= 0x01
        XCTAssertThrowsError(try key.decrypt(algorithm, movedPoint))
        // Too short: no room for the point, or for the tag.
        assertCryptoError(
            try key.decrypt(algorithm, Array(sealed.prefix(64))), { if case .invalidInput = $0 { true } else { false } }
        )
        assertCryptoError(
            try key.decrypt(algorithm, Array(sealed.prefix(65 + 15))),
            { if case .invalidInput = $0 { true } else { false } })
        // Another key, and a ciphertext for another curve.
        let stranger = try AsymmetricKey.generateEC(bits: 256)
        assertCryptoError(try stranger.decrypt(algorithm, sealed), { $0 == .authenticationFailed })
        XCTAssertThrowsError(try TestKeys.p384.decrypt(algorithm, sealed))
    }

    // MARK: Key exchange

    func testECDHAndX963MatchOpenSSL() throws {
        let workspace = try OpenSSLWorkspace()
        for key in TestKeys.ecKeys {
            let peer = try AsymmetricKey.generateEC(bits: key.sizeInBits)
            try workspace.write("ours.pem", try key.pkcs8PEM())
            try workspace.write("peer-public.pem", try peer.publicKey().subjectPublicKeyInfoPEM())
            let expected = try workspace.run([
                "pkeyutl", "-derive", "-inkey", "ours.pem", "-peerkey", "peer-public.pem",
            ])
            let shared = try key.keyExchange(.ecdhKeyExchangeStandard, with: peer.publicKey())
            XCTAssertEqual(shared.unsafeCopyToArray(), expected)
            XCTAssertEqual(shared.count, key.blockSize)
            XCTAssertTrue(
                try peer.keyExchange(.ecdhKeyExchangeCofactor, with: key.publicKey()).constantTimeEquals(shared))

            let sharedInfo: [UInt8] = Array("latchkey shared info".utf8)
            for (algorithm, md) in [
                (KeyExchangeAlgorithm.ecdhKeyExchangeStandardX963SHA256, "SHA256"),
                (.ecdhKeyExchangeCofactorX963SHA512, "SHA512"), (.ecdhKeyExchangeStandardX963SHA1, "SHA1"),
            ] {
                let derived = try key.keyExchange(
                    algorithm, with: peer.publicKey(), requestedSize: 77, sharedInfo: sharedInfo)
                let reference = try workspace.text([
                    "kdf", "-keylen", "77", "-kdfopt", "digest:\(md)", "-kdfopt", "hexkey:\(hex(expected))",
                    "-kdfopt", "hexinfo:\(hex(sharedInfo))", "X963KDF",
                ])
                XCTAssertEqual(derived.unsafeCopyToArray(), bytes(fromColonHex: reference), "\(algorithm)")
            }
        }
        let isInvalid: (CryptoError) -> Bool = { if case .invalidInput = $0 { true } else { false } }
        assertCryptoError(
            try TestKeys.p256.keyExchange(.ecdhKeyExchangeStandardX963SHA256, with: TestKeys.p256.publicKey()),
            isInvalid)
        assertCryptoError(
            try TestKeys.p256.keyExchange(.ecdhKeyExchangeStandard, with: TestKeys.p384.publicKey()), isInvalid)
        assertCryptoError(
            try TestKeys.p256.keyExchange(
                .ecdhKeyExchangeStandardX963SHA256, with: TestKeys.p256.publicKey(),
                requestedSize: 0), isInvalid)
        assertCryptoError(
            try TestKeys.p256.publicKey().keyExchange(.ecdhKeyExchangeStandard, with: TestKeys.p256),
            { if case .unsupported = $0 { true } else { false } })
    }
}
