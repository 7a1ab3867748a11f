import LatchkeySecrets

/// Standard base64 (RFC 4648 §4) for PEM bodies. Decoding writes straight into wiping storage,
/// because a PEM body may be a private key.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The 6-bit value of a base64 character, or nil.
    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }

    private static func isWhitespace(_ c: UInt8) -> Bool {
        c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D
    }

    /// Decodes `text`, ignoring white space. Padding is required and allowed only at the end.
    static func decode(_ text: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes {
        var symbols = 0, padding = 0
        for c in text where !isWhitespace(c) {
            if c == UInt8(ascii: "=") {
                padding += 1
            } else {
                guard padding == 0, value(c) != nil else {
                    throw CryptoError.invalidInput("invalid base64 in PEM data")
                }
                symbols += 1
            }
        }
        guard padding <= 2, (symbols + padding) % 4 == 0 else {
            throw CryptoError.invalidInput("invalid base64 length in PEM data")
        }
        let count = (symbols + padding) / 4 * 3 - padding
        let out = SecretBytes(count: count)
        out.withUnsafeMutableBytes { buffer in
            var accumulator: UInt32 = 0, bits = 0, index = 0
            for c in text {
                guard let v = value(c) else { continue }  // white space and padding
                accumulator = accumulator << 6 | UInt32(v)
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    if index < count { buffer[index] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)) }
                    index += 1
                }
            }
            accumulator = 0
        }
        return out
    }

    /// Encodes `bytes`, with a line break after every 64 characters (RFC 7468), into `out`.
    static func encodeLines(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        var column = 0
        var index = 0
        func emit(_ c: UInt8) {
            out.append(c)
            column += 1
            if column == 64 {
                out.append(0x0A)
                column = 0
            }
        }
        while index < bytes.count {
            let b0 = UInt32(bytes[index])
            let b1 = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
            let b2 = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
            let triple = b0 << 16 | b1 << 8 | b2
            emit(alphabet[Int(triple >> 18 & 0x3F)])
            emit(alphabet[Int(triple >> 12 & 0x3F)])
            emit(index + 1 < bytes.count ? alphabet[Int(triple >> 6 & 0x3F)] : UInt8(ascii: "="))
            emit(index + 2 < bytes.count ? alphabet[Int(triple & 0x3F)] : UInt8(ascii: "="))
            index += 3
        }
        if column != 0 { out.append(0x0A) }
    }
}
