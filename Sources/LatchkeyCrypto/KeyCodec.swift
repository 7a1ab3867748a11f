internal import COpenSSL
import LatchkeySecrets

/// OpenSSL 3's `OSSL_DECODER`/`OSSL_ENCODER` for keys, wrapped once.
///
/// The type and structure names are static strings on purpose: the decoder and encoder contexts keep
/// the pointers they are given, so a temporary C string bridged from a Swift `String` would dangle.
enum KeyCodec {
    /// Selections (OpenSSL's `EVP_PKEY_KEYPAIR` and `EVP_PKEY_PUBLIC_KEY` are macros Swift cannot import).
    static let publicSelection = Int32(
        OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS
            | OSSL_KEYMGMT_SELECT_PUBLIC_KEY)
    static let keyPairSelection = publicSelection | Int32(OSSL_KEYMGMT_SELECT_PRIVATE_KEY)

    /// Decodes one key from `input` (and nothing more unless `allowTrailingBytes`). `nil` names mean "any".
    /// Always sets a passphrase (empty when none is given) so OpenSSL can never fall back to prompting
    /// on the terminal. Returns an owned `EVP_PKEY`; throws `.invalidInput` when nothing decodes.
    static func decode(
        _ input: UnsafeRawBufferPointer, inputType: StaticString?, structure: StaticString?,
        keyType: StaticString?, selection: Int32, password: SecretBytes?,
        allowTrailingBytes: Bool = false
    ) throws(CryptoError) -> OpaquePointer {
        var pkey: OpaquePointer?
        guard
            let ctx = OSSL_DECODER_CTX_new_for_pkey(
                &pkey, inputType.map(staticCString), structure.map(staticCString),
                keyType.map(staticCString), selection, nil, nil)
        else {
            throw opensslError("creating a key decoder")
        }
        defer { OSSL_DECODER_CTX_free(ctx) }
        let passphraseSet: Int32
        if let password {
            passphraseSet = password.withUnsafeBytes { buffer in
                OSSL_DECODER_CTX_set_passphrase(
                    ctx, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), buffer.count)
            }
        } else {
            var empty: UInt8 = 0
            passphraseSet = OSSL_DECODER_CTX_set_passphrase(ctx, &empty, 0)
        }
        guard passphraseSet == 1 else { throw opensslError("setting the key passphrase") }
        guard let base = input.baseAddress, input.count > 0 else { throw CryptoError.invalidInput("empty key data") }
        var cursor: UnsafePointer<UInt8>? = base.assumingMemoryBound(to: UInt8.self)
        var remaining = input.count
        let decoded = OSSL_DECODER_from_data(ctx, &cursor, &remaining)
        ERR_clear_error()
        guard decoded == 1, let pkey else {
            throw CryptoError.invalidInput("the data is not a key in a supported format")
        }
        guard remaining == 0 || allowTrailingBytes else {
            EVP_PKEY_free(pkey)
            throw CryptoError.invalidInput("unexpected bytes after the key")
        }
        return pkey
    }

    /// Encodes `pkey` (`outputType` "DER" or "PEM", `structure` such as "PrivateKeyInfo",
    /// "SubjectPublicKeyInfo" or "type-specific") into wiping storage. With a cipher name and a
    /// password the private key is encrypted (PKCS#8 PBES2 for "PrivateKeyInfo").
    static func encode(
        _ pkey: OpaquePointer, selection: Int32, outputType: StaticString, structure: StaticString,
        cipher: StaticString? = nil, password: SecretBytes? = nil
    ) throws(CryptoError) -> SecretBytes {
        guard
            let ctx = OSSL_ENCODER_CTX_new_for_pkey(
                pkey, selection, staticCString(outputType), staticCString(structure), nil)
        else {
            throw opensslError("creating a key encoder")
        }
        defer { OSSL_ENCODER_CTX_free(ctx) }
        guard OSSL_ENCODER_CTX_get_num_encoders(ctx) > 0 else {
            throw CryptoError.unsupported("no encoder for this key and format")
        }
        if let cipher, let password {
            guard OSSL_ENCODER_CTX_set_cipher(ctx, staticCString(cipher), nil) == 1 else {
                throw opensslError("setting the key cipher")
            }
            let set = password.withUnsafeBytes { buffer in
                OSSL_ENCODER_CTX_set_passphrase(
                    ctx, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), buffer.count)
            }
            guard set == 1 else { throw opensslError("setting the key passphrase") }
        }
        var data: UnsafeMutablePointer<UInt8>?
        var length = 0
        guard OSSL_ENCODER_to_data(ctx, &data, &length) == 1, let data else { throw opensslError("encoding a key") }
        // OpenSSL allocated the buffer: copy it into wiping storage, then clear and free OpenSSL's copy.
        let out = SecretBytes(copying: UnsafeBufferPointer(start: data, count: length))
        CRYPTO_clear_free(data, length, nil, 0)
        return out
    }
}
