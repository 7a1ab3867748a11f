#if canImport(Glibc)
    import Glibc
#endif

extension String {
    /// The string whose UTF-8 is exactly `bytes`, or nil if `bytes` is not well-formed UTF-8 (never
    /// repaired, so two different byte strings can never decode to the same string).
    ///
    /// Same answer as `String(validating:as: UTF8.self)`, which the agent calls for every string in
    /// every sealed item it opens, but that one goes through the standard library's unspecialised
    /// generic validator: a runtime metadata lookup per call and about 900 instructions for a short
    /// attribute (a tenth of a Secret Service `GetSecret`, measured with callgrind). This uses the
    /// UTF-8 decoder specialised in the standard library instead, which repairs ill-formed input with
    /// U+FFFD, and then checks that nothing was repaired: the decoded bytes equal the input exactly
    /// when the input was well-formed. (At the first ill-formed subsequence the output has EF BF BD
    /// where the input cannot: a subsequence starting EF BF BD would have been well-formed.)
    /// `StrictUTF8Tests` compares the two on every kind of ill-formed input.
    package init?(strictUTF8 bytes: UnsafeBufferPointer<UInt8>) {
        let decoded = String(decoding: bytes, as: UTF8.self)
        let same = decoded.utf8.withContiguousStorageIfAvailable { utf8 in
            utf8.count == bytes.count
                && (bytes.isEmpty || memcmp(utf8.baseAddress!, bytes.baseAddress!, bytes.count) == 0)
        }
        guard same ?? decoded.utf8.elementsEqual(bytes) else { return nil }
        self = decoded
    }

    /// `init?(strictUTF8:)` for the bytes of an array.
    package init?(strictUTF8 bytes: [UInt8]) {
        guard let result = bytes.withUnsafeBufferPointer({ String(strictUTF8: $0) }) else { return nil }
        self = result
    }

    /// `init?(strictUTF8:)` for the bytes of an array slice.
    package init?(strictUTF8 bytes: ArraySlice<UInt8>) {
        guard let result = bytes.withUnsafeBufferPointer({ String(strictUTF8: $0) }) else { return nil }
        self = result
    }
}
