/// The few DER structures the token side builds or unwraps itself: PKCS#11 gives an RSA key as its modulus
/// and exponent, an EC point wrapped in an OCTET STRING, and an ECDSA signature as r ‖ s, while Apple's
/// API speaks PKCS#1 RSAPublicKey, the bare X9.63 point and X9.62 DER signatures.
enum TokenDER {
    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var rest = count
        while rest > 0 {
            bytes.insert(UInt8(rest & 0xFF), at: 0)
            rest >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func element(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        [tag] + length(content.count) + content
    }

    /// A non-negative INTEGER from big-endian magnitude bytes (leading zeros dropped, a zero added before
    /// a high bit).
    static func unsignedInteger(_ magnitude: some Collection<UInt8>) -> [UInt8] {
        var bytes = Array(magnitude.drop { $0 == 0 })
        if bytes.isEmpty || bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return element(0x02, bytes)
    }

    /// PKCS#1 RSAPublicKey: SEQUENCE { modulus INTEGER, publicExponent INTEGER }.
    static func rsaPublicKey(modulus: [UInt8], exponent: [UInt8]) -> [UInt8] {
        element(0x30, unsignedInteger(modulus) + unsignedInteger(exponent))
    }

    /// CKA_EC_POINT is a DER OCTET STRING holding the point (PKCS#11 2.40); some modules give the bare point.
    static func ecPoint(_ value: [UInt8]) -> [UInt8] {
        guard value.count >= 2, value[0] == 0x04 else { return value }
        var index = 1
        var count = Int(value[index])
        index += 1
        if count & 0x80 != 0 {
            let octets = count & 0x7F
            guard octets >= 1, octets <= 2, value.count >= index + octets else { return value }
            count = value[index..<index + octets].reduce(0) { $0 << 8 | Int($1) }
            index += octets
        }
        // A bare uncompressed point also starts with 04: it is one only if the length does not fit.
        guard value.count == index + count, count > 0, value[index] == 0x04 else { return value }
        return Array(value[index...])
    }

    /// X9.62 ECDSA-Sig-Value from PKCS#11's r ‖ s.
    static func ecdsaSignature(raw: [UInt8]) -> [UInt8] {
        let half = raw.count / 2
        return element(0x30, unsignedInteger(raw[..<half]) + unsignedInteger(raw[half...]))
    }

    /// The DigestInfo prefix (RFC 8017 §9.2, note 1) that goes before a hash signed with CKM_RSA_PKCS.
    static func digestInfoPrefix(_ size: Int) -> [UInt8]? {
        switch size {
        case 20: [0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00, 0x04, 0x14]
        case 28:
            [
                0x30, 0x2d, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x04, 0x05, 0x00,
                0x04, 0x1c,
            ]
        case 32:
            [
                0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00,
                0x04, 0x20,
            ]
        case 48:
            [
                0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02, 0x05, 0x00,
                0x04, 0x30,
            ]
        case 64:
            [
                0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00,
                0x04, 0x40,
            ]
        default: nil
        }
    }
}
