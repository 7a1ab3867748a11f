import CP11Kit
import LatchkeySecrets

/// ECDH on the token (docs/TOKENS.md, "Operations"): the one call that makes an object (a session secret
/// key) and reads a secret value back, so it checks more than the single-part operations do.
extension PKCS11Module {
    /// The largest shared secret read back: a P-521 field element is 66 bytes.
    static let maximumDerivedSize = 66

    /// C_DeriveKey with `CKM_ECDH1_DERIVE` (no KDF: `CKD_NULL`) of the private key `key` and the peer's
    /// X9.63 uncompressed point, into a session object (`CKA_TOKEN` false) that may be read
    /// (`CKA_SENSITIVE` false, `CKA_EXTRACTABLE` true) of exactly `length` bytes; its `CKA_VALUE`, the
    /// shared secret, is read into wiping storage and the object destroyed, also when reading fails.
    /// `login` runs first, for a key that needs its PIN on every use (`CKA_ALWAYS_AUTHENTICATE`).
    func deriveECDH(
        _ session: CK_SESSION_HANDLE, key: CK_OBJECT_HANDLE, peerPoint: [UInt8], length: Int,
        login: (() -> CK_RV)? = nil
    ) -> Result<SecretBytes, Failure> {
        let table = functions.pointee
        guard let derive = table.C_DeriveKey, let destroy = table.C_DestroyObject else {
            return .failure(Failure(rv: CKR_FUNCTION_NOT_SUPPORTED, call: "C_DeriveKey"))
        }
        guard length > 0, length <= Self.maximumDerivedSize, !peerPoint.isEmpty else {
            return .failure(Failure(rv: CKR_ARGUMENTS_BAD, call: "C_DeriveKey"))
        }
        if let login {
            let rv = login()
            guard rv == CKR_OK else { return .failure(Failure(rv: rv, call: "C_Login")) }
        }
        let no = [UInt8(CK_FALSE)]
        let yes = [UInt8(CK_TRUE)]
        let template: [(CK_ATTRIBUTE_TYPE, [UInt8])] = [
            (CK_ATTRIBUTE_TYPE(CKA_CLASS), Self.ulong(CK_ULONG(CKO_SECRET_KEY))),
            (CK_ATTRIBUTE_TYPE(CKA_KEY_TYPE), Self.ulong(CK_ULONG(CKK_GENERIC_SECRET))),
            (CK_ATTRIBUTE_TYPE(CKA_TOKEN), no), (CK_ATTRIBUTE_TYPE(CKA_SENSITIVE), no),
            (CK_ATTRIBUTE_TYPE(CKA_EXTRACTABLE), yes),
            (CK_ATTRIBUTE_TYPE(CKA_VALUE_LEN), Self.ulong(CK_ULONG(length))),
        ]
        var point = peerPoint
        var derived = CK_OBJECT_HANDLE(CK_INVALID_HANDLE)
        let rv = point.withUnsafeMutableBufferPointer { pointBuffer -> CK_RV in
            var parameters = CK_ECDH1_DERIVE_PARAMS(
                kdf: CK_ULONG(CKD_NULL), ulSharedDataLen: 0, pSharedData: nil,
                ulPublicDataLen: CK_ULONG(pointBuffer.count), pPublicData: pointBuffer.baseAddress)
            return withUnsafeMutablePointer(to: &parameters) { pointer in
                var mechanism = CK_MECHANISM(
                    mechanism: CK_MECHANISM_TYPE(CKM_ECDH1_DERIVE), pParameter: UnsafeMutableRawPointer(pointer),
                    ulParameterLen: CK_ULONG(MemoryLayout<CK_ECDH1_DERIVE_PARAMS>.size))
                return Self.withTemplate(template.map(\.0), template.map(\.1)) { attributes, count in
                    derive(session, &mechanism, key, attributes, count, &derived)
                }
            }
        }
        // A failed C_DeriveKey made no object (PKCS#11 §5.14), and its handle is not to be trusted: it
        // could name another object of the session.
        guard rv == CKR_OK else { return .failure(Failure(rv: rv, call: "C_DeriveKey")) }
        // Only an object shown to be a new session secret is read, and destroyed: a module that answered
        // with the handle of the key itself, or of another object, gets nothing read or destroyed.
        guard derived != CK_OBJECT_HANDLE(CK_INVALID_HANDLE), derived != key, isSessionSecret(session, derived) else {
            return .failure(Failure(rv: CKR_GENERAL_ERROR, call: "C_DeriveKey (no new session secret)"))
        }
        defer { _ = destroy(session, derived) }
        return secretValue(session, derived, length: length)
    }

