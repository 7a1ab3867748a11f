import LatchkeySecrets

/// HMAC-SHA256 (RFC 2104) under a key used once, such as the keybag's device factor. A key that
/// computes many MACs (the keychain's index key) is kept as an `HMACKey`, which keys OpenSSL's context
/// once instead of for every MAC.
package enum HMAC {
    /// HMAC-SHA256 of `data` under `key`; 32 bytes.
    package static func sha256(key: SecretBytes, _ data: [UInt8]) throws -> [UInt8] {
        try HMACKey(key).sha256(data)
    }

    /// HMAC-SHA256 of the bytes in `data` under `key`; 32 bytes.
    package static func sha256(key: SecretBytes, _ data: UnsafeRawBufferPointer) throws -> [UInt8] {
        try HMACKey(key).sha256(data)
    }
}
