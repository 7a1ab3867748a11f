@testable import LatchkeyCrypto

/// A few lines of DER for crafting PKCS#12 files and keys no exporter writes (PKCS12CraftedTests).
/// Nothing is validated: building the malformed is the point.
enum CraftedDER {
    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { DER.encode(tag, content) }
    static func sequence(_ items: [UInt8]...) -> [UInt8] { tlv(DER.sequence, items.flatMap { $0 }) }
    static func sequence(of items: [[UInt8]]) -> [UInt8] { tlv(DER.sequence, items.flatMap { $0 }) }
    static func octets(_ bytes: [UInt8]) -> [UInt8] { tlv(DER.octetString, bytes) }
    static func explicit0(_ content: [UInt8]) -> [UInt8] { tlv(0xA0, content) }
    static let null: [UInt8] = [0x05, 0x00]

    /// A DER INTEGER of `value` (two's complement, shortest form).
    static func integer(_ value: Int64) -> [UInt8] {
        var bytes = withUnsafeBytes(of: value.bigEndian) { Array($0) }
        while bytes.count > 1, (bytes[0] == 0 && bytes[1] < 0x80) || (bytes[0] == 0xFF && bytes[1] >= 0x80) {
            bytes.removeFirst()
        }
        return tlv(DER.integer, bytes)
    }

    /// A positive INTEGER from big-endian magnitude bytes.
    static func unsigned(_ magnitude: [UInt8]) -> [UInt8] {
        tlv(DER.integer, (magnitude.first ?? 0x80) >= 0x80 ? [0] + magnitude : magnitude)
    }

    static func oid(_ dotted: String) -> [UInt8] {
        let parts = dotted.split(separator: ".").map { Int($0)! }
        var out: [UInt8] = [UInt8(parts[0] * 40 + parts[1])]
        for var part in parts.dropFirst(2) {
            var encoded: [UInt8] = [UInt8(part & 0x7F)]
            part >>= 7
            while part > 0 {
                encoded.insert(UInt8(0x80 | (part & 0x7F)), at: 0)
                part >>= 7
            }
            out += encoded
        }
        return tlv(DER.objectIdentifier, out)
    }

    static func algorithm(_ dotted: String, _ parameters: [UInt8] = null) -> [UInt8] {
        sequence(oid(dotted), parameters)
    }

    // MARK: PKCS#12

    static let data = "1.2.840.113549.1.7.1"
    static let encryptedData = "1.2.840.113549.1.7.6"
    static let keyBag = "1.2.840.113549.1.12.10.1.1"
    static let certBag = "1.2.840.113549.1.12.10.1.3"
    static let x509Certificate = "1.2.840.113549.1.9.22.1"
    static let pbes2 = "1.2.840.113549.1.5.13"
    static let pbkdf2 = "1.2.840.113549.1.5.12"
    static let aes256CBC = "2.16.840.1.101.3.4.1.42"
    static let pbeSHA1TripleDES = "1.2.840.113549.1.12.1.3"
    static let rsaEncryption = "1.2.840.113549.1.1.1"
    static let dsa = "1.2.840.10040.4.1"
    static let ecPublicKey = "1.2.840.10045.2.1"
    static let prime256v1 = "1.2.840.10045.3.1.7"
    /// PBKDF2 PRFs by name.
    static let prf = [
        "sha1": "1.2.840.113549.2.7", "sha224": "1.2.840.113549.2.8", "sha256": "1.2.840.113549.2.9",
        "sha512": "1.2.840.113549.2.11", "sha512-224": "1.2.840.113549.2.12",
    ]

    static func keyBag(_ privateKeyInfo: [UInt8]) -> [UInt8] {
        sequence(oid(keyBag), explicit0(privateKeyInfo))
    }

    static func certificateBag(_ certificate: [UInt8]) -> [UInt8] {
        sequence(oid(certBag), explicit0(sequence(oid(x509Certificate), explicit0(octets(certificate)))))
    }

    /// A plain (pkcs7-data) safe holding `bags`.
    static func plainSafe(_ bags: [[UInt8]]) -> [UInt8] {
        sequence(oid(data), explicit0(octets(sequence(of: bags))))
    }

    /// An encrypted (pkcs7-encryptedData) safe with `algorithm` and `ciphertext`.
    static func encryptedSafe(_ algorithm: [UInt8], _ ciphertext: [UInt8]) -> [UInt8] {
        sequence(
            oid(encryptedData),
            explicit0(sequence(integer(0), sequence(oid(data), algorithm, tlv(0x80, ciphertext)))))
    }

    /// A PFX of `safes` without a MAC (opened with the empty passphrase only).
    static func pfx(_ safes: [[UInt8]]) -> [UInt8] {
        sequence(integer(3), sequence(oid(data), explicit0(octets(sequence(of: safes)))))
    }

    /// PBES2 with PBKDF2 (`prf` nil: the default HMAC-SHA1) and AES-256-CBC.
    static func pbes2(iterations: Int64, prf: String?) -> [UInt8] {
        var parameters = [octets([UInt8](repeating: 0x53, count: 16)), integer(iterations)]
        if let prf { parameters.append(algorithm(Self.prf[prf]!)) }
        return algorithm(
            pbes2,
            sequence(
                algorithm(pbkdf2, sequence(of: parameters)),
                sequence(oid(aes256CBC), octets([UInt8](repeating: 0x49, count: 16)))))
    }

    /// A PKCS#12 PBE scheme (`scheme`'s OID) with `iterations`.
    static func pkcs12PBE(_ scheme: String, iterations: Int64) -> [UInt8] {
        algorithm(scheme, sequence(octets([UInt8](repeating: 0x53, count: 8)), integer(iterations)))
    }

    /// A DSA PrivateKeyInfo whose private key is -1, which OpenSSL's DSA decoder refuses: a witness
    /// that a refusal came before decoding (decoded, it would fail as a damaged key).
    static let dsaPrivateKeyInfo: [UInt8] = sequence(
        integer(0),
        algorithm(dsa, sequence(unsigned([0xC7] + [UInt8](repeating: 0x11, count: 127)), integer(0x8001), integer(3))),
        octets(integer(-1)))

    /// A tiny self-signed-looking certificate (an unsigned TBS with an empty name and a P-256 key)
    /// that X509Certificate reads; `serial` tells them apart.
    static func tinyCertificate(serial: Int64) -> [UInt8] {
        let time = tlv(DER.utcTime, Array("250101000000Z".utf8))
        let later = tlv(DER.utcTime, Array("350101000000Z".utf8))
        let point: [UInt8] = [
            0x03, 0x6B, 0x17, 0xD1, 0xF2, 0xE1, 0x2C, 0x42, 0x47, 0xF8, 0xBC, 0xE6, 0xE5, 0x63, 0xA4, 0x40,
            0xF2, 0x77, 0x03, 0x7D, 0x81, 0x2D, 0xEB, 0x33, 0xA0, 0xF4, 0xA1, 0x39, 0x45, 0xD8, 0x98, 0xC2, 0x96,
        ]
        let spki = sequence(sequence(oid(ecPublicKey), oid(prime256v1)), tlv(DER.bitString, [0] + point))
        let signature = algorithm("1.2.840.113549.1.1.11")
        let tbs = sequence(integer(serial), signature, sequence(), sequence(time, later), sequence(), spki)
        return sequence(tbs, signature, tlv(DER.bitString, [0]))
    }
}
