import LatchkeyCrypto
import LatchkeyModel

/// Byte layout of format version 1 (docs/KEYBAG.md, "File format"). All integers big-endian.
enum KeybagLayout {
    static let magic = Array("LKKEYBAG".utf8)
    static let idLength = 16
    static let saltLength = 16
    static let wrappedKeyLength = KeyHierarchy.keyLength + AES256GCM.overhead  // 60
    static let entryLength = 1 + wrappedKeyLength  // 61
    static let entryCount = ProtectionClass.allCases.count  // 7
    static let checksumLength = 32
    /// Offsets of the fixed fields.
    static let versionOffset = 8, flagsOffset = 10, idOffset = 12
    static let timeCostOffset = 28, memoryOffset = 32, parallelismOffset = 36
    static let saltOffset = 40, verifierOffset = 56, seedOffset = 88
    static let entryCountOffset = 120, entriesOffset = 121
    static let checksumOffset = entriesOffset + entryCount * entryLength  // 548
    static let fileSize = checksumOffset + checksumLength  // 580
    /// Smallest file in any version that has a version field and a checksum trailer.
    static let minimumAnyVersion = 12 + checksumLength
    /// Flags bit 0: the ThisDeviceOnly classes' KEKs mix in the device factor. Other bits are reserved.
    static let deviceBoundFlag: UInt16 = 0x0001
}

extension Keybag {
    /// The file image: header, entries in ascending class order, then SHA-256 of all of it.
    package func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(KeybagLayout.fileSize)
        out += KeybagLayout.magic
        out.appendBigEndian(Keybag.formatVersion)
        out.appendBigEndian(isDeviceBound ? KeybagLayout.deviceBoundFlag : 0)
        out += id
        out.appendBigEndian(parameters.timeCost)
        out.appendBigEndian(parameters.memoryKiB)
        out.appendBigEndian(parameters.parallelism)
        out += salt
        out += verifier
        out += alwaysSeed
        out.append(UInt8(KeybagLayout.entryCount))
        for protectionClass in ProtectionClass.allCases.sorted() {
            out.append(protectionClass.rawValue)
            out += wrappedKeys[protectionClass]!
        }
        out += SHA256.hash(out)
        return out
    }

    /// Parses and validates a keybag file image; `path` is only used in errors.
    ///
    /// Order matters: the magic decides "not a keybag"; the checksum trailer (present in every
    /// version) is checked before the version so a flipped version byte reads as corruption, not as
    /// a newer format; only an intact file with an unknown version is `unsupportedVersion`.
    package static func parse(_ bytes: [UInt8], path: String) throws -> Keybag {
        let magic = KeybagLayout.magic
        guard bytes.count >= magic.count else {
            // A file holding a prefix of the magic is a truncated keybag, anything else is foreign.
            if Array(magic.prefix(bytes.count)) == bytes { throw KeybagError.corrupt(path: path, reason: "truncated") }
            throw KeybagError.notAKeybag(path: path)
        }
        guard Array(bytes[0..<magic.count]) == magic else { throw KeybagError.notAKeybag(path: path) }
        guard bytes.count >= KeybagLayout.minimumAnyVersion else {
            throw KeybagError.corrupt(path: path, reason: "truncated")
        }

        let version = bytes.bigEndianUInt16(at: KeybagLayout.versionOffset)
        if version == Keybag.formatVersion, bytes.count != KeybagLayout.fileSize {
            throw KeybagError.corrupt(
                path: path, reason: "wrong size \(bytes.count), expected \(KeybagLayout.fileSize)")
        }
        let body = Array(bytes[0..<(bytes.count - KeybagLayout.checksumLength)])
        guard SHA256.hash(body) == Array(bytes[body.count...]) else {
            throw KeybagError.corrupt(path: path, reason: "checksum mismatch")
        }
        guard version == Keybag.formatVersion else {
            throw KeybagError.unsupportedVersion(path: path, version: version)
        }

        let flags = bytes.bigEndianUInt16(at: KeybagLayout.flagsOffset)
        guard flags & ~KeybagLayout.deviceBoundFlag == 0 else {
            throw KeybagError.corrupt(path: path, reason: "unknown flags \(flags)")
        }
        let parameters = Argon2Parameters(
            timeCost: bytes.bigEndianUInt32(at: KeybagLayout.timeCostOffset),
            memoryKiB: bytes.bigEndianUInt32(at: KeybagLayout.memoryOffset),
            parallelism: bytes.bigEndianUInt32(at: KeybagLayout.parallelismOffset))
        do {
            try parameters.validate()
        } catch {
            throw KeybagError.corrupt(path: path, reason: "invalid Argon2 parameters")
        }
        guard Int(bytes[KeybagLayout.entryCountOffset]) == KeybagLayout.entryCount else {
            throw KeybagError.corrupt(
                path: path, reason: "entry count \(bytes[KeybagLayout.entryCountOffset]), expected 7")
        }
        var wrapped: [ProtectionClass: [UInt8]] = [:]
        for index in 0..<KeybagLayout.entryCount {
            let start = KeybagLayout.entriesOffset + index * KeybagLayout.entryLength
            let raw = bytes[start]
            guard let protectionClass = ProtectionClass(rawValue: raw) else {
                throw KeybagError.corrupt(path: path, reason: "unknown class \(raw)")
            }
            guard wrapped[protectionClass] == nil else {
                throw KeybagError.corrupt(path: path, reason: "duplicate class \(raw)")
            }
            // Canonical order keeps the file image unique, so parse followed by serialize is identity.
            guard Int(raw) == index + 1 else {
                throw KeybagError.corrupt(path: path, reason: "class entries out of order")
            }
            wrapped[protectionClass] = Array(bytes[(start + 1)..<(start + KeybagLayout.entryLength)])
        }
        return Keybag(
            id: slice(bytes, KeybagLayout.idOffset, KeybagLayout.idLength),
            parameters: parameters,
            salt: slice(bytes, KeybagLayout.saltOffset, KeybagLayout.saltLength),
            verifier: slice(bytes, KeybagLayout.verifierOffset, KeyHierarchy.keyLength),
            alwaysSeed: slice(bytes, KeybagLayout.seedOffset, KeyHierarchy.keyLength),
            wrappedKeys: wrapped, deviceBound: flags & KeybagLayout.deviceBoundFlag != 0, origin: path)
    }

    private static func slice(_ bytes: [UInt8], _ offset: Int, _ count: Int) -> [UInt8] {
        Array(bytes[offset..<(offset + count)])
    }
}

extension Array where Element == UInt8 {
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }

    func bigEndianUInt16(at offset: Int) -> UInt16 {
        UInt16(self[offset]) << 8 | UInt16(self[offset + 1])
    }

    func bigEndianUInt32(at offset: Int) -> UInt32 {
        (offset..<(offset + 4)).reduce(UInt32(0)) { $0 << 8 | UInt32(self[$1]) }
    }
}
