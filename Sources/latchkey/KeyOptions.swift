import ArgumentParser
import Foundation
import Latchkey

/// `rsa` or `ec`: a key type (kSecAttrKeyType).
enum KeyAlgorithmArgument: String, ExpressibleByArgument, CaseIterable {
    case rsa, ec

    /// Apple's kSecAttrKeyType value ("42" or "73").
    var keyType: CFString { self == .rsa ? kSecAttrKeyTypeRSA : kSecAttrKeyTypeECSECPrimeRandom }
}

/// `public` or `private`: a key class (kSecAttrKeyClass).
enum KeyClassArgument: String, ExpressibleByArgument, CaseIterable {
    case `public`, `private`

    /// Apple's kSecAttrKeyClass value ("0" or "1").
    var keyClass: CFString { self == .public ? kSecAttrKeyClassPublic : kSecAttrKeyClassPrivate }
}

/// The attributes keys are matched by in `find-key` and `export`. The key type is not here because
/// `export` already has a `--type` (what to export); each verb declares it under its own name.
struct KeyFilterOptions: ParsableArguments {
    @Option(
        name: [.customShort("l"), .customLong("label")],
        help: ArgumentHelp("Match the label (kSecAttrLabel).", valueName: "label"))
    var label: String?

    @Option(
        name: .customLong("tag"),
        help: ArgumentHelp(
            "Match the application tag (kSecAttrApplicationTag), given as text; keys only.",
            valueName: "tag"))
    var tag: String?

    @Option(
        name: .customLong("class"),
        help: ArgumentHelp("Match public or private keys (kSecAttrKeyClass).", valueName: "class"))
    var keyClass: KeyClassArgument?

    @Option(
        name: .customLong("size"),
        help: ArgumentHelp("Match the key size in bits (kSecAttrKeySizeInBits).", valueName: "bits"))
    var size: Int?

    @Option(
        name: .customLong("token"),
        help: ArgumentHelp(
            "Match the keys of one token (kSecAttrTokenID, as `latchkey tokens` lists it); keys only.",
            valueName: "token-id"))
    var token: String?

    /// True when an option that only keys have was given (everything but the label).
    var hasKeyOnlyFilters: Bool { tag != nil || keyClass != nil || size != nil || token != nil }

    /// The query attributes for the key class, with the key type if the verb has one.
    func keyFilters(type: KeyAlgorithmArgument?) -> [String: Any] {
        var filters: [String: Any] = [:]
        if let label { filters[kSecAttrLabel as String] = label }
        if let tag { filters[kSecAttrApplicationTag as String] = Data(tag.utf8) }
        if let keyClass { filters[kSecAttrKeyClass as String] = keyClass.keyClass }
        if let size { filters[kSecAttrKeySizeInBits as String] = NSNumber(value: size) }
        if let token { filters[kSecAttrTokenID as String] = token }
        if let type { filters[kSecAttrKeyType as String] = type.keyType }
        return filters
    }
}

/// A key's kind in words, from its attributes: "EC 256-bit private key".
enum KeyDescription {
    static func of(_ attributes: [String: Any]) -> String {
        "\(algorithm(attributes)) \(bits(attributes))-bit \(isPrivate(attributes) ? "private" : "public") key"
    }

    /// "RSA", "EC", or the raw kSecAttrKeyType.
    static func algorithm(_ attributes: [String: Any]) -> String {
        switch integer(attributes[kSecAttrKeyType as String]) {
        case 42: "RSA"
        case 73: "EC"
        case let other?: "type \(other)"
        case nil: "unknown"
        }
    }

    static func bits(_ attributes: [String: Any]) -> Int {
        integer(attributes[kSecAttrKeySizeInBits as String]) ?? 0
    }

    static func isPrivate(_ attributes: [String: Any]) -> Bool {
        integer(attributes[kSecAttrKeyClass as String]) == 1
    }

    /// A number attribute, which the keychain returns as a number and SecKeyCopyAttributes may give
    /// as a string ("42").
    static func integer(_ value: Any?) -> Int? {
        switch value {
        case let number as NSNumber: number.intValue
        case let string as String: Int(string)
        default: nil
        }
    }
}

/// Hexadecimal, upper case without separators, as macOS `security` prints hashes.
func hexString(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { String(format: "%02X", $0) }.joined()
}
