#if canImport(Glibc)
    import Glibc
#endif

/// The command line as the kernel gave it, checked to be UTF-8.
///
/// Swift's `CommandLine.arguments` repairs invalid UTF-8 (each bad byte becomes U+FFFD), so
/// `-s $'svc\xfe'`, `-s $'svc\xff'` and `-s svc\u{FFFD}` would all name the same item, delete
/// included. Attribute values are UTF-8 on the wire (docs/PROTOCOL.md §3 refuses anything else), so an
/// argument that is not UTF-8 is a usage error here, never a value changed behind the user's back.
enum RawArguments {
    /// The arguments after the program name, or the 1-based position and an escaped form of the first
    /// one that is not valid UTF-8.
    static func decoded() -> Result<[String], InvalidArgument> {
        var arguments: [String] = []
        for index in 1..<Int(CommandLine.argc) {
            guard let pointer = CommandLine.unsafeArgv[index] else { break }
            let bytes = UnsafeBufferPointer(
                start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self),
                count: strlen(pointer))
            guard let argument = String(validating: bytes, as: UTF8.self) else {
                return .failure(InvalidArgument(position: index, escaped: escaped(bytes)))
            }
            arguments.append(argument)
        }
        return .success(arguments)
    }

    /// An argument that is not UTF-8.
    struct InvalidArgument: Error {
        var position: Int
        /// Printable ASCII as it is, every other byte as `\xNN`.
        var escaped: String
    }

    static func escaped(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        let digits = Array("0123456789abcdef")
        var text = ""
        for byte in bytes {
            if byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "\\") {
                text.append(Character(Unicode.Scalar(byte)))
            } else {
                text += "\\x" + String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 0x0F)])
            }
        }
        return text
    }
}
