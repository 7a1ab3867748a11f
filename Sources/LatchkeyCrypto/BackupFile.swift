import LatchkeySecrets

/// Why a backup file is refused (docs/BACKUP.md §4). Each says what the user can do about it; none
/// says which byte failed, so a damaged file cannot be probed for where its plaintext begins.
package enum BackupFileError: Error, Equatable, Sendable {
    /// The first bytes are not a latchkey backup's.
    case notABackup
    /// A format this version cannot read: made by a newer latchkey.
    case newerVersion(UInt16)
    /// Reserved flags set, a salt of the wrong size: a damaged header.
    case malformedHeader(String)
    /// Argon2id parameters beyond what a restore derives with (`BackupHeader.maximumParameters`).
    case costTooHigh(Argon2Parameters)
    /// The header's verifier does not match the key: a wrong passphrase (or a damaged header).
    case wrongPassphrase
    /// The file ends inside the header or a chunk, or without its final chunk.
    case truncated
    /// A chunk failed authentication, or is longer than any writer makes: damaged or tampered.
    case damaged(chunk: Int)
    /// The file is larger than `BackupFile.maximumFileSize`.
    case tooLarge(Int)

    /// A sentence for the user.
    package var message: String {
        switch self {
        case .notABackup: "not a latchkey backup file"
        case .newerVersion(let v):
            "the backup was made by a newer latchkey (format version \(v)); this one reads version "
                + "\(BackupHeader.version): update latchkey to restore it"
        case .malformedHeader(let why): "the backup's header is damaged (\(why))"
        case .costTooHigh(let p):
            "the backup asks for Argon2id t=\(p.timeCost) m=\(p.memoryKiB) KiB p=\(p.parallelism), beyond what "
                + "a restore derives with (\(BackupHeader.limitsText)): refused"
        case .wrongPassphrase: "wrong backup passphrase (or the backup's header is damaged)"
        case .truncated: "the backup file is truncated (it ends before its last chunk)"
        case .damaged(let chunk): "the backup file is damaged or was altered (chunk \(chunk) failed authentication)"
        case .tooLarge(let n): "the backup file is too large (\(n) bytes; at most \(BackupFile.maximumFileSize))"
        }
    }
}

/// The fixed header of a backup file (docs/BACKUP.md §2): what a reader needs before it can derive the key.
package struct BackupHeader: Sendable, Equatable {
    /// "LKBACKUP".
    package static let magic: [UInt8] = Array("LKBACKUP".utf8)
    /// The format this code writes and the newest it reads.
    package static let version: UInt16 = 1
    /// The salt's length.
    package static let saltLength = 16
    /// Bytes before the verifier: magic, version, flags, t, m, p, salt.
    package static let fieldsLength = 8 + 2 + 2 + 12 + saltLength
    /// The whole header, verifier included.
    package static let length = fieldsLength + 32

    /// What new backups use: stronger than the keybag's default (a backup file leaves the machine and
    /// may be attacked offline for years), and still about a second on the reference machine.
    package static let defaultParameters = Argon2Parameters(timeCost: 3, memoryKiB: 262_144, parallelism: 2)
    /// The most a file may ask of a restore: the parameters come from a file of unknown origin, and a
    /// derivation cannot be interrupted, so beyond these nothing is derived (a few seconds, 512 MiB).
    package static let maximumParameters = Argon2Parameters(timeCost: 8, memoryKiB: 524_288, parallelism: 8)
    /// The least a writer accepts unless told otherwise (tests use cheap parameters).
    package static let minimumMemoryKiB = Argon2Parameters.minimumMemoryKiB

    static let limitsText =
        "t ≤ \(maximumParameters.timeCost), m ≤ \(maximumParameters.memoryKiB) KiB, p ≤ \(maximumParameters.parallelism)"

    package var parameters: Argon2Parameters
    package var salt: [UInt8]

    /// A header for a new backup: `parameters` and a fresh random salt.
    package static func new(parameters: Argon2Parameters = defaultParameters) throws -> BackupHeader {
        BackupHeader(parameters: parameters, salt: try SecureRandom.bytes(saltLength))
    }

    package init(parameters: Argon2Parameters, salt: [UInt8]) {
        self.parameters = parameters
        self.salt = salt
    }

    /// The fields the verifier covers (everything but the verifier).
    package var fields: [UInt8] {
        var out = Self.magic
        out.appendBigEndian(Self.version)
        out.appendBigEndian(UInt16(0))
        out.appendBigEndian(parameters.timeCost)
        out.appendBigEndian(parameters.memoryKiB)
        out.appendBigEndian(parameters.parallelism)
        return out + salt
    }

    /// Reads and checks the header at the start of `file`, in the order docs/BACKUP.md §4 gives: magic,
    /// version, flags, parameters within the limits. Nothing is derived here.
    package static func read(_ file: [UInt8]) throws(BackupFileError) -> BackupHeader {
        guard file.count >= magic.count + 2 else {
            throw file.starts(with: magic) || magic.starts(with: file) ? .truncated : .notABackup
        }
        guard file.starts(with: magic) else { throw .notABackup }
        let version = file.bigEndianU16(at: 8)
        guard version <= Self.version else { throw .newerVersion(version) }
        guard version == Self.version else { throw .malformedHeader("format version 0") }
        guard file.count >= length else { throw .truncated }
        guard file.bigEndianU16(at: 10) == 0 else { throw .malformedHeader("reserved flags set") }
        let parameters = Argon2Parameters(
            timeCost: file.bigEndianU32(at: 12), memoryKiB: file.bigEndianU32(at: 16),
            parallelism: file.bigEndianU32(at: 20))
        let cap = maximumParameters
        guard parameters.timeCost <= cap.timeCost, parameters.memoryKiB <= cap.memoryKiB,
            parameters.parallelism <= cap.parallelism
        else { throw .costTooHigh(parameters) }
        do { try parameters.validate() } catch { throw .malformedHeader("invalid Argon2id parameters") }
        return BackupHeader(parameters: parameters, salt: Array(file[24..<(24 + saltLength)]))
    }

    /// The backup key: Argon2id of the passphrase with this header's salt and parameters (32 bytes).
    /// Slow by design; the parameters were checked by `read` or chosen by the writer.
    package func deriveKey(passphrase: SecretBytes) throws -> SecretBytes {
        try Argon2id.deriveKey(password: passphrase, salt: salt, parameters: parameters, length: 32)
    }
}

