import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// Signatures made here verify with `openssl`, and signatures `openssl` made verify here.
final class SignatureTests: XCTestCase {
    private let message = Array("The quick brown fox jumps over the lazy dog, signed.".utf8)

    /// Writes the key's PEM files (private, public) into the workspace.
    private func exportKey(_ key: AsymmetricKey, to workspace: OpenSSLWorkspace, name: String) throws {
        try workspace.write("\(name).pem", try key.pkcs8PEM())
        try workspace.write("\(name)-public.pem", try key.subjectPublicKeyInfoPEM())
    }

    private static let dgstNames: [DigestAlgorithm: String] = [
        .sha1: "-sha1", .sha224: "-sha224", .sha256: "-sha256",
        .sha384: "-sha384", .sha512: "-sha512",
    ]

    func testECDSAInteroperatesWithOpenSSL() throws {
        let workspace = try OpenSSLWorkspace()
        try workspace.write("message", message)
        let algorithms: [SignatureAlgorithm] = [
            .ecdsaSignatureMessageX962SHA1, .ecdsaSignatureMessageX962SHA224,
            .ecdsaSignatureMessageX962SHA256, .ecdsaSignatureMessageX962SHA384,
            .ecdsaSignatureMessageX962SHA512,
        ]
        for (index, key) in TestKeys.ecKeys.enumerated() {
            let name = "ec\(index)"
            try exportKey(key, to: workspace, name: name)
            let publicKey = try key.publicKey()
            for algorithm in algorithms {
                let digestFlag = Self.dgstNames[algorithm.digest!]!
                // Ours → openssl.
                let signature = try key.sign(algorithm, message)
                try workspace.write("ours.sig", signature)
                let verified = try workspace.text([
                    "dgst", digestFlag, "-verify", "\(name)-public.pem", "-signature", "ours.sig", "message",
                ])
                XCTAssertTrue(verified.contains("Verified OK"), "\(algorithm) on \(key.sizeInBits): \(verified)")
                // openssl → ours.
                try workspace.run(["dgst", digestFlag, "-sign", "\(name).pem", "-out", "theirs.sig", "message"])
                let theirs = try workspace.read("theirs.sig")
                XCTAssertTrue(try publicKey.verify(algorithm, message, signature: theirs), "\(algorithm)")
                XCTAssertFalse(try publicKey.verify(algorithm, message + [0], signature: theirs))
                var damaged = theirs
                damaged[damaged.count - 3] ^= 0x40
                XCTAssertFalse(try publicKey.verify(algorithm, message, signature: damaged))
                XCTAssertFalse(try publicKey.verify(algorithm, message, signature: []))
                // The digest form of the same algorithm agrees with the message form.
                let digestAlgorithm = SignatureAlgorithm(
                    rawValue: algorithm.rawValue.replacingOccurrences(of: "message-", with: "digest-"))!
                let digest = try algorithm.digest!.hash(message)
                XCTAssertTrue(try publicKey.verify(digestAlgorithm, digest, signature: theirs))
                XCTAssertTrue(try publicKey.verify(.ecdsaSignatureDigestX962, digest, signature: theirs))
            }
        }
    }

    func testECDSADigestSignatureVerifiesWithPkeyutl() throws {
        let workspace = try OpenSSLWorkspace()
        let key = TestKeys.p384
        try exportKey(key, to: workspace, name: "ec")
        let digest = try DigestAlgorithm.sha384.hash(message)
        try workspace.write("digest", digest)
        try workspace.write("ours.sig", try key.sign(.ecdsaSignatureDigestX962SHA384, digest))
        let result = try workspace.text([
            "pkeyutl", "-verify", "-pubin", "-inkey", "ec-public.pem", "-in", "digest", "-sigfile", "ours.sig",
        ])
        XCTAssertTrue(result.contains("Signature Verified Successfully"), result)
    }

    func testRFC4754SignaturesAreRawHalves() throws {
        let workspace = try OpenSSLWorkspace()
        for (index, key) in TestKeys.ecKeys.enumerated() {
            try exportKey(key, to: workspace, name: "ec\(index)")
            let digest = try DigestAlgorithm.sha256.hash(message)
            let raw = try key.sign(.ecdsaSignatureRFC4754, digest)
            XCTAssertEqual(raw.count, 2 * key.blockSize)
            XCTAssertTrue(try key.publicKey().verify(.ecdsaSignatureRFC4754, digest, signature: raw))
            XCTAssertFalse(try key.publicKey().verify(.ecdsaSignatureRFC4754, digest, signature: Array(raw.dropLast())))
            // The DER form of the same r and s is a signature OpenSSL accepts over the same digest.
            try workspace.write("digest", digest)
            try workspace.write("der.sig", AsymmetricKey.derECDSASignature(fromRaw: raw, fieldSize: key.blockSize)!)
            let result = try workspace.text([
                "pkeyutl", "-verify", "-pubin", "-inkey", "ec\(index)-public.pem",
                "-in", "digest", "-sigfile", "der.sig",
            ])
            XCTAssertTrue(result.contains("Signature Verified Successfully"), result)
        }
    }

