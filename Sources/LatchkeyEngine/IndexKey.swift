import LatchkeyCrypto
import LatchkeySecrets

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

    /// The index key below `afterFirstUnlock` (the AfterFirstUnlock class key).
    init(afterFirstUnlock: SecretBytes) throws {
        let derived = try HKDF.sha256(ikm: afterFirstUnlock, salt: [], info: KeyState.indexKeyInfo, count: 32)
        mac = try HMACKey(derived)
    }

    /// HMAC-SHA256 of `input` under the index key.
    func hash(_ input: [UInt8]) throws -> [UInt8] {
        try mac.sha256(input)
    }
}
