import LatchkeyCrypto
import LatchkeySecrets
import LatchkeySystem

/// The key of the keyed hashes that index and deduplicate items (docs/STORE.md, "Keys"): HKDF of the
/// AfterFirstUnlock class key, held exactly while that class key is.
///
/// Kept as an HMAC context keyed once (`HMACKey`), because the engine computes one hash per attribute
/// of every query and every stored item: keying a fresh context for each hash looked the digest up
/// and ran the key schedule every time (about 15 % of a Secret Service search). The derived key
/// bytes are wiped as soon as the context is keyed; the context (which holds the pads derived from
/// them) is freed and cleared by OpenSSL when the last reference goes, that is when the class key
/// is dropped.
struct IndexKey: Sendable {
    private let mac: HMACKey
    /// Hashes asked for again and again (`remembered`), for as long as this key lives: every copy of the
    /// key shares them, and they go with it.
    private let rememberedHashes = Locked<[[UInt8]: [UInt8]]>([:])
    /// At most this many are remembered; the next one clears them all (they are few: one per access
    /// group a caller of the agent uses).
    static let rememberedCapacity = 256

    /// The index key below `afterFirstUnlock` (the AfterFirstUnlock class key).
    init(afterFirstUnlock: SecretBytes) throws {
        let derived = try HKDF.sha256(ikm: afterFirstUnlock, salt: [], info: KeyState.indexKeyInfo, count: 32)
        mac = try HMACKey(derived)
    }

    /// HMAC-SHA256 of `input` under the index key.
    func hash(_ input: [UInt8]) throws -> [UInt8] {
        try mac.sha256(input)
    }

    /// `hash(input)`, computed once for inputs that every request of a caller needs again (the keyed
    /// hashes of its access groups, which scope each of its requests).
    func remembered(_ input: [UInt8]) throws -> [UInt8] {
        if let known = rememberedHashes.withLock({ $0[input] }) { return known }
        let computed = try hash(input)
        rememberedHashes.withLock { known in
            if known.count >= Self.rememberedCapacity { known.removeAll() }
            known[input] = computed
        }
        return computed
    }
}
