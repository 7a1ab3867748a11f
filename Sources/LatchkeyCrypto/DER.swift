/// A minimal DER reader and writer for the few structures latchkey reads itself (certificates, X.501
/// Names, PKCS#1 key checks, ECDSA signatures).
///
/// Reading is bounds-checked everywhere and deliberately small: single-byte tags only (no
/// high-tag-number form), definite lengths only (no BER indefinite form), lengths of at most four
/// length octets, and a nesting limit, so hostile input can neither read out of bounds nor recurse
/// without end. A long-form length that could have been shorter is accepted, as Apple's libDER does;
/// callers that copy headers (the Name normaliser) keep such bytes as they were.
enum DER {
    /// Universal tags used here.
    static let boolean: UInt8 = 0x01
    static let integer: UInt8 = 0x02
    static let bitString: UInt8 = 0x03
    static let octetString: UInt8 = 0x04
    static let null: UInt8 = 0x05
    static let objectIdentifier: UInt8 = 0x06
    static let utf8String: UInt8 = 0x0C
    static let printableString: UInt8 = 0x13
    static let t61String: UInt8 = 0x14
    static let videotexString: UInt8 = 0x15
    static let ia5String: UInt8 = 0x16
    static let utcTime: UInt8 = 0x17
    static let generalizedTime: UInt8 = 0x18
    static let visibleString: UInt8 = 0x1A
    static let generalString: UInt8 = 0x1B
    static let universalString: UInt8 = 0x1C
    static let bmpString: UInt8 = 0x1E
    static let sequence: UInt8 = 0x30
    static let set: UInt8 = 0x31

    /// Deepest nesting any reader will descend to. X.509 needs about eight levels.
    static let maximumDepth = 24

    /// One tag-length-value element; the slices share the caller's storage and keep its indices.
    struct Element {
        let tag: UInt8
        /// The whole element, header included.
        let encoded: ArraySlice<UInt8>
        /// The value octets.
        let content: ArraySlice<UInt8>
        /// How deep the element sits; readers of its content start one level deeper.
        let depth: Int

        var isConstructed: Bool { tag & 0x20 != 0 }
        /// The header bytes (tag and length).
        var header: ArraySlice<UInt8> { encoded[encoded.startIndex..<content.startIndex] }

        /// A reader over this element's content.
        func contents() throws(CryptoError) -> Reader {
            guard depth + 1 <= DER.maximumDepth else { throw CryptoError.invalidInput("DER nesting is too deep") }
            return Reader(content, depth: depth + 1)
        }

        /// Checks the tag; `what` names the field in the error.
        func expect(_ expected: UInt8, _ what: String) throws(CryptoError) -> Element {
            guard tag == expected else { throw CryptoError.invalidInput("\(what) has the wrong DER tag") }
            return self
        }
    }

    /// Reads consecutive elements from a slice.
    struct Reader {
        private var rest: ArraySlice<UInt8>
        let depth: Int

        init(_ bytes: ArraySlice<UInt8>, depth: Int = 0) {
            rest = bytes
            self.depth = depth
        }

        init(_ bytes: [UInt8]) { self.init(bytes[...]) }

        var isAtEnd: Bool { rest.isEmpty }

        /// The next element, or nil at the end of the input.
        mutating func next() throws(CryptoError) -> Element? {
            guard let first = rest.first else { return nil }
            guard first & 0x1F != 0x1F else { throw CryptoError.invalidInput("DER high tag numbers are not supported") }
            var index = rest.startIndex + 1
            guard index < rest.endIndex else { throw CryptoError.invalidInput("truncated DER") }
            let lengthByte = rest[index]
            index += 1
            var length = 0
            if lengthByte < 0x80 {
                length = Int(lengthByte)
            } else {
                let count = Int(lengthByte & 0x7F)
                guard count != 0 else { throw CryptoError.invalidInput("DER indefinite lengths are not allowed") }
                guard count <= 4 else { throw CryptoError.invalidInput("DER length is too large") }
                guard rest.endIndex - index >= count else { throw CryptoError.invalidInput("truncated DER") }
                for k in 0..<count { length = length << 8 | Int(rest[index + k]) }
                index += count
            }
            guard rest.endIndex - index >= length else { throw CryptoError.invalidInput("truncated DER") }
            let end = index + length
            let element = Element(
                tag: first, encoded: rest[rest.startIndex..<end], content: rest[index..<end], depth: depth)
            rest = rest[end...]
            return element
        }

        /// The next element, which must exist.
        mutating func read(_ what: String) throws(CryptoError) -> Element {
            guard let element = try next() else { throw CryptoError.invalidInput("\(what) is missing") }
            return element
        }

        /// The next element, which must exist and carry `tag`.
        mutating func read(_ tag: UInt8, _ what: String) throws(CryptoError) -> Element {
            try read(what).expect(tag, what)
        }

        /// The next element if it carries `tag`; otherwise nothing is consumed.
        mutating func readIfPresent(_ tag: UInt8) throws(CryptoError) -> Element? {
            guard rest.first == tag else { return nil }
            return try next()
        }

        /// Throws unless every byte was consumed.
        func finish(_ what: String) throws(CryptoError) {
            guard rest.isEmpty else { throw CryptoError.invalidInput("unexpected bytes after \(what)") }
        }
    }

    /// Parses `bytes` as exactly one element (no trailing bytes).
    static func single(_ bytes: ArraySlice<UInt8>, _ what: String) throws(CryptoError) -> Element {
        var reader = Reader(bytes)
        let element = try reader.read(what)
        try reader.finish(what)
        return element
    }

    // MARK: Writing

    /// The DER length octets for `length` (shortest form).
    static func lengthOctets(_ length: Int) -> [UInt8] {
        precondition(length >= 0)
        if length < 0x80 { return [UInt8(length)] }
        var bytes: [UInt8] = []
        var value = length
        while value > 0 {
            bytes.insert(UInt8(value & 0xFF), at: 0)
            value >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    /// A complete element with a shortest-form length.
    static func encode<C: Collection>(_ tag: UInt8, _ content: C) -> [UInt8] where C.Element == UInt8 {
        [tag] + lengthOctets(content.count) + content
    }

    /// An INTEGER holding the non-negative big-endian `magnitude` (leading zeros dropped, one added
    /// when the high bit is set).
    static func unsignedInteger<C: Collection>(_ magnitude: C) -> [UInt8] where C.Element == UInt8 {
        var value = Array(magnitude.drop { $0 == 0 })
        if value.isEmpty || value[0] & 0x80 != 0 { value.insert(0, at: 0) }
        return encode(integer, value)
    }

    /// The magnitude of a non-negative INTEGER's content, without sign padding. Throws for a negative
    /// or empty integer or a non-minimal encoding.
    static func unsignedMagnitude(_ content: ArraySlice<UInt8>, _ what: String) throws(CryptoError) -> ArraySlice<UInt8>
    {
        guard let first = content.first else { throw CryptoError.invalidInput("\(what) is an empty INTEGER") }
        guard first & 0x80 == 0 else { throw CryptoError.invalidInput("\(what) is negative") }
        if content.count > 1, first == 0, content[content.startIndex + 1] & 0x80 == 0 {
            throw CryptoError.invalidInput("\(what) is not minimally encoded")
        }
        return content.drop { $0 == 0 }
    }
}