/// The keys a backup key gives (docs/BACKUP.md §3): one seals the chunks, one makes the header's verifier.
struct BackupKeys {
    let chunks: SecretBytes
    let verifier: SecretBytes

    init(_ key: SecretBytes) throws {
        guard key.count == 32 else { throw CryptoError.invalidInput("a backup key is 32 bytes") }
        chunks = try HKDF.sha256(ikm: key, salt: [], info: Array("latchkey backup v1 chunks".utf8), count: 32)
        verifier = try HKDF.sha256(ikm: key, salt: [], info: Array("latchkey backup v1 verifier".utf8), count: 32)
    }
}

/// Writes and reads backup files (docs/BACKUP.md): the header, then chunks sealed with AES-256-GCM, each
/// bound to the header, its position and whether it is the last, so no chunk can be dropped, repeated,
/// moved or taken into another backup. What a chunk holds is the engine's (the items); here it is bytes.
package enum BackupFile {
    /// The most plaintext one chunk holds; a reader refuses a longer chunk before opening it.
    package static let maximumChunk = 16 << 20
    /// The plaintext a writer puts in a chunk before starting the next (one item may make it longer).
    package static let targetChunk = 1 << 20
    /// The largest file written or read: what one reply of the agent can carry (docs/PROTOCOL.md §7)
    /// with room to spare.
    package static let maximumFileSize = 240 << 20

    /// Builds a backup file chunk by chunk. `bytes` is only ciphertext and the header.
    package struct Writer {
        private let keys: BackupKeys
        private let header: [UInt8]
        private var index: UInt64 = 0
        package private(set) var bytes: [UInt8]
        private var finished = false

        /// Starts a file with `header`, sealed under `key` (from `BackupHeader.deriveKey`).
        package init(header: BackupHeader, key: SecretBytes) throws {
            keys = try BackupKeys(key)
            let fields = header.fields
            self.header = fields + (try HMAC.sha256(key: keys.verifier, fields))
            bytes = self.header
        }

        /// Seals `plaintext` as the next chunk; `final` for the last one (every file has one).
        package mutating func append(_ plaintext: [UInt8], final: Bool) throws {
            precondition(!finished, "a backup has one final chunk")
            guard plaintext.count <= BackupFile.maximumChunk else {
                throw CryptoError.invalidInput("a backup chunk holds at most \(BackupFile.maximumChunk) bytes")
            }
            let sealed = try AES256GCM.seal(
                plaintext, key: keys.chunks, aad: BackupFile.aad(header: header, index: index, final: final))
            guard bytes.count + 4 + sealed.count <= BackupFile.maximumFileSize else {
                throw CryptoError.invalidInput("the backup would exceed \(BackupFile.maximumFileSize) bytes")
            }
            bytes.appendBigEndian(UInt32(sealed.count))
            bytes += sealed
            index += 1
            finished = final
        }
    }

    /// Opens every chunk of `file` under `key`, in order, and hands each plaintext to `body` (which must
    /// not keep it: it is wiped when `body` returns). Everything is checked as it goes; the caller that
    /// must change nothing on a bad file runs this once to the end before acting (docs/BACKUP.md §4).
    package static func open(
        _ file: [UInt8], key: SecretBytes, _ body: (_ plaintext: [UInt8], _ index: Int) throws -> Void
    ) throws {
        guard file.count <= maximumFileSize else { throw BackupFileError.tooLarge(file.count) }
        let header = try BackupHeader.read(file)
        let keys = try BackupKeys(key)
        let headerBytes = Array(file[0..<BackupHeader.length])
        let expected = try HMAC.sha256(key: keys.verifier, header.fields)
        let stored = Array(file[BackupHeader.fieldsLength..<BackupHeader.length])
        let matches = expected.withUnsafeBytes { a in
            stored.withUnsafeBytes { b in SecretBytes.constantTimeEquals(a, b) }
        }
        guard matches else { throw BackupFileError.wrongPassphrase }
        var offset = BackupHeader.length
        var index = 0
        guard offset < file.count else { throw BackupFileError.truncated }
        while offset < file.count {
            guard file.count - offset >= 4 else { throw BackupFileError.truncated }
            let length = Int(file.bigEndianU32(at: offset))
            offset += 4
            // Capped before anything is allocated for it.
            guard length >= AES256GCM.overhead, length <= maximumChunk + AES256GCM.overhead else {
                throw BackupFileError.damaged(chunk: index)
            }
            guard file.count - offset >= length else { throw BackupFileError.truncated }
            let final = offset + length == file.count
            var plain: [UInt8]
            do {
                plain = try AES256GCM.open(
                    Array(file[offset..<(offset + length)]), key: keys.chunks,
                    aad: aad(header: headerBytes, index: UInt64(index), final: final))
            } catch {
                // The last chunk present that is not marked final: the file was cut at a chunk boundary.
                if final,
                    (try? AES256GCM.open(
                        Array(file[offset..<(offset + length)]), key: keys.chunks,
                        aad: aad(header: headerBytes, index: UInt64(index), final: false))) != nil
                {
                    throw BackupFileError.truncated
                }
                throw BackupFileError.damaged(chunk: index)
            }
            defer { SecretBytes.wipe(&plain) }
            try body(plain, index)
            offset += length
            index += 1
        }
    }

    /// A chunk's associated data: the whole header, its index and whether it is the last.
    static func aad(header: [UInt8], index: UInt64, final: Bool) -> [UInt8] {
        var out = Array("latchkey backup v1 chunk".utf8) + header
        out.appendBigEndian(UInt32(index >> 32))
        out.appendBigEndian(UInt32(index & 0xFFFF_FFFF))
        out.append(final ? 1 : 0)
        return out
    }
}

extension Array where Element == UInt8 {
    fileprivate mutating func appendBigEndian(_ value: UInt16) {
        append(UInt8(value >> 8))
        append(UInt8(value & 0xFF))
    }

    fileprivate mutating func appendBigEndian(_ value: UInt32) {
        append(UInt8(value >> 24))
        append(UInt8((value >> 16) & 0xFF))
        append(UInt8((value >> 8) & 0xFF))
        append(UInt8(value & 0xFF))
    }

    fileprivate func bigEndianU16(at i: Int) -> UInt16 { UInt16(self[i]) << 8 | UInt16(self[i + 1]) }

    fileprivate func bigEndianU32(at i: Int) -> UInt32 {
        UInt32(self[i]) << 24 | UInt32(self[i + 1]) << 16 | UInt32(self[i + 2]) << 8 | UInt32(self[i + 3])
    }
}