    /// Apple's RFC 4754 algorithms with a named hash, by their string values in Security's
    /// OSX/sec/Security/SecKeyAdaptors.m: the message ones hash and run the digest one, which checks the
    /// digest's length and signs as X9.62 over it, converting to `r ‖ s`; `digest-RFC4754` takes a digest
    /// of any length. For every curve and hash the three round trip and verify one another's signatures,
    /// each half is the curve's byte size (for P-521, 66 bytes whose first is 0 or 1: left-padded), and the
    /// same signature converted to DER (here, independently of the library) verifies as X9.62, as an X9.62
    /// signature of the same key converted to `r ‖ s` verifies as RFC 4754.
    func testRFC4754AlgorithmsForEveryCurveAndHash() throws {
        func algorithm(_ name: String) throws -> SignatureAlgorithm {
            try XCTUnwrap(SignatureAlgorithm(rawValue: name), name)
        }
        let anyDigest = try algorithm("algid:sign:ECDSA:digest-RFC4754")
        let hashes: [(String, DigestAlgorithm)] = [
            ("SHA1", .sha1), ("SHA224", .sha224), ("SHA256", .sha256), ("SHA384", .sha384), ("SHA512", .sha512),
        ]
        for key in TestKeys.ecKeys {
            let publicKey = try key.publicKey()
            let width = try XCTUnwrap([256: 32, 384: 48, 521: 66][key.sizeInBits])
            for (name, hash) in hashes {
                let messageAlgorithm = try algorithm("algid:sign:ECDSA:message-RFC4754:\(name)")
                let digestAlgorithm = try algorithm("algid:sign:ECDSA:digest-RFC4754:\(name)")
                let x962 = try algorithm("algid:sign:ECDSA:digest-X962:\(name)")
                let digest = try hash.hash(message)
                let what = "P-\(key.sizeInBits) \(name)"
                for (signer, input) in [(messageAlgorithm, message), (digestAlgorithm, digest), (anyDigest, digest)] {
                    let raw = try key.sign(signer, input)
                    XCTAssertEqual(raw.count, 2 * width, what)
                    if key.sizeInBits == 521 { XCTAssertTrue(raw[0] <= 1 && raw[width] <= 1, what) }
                    XCTAssertTrue(try publicKey.verify(messageAlgorithm, message, signature: raw), what)
                    XCTAssertTrue(try publicKey.verify(digestAlgorithm, digest, signature: raw), what)
                    XCTAssertTrue(try publicKey.verify(anyDigest, digest, signature: raw), what)
                    XCTAssertTrue(try publicKey.verify(x962, digest, signature: Self.der(raw, width)), what)
                    XCTAssertFalse(try publicKey.verify(messageAlgorithm, message + [0], signature: raw), what)
                    XCTAssertFalse(
                        try publicKey.verify(messageAlgorithm, message, signature: Array(raw.dropLast())), what)
                    XCTAssertFalse(try publicKey.verify(messageAlgorithm, message, signature: [0] + raw), what)
                }
                let der = try key.sign(x962, digest)
                XCTAssertTrue(try publicKey.verify(digestAlgorithm, digest, signature: Self.raw(der, width)), what)
                XCTAssertFalse(try publicKey.verify(digestAlgorithm, digest, signature: der), "DER is not r ‖ s")
                XCTAssertThrowsError(try key.sign(digestAlgorithm, digest + [0]), "bad digest size") {
                    guard case .invalidInput = $0 as? CryptoError else { return XCTFail("\($0)") }
                }
                XCTAssertThrowsError(try publicKey.sign(messageAlgorithm, message), "a public key does not sign")
            }
        }
    }

