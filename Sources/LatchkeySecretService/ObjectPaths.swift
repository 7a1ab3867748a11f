/// The object paths of the Secret Service (docs/SECRET-SERVICE.md §6), parsed and built.
enum ObjectPath: Equatable {
    /// How a path names a collection: by id, or through an alias.
    enum CollectionName: Equatable {
        case id(String)
        case alias(String)
    }

    case service
    case collection(CollectionName)
    case item(CollectionName, [UInt8])
    case session(UInt64)
    case prompt(UInt64)

    /// Parses a path; nil when it names nothing this service could serve.
    init?(_ path: String) {
        if path == SS.root {
            self = .service
            return
        }
        guard path.hasPrefix(SS.root + "/") else { return nil }
        let parts = path.dropFirst(SS.root.count + 1).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 2, parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy(Self.isPathCharacter) }) else {
            return nil
        }
        let name = String(parts[1])
        switch (parts[0], parts.count) {
        case ("collection", 2): self = .collection(.id(name))
        case ("aliases", 2): self = .collection(.alias(name))
        case ("collection", 3), ("aliases", 3):
            guard let id = Self.itemID(parts[2]) else { return nil }
            self = .item(parts[0] == "collection" ? .id(name) : .alias(name), id)
        case ("session", 2):
            guard let n = UInt64(name) else { return nil }
            self = .session(n)
        case ("prompt", 2):
            guard let n = UInt64(name) else { return nil }
            self = .prompt(n)
        default:
            return nil
        }
    }

    static func collectionPath(_ id: String) -> String { SS.collectionPrefix + "/" + id }
    static func aliasPath(_ name: String) -> String { SS.aliasPrefix + "/" + name }
    static func itemPath(_ collection: String, _ id: [UInt8]) -> String { collectionPath(collection) + "/" + hex(id) }
    static func sessionPath(_ n: UInt64) -> String { SS.sessionPrefix + "/\(n)" }
    static func promptPath(_ n: UInt64) -> String { SS.promptPrefix + "/\(n)" }

    /// 32 lowercase hex digits of the 16-byte persistent reference.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func itemID<S: StringProtocol>(_ text: S) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count == 32 else { return nil }
        var out: [UInt8] = []
        for k in stride(from: 0, to: 32, by: 2) {
            guard let high = nibble(utf8[k]), let low = nibble(utf8[k + 1]) else { return nil }
            out.append(high << 4 | low)
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }

    static func isPathCharacter(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == 0x5F
    }
}
