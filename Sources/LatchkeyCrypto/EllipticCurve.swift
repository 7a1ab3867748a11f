/// The NIST prime curves Apple's SecKey supports for EC keys.
enum EllipticCurve: Sendable, CaseIterable {
    case p256, p384, p521

    /// Apple's `kSecAttrKeySizeInBits` for the curve.
    var bits: Int {
        switch self {
        case .p256: 256
        case .p384: 384
        case .p521: 521
        }
    }

    /// Bytes of a field element (and of a coordinate in X9.63 encoding).
    var fieldSize: Int { (bits + 7) / 8 }

    /// OpenSSL's group name, as a static C string for `OSSL_PARAM`.
    var groupName: UnsafeMutablePointer<CChar> {
        switch self {
        case .p256: staticCString("prime256v1")
        case .p384: staticCString("secp384r1")
        case .p521: staticCString("secp521r1")
        }
    }

    init?(bits: Int) {
        guard let curve = Self.allCases.first(where: { $0.bits == bits }) else { return nil }
        self = curve
    }

    /// Recognises OpenSSL's names and the NIST aliases.
    init?(groupName: String) {
        switch groupName {
        case "prime256v1", "P-256", "secp256r1": self = .p256
        case "secp384r1", "P-384": self = .p384
        case "secp521r1", "P-521": self = .p521
        default: return nil
        }
    }
}