    /// DER `Ecdsa-Sig-Value` from `r ‖ s`, written here rather than with the library's converter.
    private static func der(_ raw: [UInt8], _ width: Int) -> [UInt8] {
        func integer(_ half: ArraySlice<UInt8>) -> [UInt8] {
            var bytes = Array(half.drop { $0 == 0 })
            if bytes.isEmpty || bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
            return [0x02, UInt8(bytes.count)] + bytes
        }
        let body = integer(raw.prefix(width)) + integer(raw.suffix(width))
        return [0x30] + (body.count < 0x80 ? [UInt8(body.count)] : [0x81, UInt8(body.count)]) + body
    }

    /// `r ‖ s`, each left-padded to `width`, from a DER `Ecdsa-Sig-Value`.
    private static func raw(_ der: [UInt8], _ width: Int) -> [UInt8] {
        var index = der[1] & 0x80 == 0 ? 2 : 2 + Int(der[1] & 0x7f)
        var out: [UInt8] = []
        for _ in 0..<2 {
            let length = Int(der[index + 1])
            let value = Array(der[(index + 2)..<(index + 2 + length)].drop { $0 == 0 })
            out += [UInt8](repeating: 0, count: width - value.count) + value
            index += 2 + length
        }
        return out
    }

    func testRSAPKCS1v15AndPSSInteroperateWithOpenSSL() throws {
        let workspace = try OpenSSLWorkspace()
        try workspace.write("message", message)
        let key = TestKeys.rsa2048, publicKey = try key.publicKey()
        try exportKey(key, to: workspace, name: "rsa")
        let pkcs1: [SignatureAlgorithm] = [
            .rsaSignatureMessagePKCS1v15SHA1, .rsaSignatureMessagePKCS1v15SHA224,
            .rsaSignatureMessagePKCS1v15SHA256, .rsaSignatureMessagePKCS1v15SHA384,
            .rsaSignatureMessagePKCS1v15SHA512,
        ]
        let pss: [SignatureAlgorithm] = [
            .rsaSignatureMessagePSSSHA1, .rsaSignatureMessagePSSSHA224, .rsaSignatureMessagePSSSHA256,
            .rsaSignatureMessagePSSSHA384, .rsaSignatureMessagePSSSHA512,
        ]
        for algorithm in pkcs1 + pss {
            let digest = algorithm.digest!
            let flag = Self.dgstNames[digest]!
            let isPSS = pss.contains(algorithm)
            let mdName = String(flag.dropFirst())
            let pssOptions =
                isPSS
                ? [
                    "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest",
                    "-sigopt", "rsa_mgf1_md:\(mdName)",
                ] : []
            let signature = try key.sign(algorithm, message)
            XCTAssertEqual(signature.count, 256)
            try workspace.write("ours.sig", signature)
            let verified = try workspace.text(
                ["dgst", flag] + pssOptions + ["-verify", "rsa-public.pem", "-signature", "ours.sig", "message"])
            XCTAssertTrue(verified.contains("Verified OK"), "\(algorithm): \(verified)")

            try workspace.run(["dgst", flag] + pssOptions + ["-sign", "rsa.pem", "-out", "theirs.sig", "message"])
            let theirs = try workspace.read("theirs.sig")
            XCTAssertTrue(try publicKey.verify(algorithm, message, signature: theirs), "\(algorithm)")
            XCTAssertFalse(try publicKey.verify(algorithm, Array(message.dropLast()), signature: theirs))
            let digestAlgorithm = SignatureAlgorithm(
                rawValue: algorithm.rawValue.replacingOccurrences(of: "message-", with: "digest-"))!
            XCTAssertTrue(try publicKey.verify(digestAlgorithm, digest.hash(message), signature: theirs))
            if isPSS {
                // Apple's PSS uses a salt exactly as long as the digest; a zero-length salt is refused.
                try workspace.run([
                    "dgst", flag, "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:0",
                    "-sigopt", "rsa_mgf1_md:\(mdName)", "-sign", "rsa.pem", "-out", "nosalt.sig", "message",
                ])
                XCTAssertFalse(try publicKey.verify(algorithm, message, signature: workspace.read("nosalt.sig")))
                // Two signatures of the same message differ (random salt).
                XCTAssertNotEqual(try key.sign(algorithm, message), signature)
            } else {
                XCTAssertEqual(try key.sign(algorithm, message), signature, "PKCS#1 v1.5 is deterministic")
            }
        }
    }