    /// Whether `object` is a secret key of the session (`CKO_SECRET_KEY`, `CKA_TOKEN` false).
    private func isSessionSecret(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE) -> Bool {
        guard let getAttributeValue = functions.pointee.C_GetAttributeValue else { return false }
        var objectClass = CK_OBJECT_CLASS(CKO_DATA)
        var onToken = CK_BBOOL(CK_TRUE)
        return withUnsafeMutablePointer(to: &objectClass) { classPointer in
            withUnsafeMutablePointer(to: &onToken) { tokenPointer in
                var template = [
                    CK_ATTRIBUTE(
                        type: CK_ATTRIBUTE_TYPE(CKA_CLASS), pValue: UnsafeMutableRawPointer(classPointer),
                        ulValueLen: CK_ULONG(MemoryLayout<CK_OBJECT_CLASS>.size)),
                    CK_ATTRIBUTE(
                        type: CK_ATTRIBUTE_TYPE(CKA_TOKEN), pValue: UnsafeMutableRawPointer(tokenPointer),
                        ulValueLen: CK_ULONG(MemoryLayout<CK_BBOOL>.size)),
                ]
                let rv = getAttributeValue(session, object, &template, 2)
                return rv == CKR_OK && template[0].ulValueLen == CK_ULONG(MemoryLayout<CK_OBJECT_CLASS>.size)
                    && template[1].ulValueLen == CK_ULONG(MemoryLayout<CK_BBOOL>.size)
            }
        } && objectClass == CK_OBJECT_CLASS(CKO_SECRET_KEY) && onToken == CK_BBOOL(CK_FALSE)
    }

    /// The `CKA_VALUE` of a secret object made here, as `length` bytes: the size the module reports is
    /// checked before anything is allocated (1 to `length`), and again after the read. A shorter value is
    /// the x-coordinate with its leading zero bytes stripped, which some modules do despite `CKD_NULL`
    /// (on P-521 half the secrets start with one): it is padded back on the left.
    private func secretValue(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, length: Int)
        -> Result<SecretBytes, Failure>
    {
        guard let getAttributeValue = functions.pointee.C_GetAttributeValue else {
            return .failure(Failure(rv: CKR_FUNCTION_NOT_SUPPORTED, call: "C_GetAttributeValue"))
        }
        var template = CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_VALUE), pValue: nil, ulValueLen: 0)
        var rv = getAttributeValue(session, object, &template, 1)
        guard rv == CKR_OK else { return .failure(Failure(rv: rv, call: "C_GetAttributeValue")) }
        guard template.ulValueLen >= 1, template.ulValueLen <= CK_ULONG(length) else {
            return .failure(Failure(rv: CKR_GENERAL_ERROR, call: "C_GetAttributeValue (a secret of another size)"))
        }
        let reported = Int(template.ulValueLen)
        let secret = SecretBytes(count: length)  // zeros: the padding
        rv = secret.withUnsafeMutableBytes { buffer -> CK_RV in
            template.pValue = buffer.baseAddress! + (length - reported)
            template.ulValueLen = CK_ULONG(reported)
            return getAttributeValue(session, object, &template, 1)
        }
        guard rv == CKR_OK, template.ulValueLen == CK_ULONG(reported) else {
            return .failure(
                Failure(rv: rv == CKR_OK ? CKR_GENERAL_ERROR : rv, call: "C_GetAttributeValue"))
        }
        return .success(secret)
    }

    /// A CK_ULONG attribute value's bytes.
    private static func ulong(_ value: CK_ULONG) -> [UInt8] {
        withUnsafeBytes(of: value) { Array($0) }
    }
}
