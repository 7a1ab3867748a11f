#if canImport(Glibc)
import Glibc
#endif
import LatchkeyCodec
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore

/// The sealed collection list and alias table, and input validation (docs/SECRET-SERVICE.md §4).
extension SecretServiceKeychain {
    // MARK: - Sealed state

    func stateKey() throws -> SecretBytes {
        try HKDF.sha256(ikm: try keychain.keys.key(for: .afterFirstUnlock), salt: [], info: Self.stateKeyInfo, count: 32)
    }

    func loadState(_ store: Store) throws -> SecretServiceState {
        guard let sealed = try store.stateValue(named: Self.stateName) else { return .initial }
        let key = try stateKey()
        var plain: [UInt8]
        do {
            plain = try AES256GCM.open(sealed, key: key, aad: Self.stateAADLabel + Array(Self.stateName.utf8))
        } catch {
            throw SecError(SecStatus.decode, "the Secret Service state failed authentication (damaged or tampered)")
        }
        defer { SecretBytes.wipe(&plain) }
        guard let state = Self.decodeState(try ValueCodec.decode(plain)) else {
            throw SecError(SecStatus.decode, "the Secret Service state is malformed")
        }
        return state
    }

    func saveState(_ state: SecretServiceState, _ store: Store) throws {
        var plain: [UInt8] = []
        ValueCodec.encode(Self.encodeState(state), into: &plain)
        defer { SecretBytes.wipe(&plain) }
        let sealed = try AES256GCM.seal(plain, key: try stateKey(), aad: Self.stateAADLabel + Array(Self.stateName.utf8))
        try store.setStateValue(sealed, named: Self.stateName)
    }

    static func encodeState(_ state: SecretServiceState) -> SecValue {
        .dictionary([
            "collections": .array(state.collections.map {
                .dictionary(["id": .string($0.id), "label": .string($0.label),
                             "created": .int(Int64(clamping: $0.created)), "modified": .int(Int64(clamping: $0.modified))])
            }),
            "aliases": .dictionary(state.aliases.mapValues { .string($0) }),
        ])
    }

    static func decodeState(_ value: SecValue) -> SecretServiceState? {
        guard case .dictionary(let d) = value, case .array(let list)? = d["collections"],
              case .dictionary(let aliases)? = d["aliases"] else { return nil }
        var collections: [SecretServiceCollection] = []
        for entry in list {
            guard case .dictionary(let c) = entry, case .string(let id)? = c["id"], case .string(let label)? = c["label"],
                  case .int(let created)? = c["created"], case .int(let modified)? = c["modified"],
                  !collections.contains(where: { $0.id == id }) else { return nil }
            collections.append(SecretServiceCollection(id: id, label: label, created: UInt64(clamping: created),
                                                       modified: UInt64(clamping: modified)))
        }
        if !collections.contains(where: { $0.id == login }) {
            collections.insert(SecretServiceState.initial.collections[0], at: 0)
        }
        var names: [String: String] = [:]
        for (name, target) in aliases {
            guard case .string(let id) = target else { return nil }
            names[name] = id
        }
        return SecretServiceState(collections: collections, aliases: names)
    }

    // MARK: - Validation

    static func validate(label: String, attributes: SecretAttributes, secret: SecretServiceSecret) throws(SecError) {
        guard label.utf8.count <= SecretServiceLimits.maxStringBytes else { throw .param("label too long") }
        try attributes.validate()
        try validate(secret)
    }

    static func validate(_ secret: SecretServiceSecret) throws(SecError) {
        guard secret.value.count <= SecretServiceLimits.maxSecretBytes else { throw .param("secret too large") }
        guard secret.contentType.utf8.count <= SecretServiceLimits.maxContentTypeBytes else {
            throw .param("content type too long")
        }
    }

    /// Collection ids and alias names appear in object paths: `[A-Za-z0-9_]`, 1–64 bytes.
    static func validateIdentifier(_ name: String, _ what: String) throws(SecError) {
        guard !name.isEmpty, name.utf8.count <= SecretServiceLimits.maxIdentifierBytes,
              name.utf8.allSatisfy(isPathCharacter) else {
            throw .param("\(what) must be 1–\(SecretServiceLimits.maxIdentifierBytes) characters of [A-Za-z0-9_]")
        }
    }

    static func isPathCharacter(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F
    }

    /// An id from a label: other characters become `_`, at most 48 bytes, a number appended when taken.
    static func newIdentifier(for label: String, taken state: SecretServiceState) -> String {
        var base = String(decoding: label.utf8.prefix(48).map { isPathCharacter($0) ? $0 : 0x5F }, as: UTF8.self)
        if base.isEmpty { base = "collection" }
        var candidate = base
        var n = 2
        while state.collection(candidate) != nil || candidate == login {
            candidate = "\(base)_\(n)"
            n += 1
        }
        return candidate
    }
}