    func testRawRSASignaturesRecoverWithOpenSSL() throws {
        let workspace = try OpenSSLWorkspace()
        let key = TestKeys.rsa2048
        try exportKey(key, to: workspace, name: "rsa")
        // digest-PKCS1v15 without a hash: type-1 padding around the input, no DigestInfo.
        let input = Array((0..<36).map { UInt8($0) })
        try workspace.write("pkcs1.sig", try key.sign(.rsaSignatureDigestPKCS1v15Raw, input))
        XCTAssertEqual(
            try workspace.run([
                "pkeyutl", "-verifyrecover", "-pubin", "-inkey", "rsa-public.pem", "-in", "pkcs1.sig",
                "-pkeyopt", "rsa_padding_mode:pkcs1",
            ]), input)
        // Raw: the input as a number.
        let rawInput: [UInt8] = [0x01, 0x02, 0x03, 0x04]
        let rawSignature = try key.sign(.rsaSignatureRaw, rawInput)
        try workspace.write("raw.sig", rawSignature)
        let recovered = try workspace.run([
            "pkeyutl", "-verifyrecover", "-pubin", "-inkey", "rsa-public.pem", "-in", "raw.sig",
            "-pkeyopt", "rsa_padding_mode:none",
        ])
        XCTAssertEqual(recovered, [UInt8](repeating: 0, count: 252) + rawInput)
        XCTAssertTrue(try key.publicKey().verify(.rsaSignatureRaw, rawInput, signature: rawSignature))
        XCTAssertFalse(try key.publicKey().verify(.rsaSignatureRaw, [0x01, 0x02, 0x03, 0x05], signature: rawSignature))
    }

    func testMisuseThrowsAndBadSignaturesAreFalse() throws {
        let rsa = TestKeys.rsa2048, ec = TestKeys.p256
        func assertError(
            _ expression: @autoclosure () throws -> Any, _ expected: (CryptoError) -> Bool, line: UInt = #line
        ) {
            XCTAssertThrowsError(try expression(), line: line) {
                XCTAssertTrue(($0 as? CryptoError).map(expected) ?? false, "\($0)", line: line)
            }
        }
        let isInvalid: (CryptoError) -> Bool = { if case .invalidInput = $0 { true } else { false } }
        let isUnsupported: (CryptoError) -> Bool = { if case .unsupported = $0 { true } else { false } }
        // A digest of the wrong length (Apple: errSecParam "bad digest size").
        assertError(try ec.sign(.ecdsaSignatureDigestX962SHA256, [UInt8](repeating: 1, count: 31)), isInvalid)
        assertError(try ec.publicKey().verify(.ecdsaSignatureDigestX962SHA256, [1], signature: [1]), isInvalid)
        assertError(try rsa.sign(.rsaSignatureDigestPKCS1v15SHA256, [UInt8](repeating: 1, count: 20)), isInvalid)
        assertError(try rsa.sign(.rsaSignatureDigestPSSSHA512, [UInt8](repeating: 1, count: 32)), isInvalid)
        assertError(try rsa.sign(.rsaSignatureDigestPKCS1v15Raw, [UInt8](repeating: 1, count: 246)), isInvalid)
        assertError(try rsa.sign(.rsaSignatureRaw, [UInt8](repeating: 0xFF, count: 257)), isInvalid)
        // Wrong key type or class.
        assertError(try ec.sign(.rsaSignatureMessagePKCS1v15SHA256, message), isUnsupported)
        assertError(try rsa.sign(.ecdsaSignatureMessageX962SHA256, message), isUnsupported)
        assertError(try rsa.publicKey().sign(.rsaSignatureMessagePKCS1v15SHA256, message), isUnsupported)
        assertError(try rsa.verify(.rsaSignatureMessagePKCS1v15SHA256, message, signature: []), isUnsupported)
        // PSS-SHA512 needs 130 bytes of modulus; 1024-bit RSA has 128.
        let small = try AsymmetricKey.generateRSA(bits: 1024)
        assertError(try small.sign(.rsaSignatureMessagePSSSHA512, message), isUnsupported)
        XCTAssertNoThrow(try small.sign(.rsaSignatureMessagePSSSHA384, message))
        // Garbage signatures are simply false.
        let publicKey = try rsa.publicKey()
        for garbage in [[], [0], [UInt8](repeating: 0xFF, count: 256), [UInt8](repeating: 0x01, count: 300)] {
            XCTAssertFalse(try publicKey.verify(.rsaSignatureMessagePSSSHA256, message, signature: garbage))
            XCTAssertFalse(try publicKey.verify(.rsaSignatureMessagePKCS1v15SHA256, message, signature: garbage))
            XCTAssertFalse(try ec.publicKey().verify(.ecdsaSignatureMessageX962SHA256, message, signature: garbage))
        }
    }
}
