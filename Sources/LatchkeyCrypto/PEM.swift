import LatchkeySecrets

/// One `-----BEGIN label-----` … `-----END label-----` block of a PEM file (RFC 7468).
package struct PEMBlock: Sendable {
    /// The label, for example `CERTIFICATE` or `PRIVATE KEY`.
    package let label: String
    /// The decoded body. Kept in wiping storage because it may be a private key; for public data
    /// (certificates) use `publicBytes()`.
    package let der: SecretBytes
    /// RFC 1421 header lines (`Proc-Type`, `DEK-Info`), in order. Only legacy encrypted keys have any.
    package let headers: [(name: String, value: String)]
    /// The block's own text, BEGIN line to END line, for handing a legacy encrypted key to OpenSSL.
    let text: SecretBytes

    /// A copy of the body in an ordinary array, for blocks that hold nothing secret (certificates,
    /// public keys).
    package func publicBytes() -> [UInt8] { der.unsafeCopyToArray() }
}

/// Splitting PEM text into blocks and encoding DER as PEM.
package enum PEM {
    /// True if `data` contains a PEM BEGIN line, which is how latchkey tells PEM from DER input.
    package static func looksLikePEM(_ data: [UInt8]) -> Bool {
        data.withUnsafeBytes { containsBegin($0) }
    }

    /// `looksLikePEM` for secret input (a private key file).
    package static func looksLikePEM(_ data: SecretBytes) -> Bool {
        data.withUnsafeBytes { containsBegin($0) }
    }

    private static func containsBegin(_ buffer: UnsafeRawBufferPointer) -> Bool {
        guard buffer.count >= begin.count else { return false }
        outer: for start in 0...(buffer.count - begin.count) {
            for k in 0..<begin.count where buffer[start + k] != begin[k] { continue outer }
            return true
        }
        return false
    }

    /// Every block in `text`, in order. Text outside blocks (comments, `openssl` bag attributes) is
    /// ignored. Throws for a block without its END line, a mismatched END label or bad base64.
    package static func blocks(in text: SecretBytes) throws(CryptoError) -> [PEMBlock] {
        var result: [PEMBlock] = []
        var failure: CryptoError?
        text.withUnsafeBytes { buffer in
            do throws(CryptoError) { result = try parse(buffer) } catch { failure = error }
        }
        if let failure { throw failure }
        return result
    }

    /// `blocks(in:)` for text that is not secret (a certificate file).
    package static func blocks(in text: [UInt8]) throws(CryptoError) -> [PEMBlock] {
        var result: [PEMBlock] = []
        var failure: CryptoError?
        text.withUnsafeBytes { buffer in
            do throws(CryptoError) { result = try parse(buffer) } catch { failure = error }
        }
        if let failure { throw failure }
        return result
    }

    /// `der` as a PEM block with the given label, lines of 64 characters, ending in a newline.
    package static func encode(_ der: [UInt8], label: String) -> String {
        var out: [UInt8] = []
        der.withUnsafeBytes { encode($0, label: label, into: &out) }
        return String(decoding: out, as: UTF8.self)
    }

    /// `encode(_:label:)` for secret DER (a private key): the text is returned in wiping storage.
    package static func encode(secret der: SecretBytes, label: String) -> SecretBytes {
        var out: [UInt8] = []
        out.reserveCapacity(der.count * 4 / 3 + der.count / 48 + 2 * label.utf8.count + 64)
        der.withUnsafeBytes { encode($0, label: label, into: &out) }
        return SecretBytes(consuming: &out)
    }

    private static func encode(_ der: UnsafeRawBufferPointer, label: String, into out: inout [UInt8]) {
        out.append(contentsOf: Array("-----BEGIN \(label)-----\n".utf8))
        Base64.encodeLines(der, into: &out)
        out.append(contentsOf: Array("-----END \(label)-----\n".utf8))
    }

    // MARK: Parsing

    private static let begin = Array("-----BEGIN ".utf8)
    private static let end = Array("-----END ".utf8)
    private static let dashes = Array("-----".utf8)

    /// Lines as ranges of `buffer`, without the line break (`\n` or `\r\n`).
    private static func lines(_ buffer: UnsafeRawBufferPointer) -> [Range<Int>] {
        var result: [Range<Int>] = []
        var start = 0
        for index in 0..<buffer.count where buffer[index] == 0x0A {
            result.append(start..<(index > start && buffer[index - 1] == 0x0D ? index - 1 : index))
            start = index + 1
        }
        if start < buffer.count { result.append(start..<buffer.count) }
        return result
    }

    /// The label of a `-----BEGIN x-----` or `-----END x-----` line, or nil.
    private static func label(_ buffer: UnsafeRawBufferPointer, _ line: Range<Int>, prefix: [UInt8]) -> String? {
        var trimmed = line
        while trimmed.upperBound > trimmed.lowerBound,
            buffer[trimmed.upperBound - 1] == 0x20 || buffer[trimmed.upperBound - 1] == 0x09
        {
            trimmed = trimmed.lowerBound..<(trimmed.upperBound - 1)
        }
        guard trimmed.count >= prefix.count + dashes.count else { return nil }
        for k in 0..<prefix.count where buffer[trimmed.lowerBound + k] != prefix[k] { return nil }
        for k in 0..<dashes.count where buffer[trimmed.upperBound - dashes.count + k] != dashes[k] { return nil }
        let labelRange = (trimmed.lowerBound + prefix.count)..<(trimmed.upperBound - dashes.count)
        var bytes: [UInt8] = []
        for index in labelRange {
            let c = buffer[index]
            guard c >= 0x20, c < 0x7F else { return nil }
            bytes.append(c)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func parse(_ buffer: UnsafeRawBufferPointer) throws(CryptoError) -> [PEMBlock] {
        let all = lines(buffer)
        var blocks: [PEMBlock] = []
        var index = 0
        while index < all.count {
            guard let blockLabel = label(buffer, all[index], prefix: begin) else {
                index += 1
                continue
            }
            let blockStart = all[index].lowerBound
            index += 1
            // RFC 1421 headers: "Name: value" lines up to a blank line, directly after BEGIN.
            var headers: [(name: String, value: String)] = []
            if index < all.count, all[index].contains(where: { buffer[$0] == UInt8(ascii: ":") }) {
                while index < all.count, !all[index].isEmpty {
                    let line = all[index]
                    guard let separator = line.first(where: { buffer[$0] == UInt8(ascii: ":") }) else {
                        throw CryptoError.invalidInput("malformed PEM header in a \(blockLabel) block")
                    }
                    let name = String(
                        decoding: UnsafeRawBufferPointer(rebasing: buffer[line.lowerBound..<separator]), as: UTF8.self)
                    let value = String(
                        decoding: UnsafeRawBufferPointer(rebasing: buffer[(separator + 1)..<line.upperBound]),
                        as: UTF8.self)
                    headers.append((name: name, value: String(value.drop { $0 == " " })))
                    index += 1
                }
            }
            let bodyStart = index < all.count ? all[index].lowerBound : buffer.count
            var endLine: Range<Int>?
            while index < all.count {
                if let endLabel = label(buffer, all[index], prefix: end) {
                    guard endLabel == blockLabel else {
                        throw CryptoError.invalidInput("PEM block \(blockLabel) ends with END \(endLabel)")
                    }
                    endLine = all[index]
                    break
                }
                index += 1
            }
            guard let endLine else { throw CryptoError.invalidInput("PEM block \(blockLabel) has no END line") }
            let body = UnsafeRawBufferPointer(rebasing: buffer[bodyStart..<endLine.lowerBound])
            let der = try Base64.decode(body)
            let text = SecretBytes(copying: UnsafeRawBufferPointer(rebasing: buffer[blockStart..<endLine.upperBound]))
            blocks.append(PEMBlock(label: blockLabel, der: der, headers: headers, text: text))
            index += 1
        }
        return blocks
    }
}
