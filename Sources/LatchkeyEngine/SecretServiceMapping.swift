import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets

// The mapping between Secret Service items and generic passwords (docs/SECRET-SERVICE.md §1–3): the
// attribute map type, the data sealed with each Secret Service item, the view of any genp item as a
// Secret Service item, and the keyed hashes of the "S" and "C" domains. Pure: no store, no lock.

/// Limits on what a Secret Service client may store (docs/SECRET-SERVICE.md §6).
package enum SecretServiceLimits {
    /// Attribute pairs per item.
    package static let maxAttributes = 256
    /// Bytes per attribute name or value, and per label.
    package static let maxStringBytes = 4096
    /// Bytes of a content type.
    package static let maxContentTypeBytes = 255
    /// Bytes of a secret.
    package static let maxSecretBytes = 1 << 20
    /// Collections besides `login`.
    package static let maxCollections = 64
    /// Aliases (each one costs a sealed-state entry and a signal path per lock change).
    package static let maxAliases = 128
    /// Bytes of a collection id or alias name.
    package static let maxIdentifierBytes = 64
}

/// A Secret Service attribute map: unique names, compared byte for byte (not under Unicode
/// equivalence, as Swift strings are), kept sorted by the UTF-8 bytes of the name.
package struct SecretAttributes: Sendable, Equatable {
    /// One attribute.
    package struct Pair: Sendable, Equatable {
        package var name: String
        package var value: String

        package init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }

        package static func == (a: Pair, b: Pair) -> Bool {
            a.name.utf8.elementsEqual(b.name.utf8) && a.value.utf8.elementsEqual(b.value.utf8)
        }
    }

    /// The pairs, sorted by name bytes.
    package private(set) var pairs: [Pair]

    /// The empty map.
    package init() { pairs = [] }

    /// A map from pairs in any order; nil if a name (as bytes) appears twice.
    package init?(_ unsorted: [Pair]) {
        let sorted = unsorted.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        for k in sorted.indices.dropFirst() where sorted[k - 1].name.utf8.elementsEqual(sorted[k].name.utf8) {
            return nil
        }
        pairs = sorted
    }

    package var count: Int { pairs.count }
    package var isEmpty: Bool { pairs.isEmpty }

    /// The value of `name` (compared as bytes).
    package subscript(name: String) -> String? {
        pairs.first { $0.name.utf8.elementsEqual(name.utf8) }?.value
    }

    /// Whether every pair of `query` is one of ours.
    package func contains(_ query: SecretAttributes) -> Bool {
        query.pairs.allSatisfy { wanted in pairs.contains(wanted) }
    }

    /// A copy with `name` set to `value`, or removed when `value` is nil.
    package func setting(_ name: String, _ value: String?) -> SecretAttributes {
        var others = pairs.filter { !$0.name.utf8.elementsEqual(name.utf8) }
        if let value { others.append(Pair(name, value)) }
        return SecretAttributes(others)!
    }

    /// Checks the caps of docs/SECRET-SERVICE.md §6.
    package func validate() throws(SecError) {
        guard pairs.count <= SecretServiceLimits.maxAttributes else {
            throw .param("more than \(SecretServiceLimits.maxAttributes) attributes")
        }
        for pair in pairs
        where pair.name.utf8.count > SecretServiceLimits.maxStringBytes
            || pair.value.utf8.count > SecretServiceLimits.maxStringBytes
        {
            throw .param("an attribute name or value is longer than \(SecretServiceLimits.maxStringBytes) bytes")
        }
    }

    /// The attribute names that give `acct`, in order of preference.
    static let accountNames = ["account", "username", "user"]
    static let serviceName = "service"

    /// `svce` as this map defines it.
    package var service: String? { self[Self.serviceName] }

    /// The name that gives `acct` (the first of `accountNames` present), or nil.
    var accountName: String? { Self.accountNames.first { self[$0] != nil } }

    /// `acct` as this map defines it.
    package var account: String? { accountName.flatMap { self[$0] } }

    /// This map without a `username` that repeats `account` (the view of a SecItem item has one).
    package var withoutMirroredUsername: SecretAttributes {
        guard let username = self["username"], let account = self["account"],
            username.utf8.elementsEqual(account.utf8)
        else { return self }
        return setting("username", nil)
    }

    /// Whether two maps name the same item for `CreateItem(replace)`: equal once a `username` that
    /// repeats `account` is set aside, so `{service, account}` replaces the item whose view is
    /// `{service, account, username}` (docs/SECRET-SERVICE.md §3).
    package func namesSameItem(as other: SecretAttributes) -> Bool {
        withoutMirroredUsername == other.withoutMirroredUsername
    }
}

/// What is sealed with a Secret Service item besides its genp attributes, under the key `ss` of the
/// sealed attribute dictionary (docs/SECRET-SERVICE.md §1.1).
package struct SecretServiceData: Sendable, Equatable {
    /// The key in the sealed dictionary; no SecItem attribute can have it.
    static let key = "ss"
    /// The keychain's own collection.
    package static let login = "login"

    package var attributes: SecretAttributes
    package var collection: String
    package var contentType: String
    /// Empty, or 16 random bytes that make a deliberate duplicate unique (docs/SECRET-SERVICE.md §3).
    package var nonce: [UInt8] = []
    /// The item was made through SecItem and a Secret Service client then stored richer attributes on
    /// it (`CreateItem(replace)` naming its service and account): it stays unique as the generic
    /// password of its `svce`/`acct`, whatever its attributes (docs/SECRET-SERVICE.md §3).
    package var keepsGenericIdentity = false

    var encoded: SecValue {
        var value: [String: SecValue] = [
            "a": .array(attributes.pairs.flatMap { [SecValue.string($0.name), .string($0.value)] }),
            "c": .string(collection),
            "t": .string(contentType),
        ]
        if !nonce.isEmpty { value["n"] = .data(nonce) }
        if keepsGenericIdentity { value["g"] = .bool(true) }
        return .dictionary(value)
    }

    package init(attributes: SecretAttributes, collection: String, contentType: String, nonce: [UInt8] = []) {
        self.attributes = attributes
        self.collection = collection
        self.contentType = contentType
        self.nonce = nonce
    }

    /// Decodes the sealed form; nil when it is malformed.
    init?(decoding value: SecValue) {
        guard case .dictionary(let d) = value, case .array(let flat)? = d["a"], flat.count % 2 == 0,
            case .string(let collection)? = d["c"], case .string(let contentType)? = d["t"]
        else { return nil }
        var pairs: [SecretAttributes.Pair] = []
        var k = 0
        while k < flat.count {
            guard case .string(let name) = flat[k], case .string(let value) = flat[k + 1] else { return nil }
            pairs.append(.init(name, value))
            k += 2
        }
        guard let attributes = SecretAttributes(pairs) else { return nil }
        self.attributes = attributes
        self.collection = collection
        self.contentType = contentType
        if let n = d["n"] {
            guard case .data(let nonce) = n else { return nil }
            self.nonce = nonce
        }
        if let g = d["g"] {
            guard case .bool(let keeps) = g else { return nil }
            keepsGenericIdentity = keeps
        }
    }

    /// Whether the item is unique as a plain generic password (no discriminator, §3).
    var hasGenericIdentity: Bool {
        isPlainLogin || (keepsGenericIdentity && collection == Self.login && nonce.isEmpty)
    }

    /// An item in `login`, not a deliberate duplicate, whose attributes are at most `service` and
    /// `account`, plus `username` with the value of `account` (the view of a SecItem item, §1): unique
    /// exactly as a SecItem genp item (docs/SECRET-SERVICE.md §3).
    var isPlainLogin: Bool {
        guard collection == Self.login, nonce.isEmpty else { return false }
        for pair in attributes.pairs {
            switch Array(pair.name.utf8) {
            case Array("service".utf8), Array("account".utf8):
                continue
            case Array("username".utf8):
                guard let account = attributes["account"], account.utf8.elementsEqual(pair.value.utf8) else {
                    return false
                }
            default:
                return false
            }
        }
        return true
    }

    /// Applies a SecItemUpdate's `svce`/`acct` changes to the attribute map (docs/SECRET-SERVICE.md §1):
    /// a new `acct` replaces the attribute that gave `acct`, and every other of `account`, `username`,
    /// `user` that carried the same value (so the view's `username` follows its `account`).
    func applying(secItemChanges changes: SecDictionary) -> SecretServiceData {
        var result = self
        if let svce = changes[SecAttr.service] {
            result.attributes = result.attributes.setting(SecretAttributes.serviceName, SecretServiceMapping.text(svce))
        }
        if let acct = changes[SecAttr.account] {
            let value = SecretServiceMapping.text(acct)
            if let old = attributes.account {
                for name in SecretAttributes.accountNames where attributes[name]?.utf8.elementsEqual(old.utf8) == true {
                    result.attributes = result.attributes.setting(name, value)
                }
            } else {
                result.attributes = result.attributes.setting(SecretAttributes.accountNames[0], value)
            }
        }
        return result
    }
}

/// The Secret Service view of genp items and the keyed hashes of docs/SECRET-SERVICE.md §2–3.
package enum SecretServiceMapping {
    static let defaultContentType = "text/plain"

    /// The version of the hashes `indexHashes` derives. When it moves on, every genp row is re-indexed
    /// once (docs/SECRET-SERVICE.md §2): 1 was the view {service, account}; 2 added `username`.
    static let indexVersion = 2

    /// A non-empty string, or data that is valid UTF-8; nil otherwise.
    package static func text(_ value: SecValue?) -> String? {
        let text: String?
        switch value {
        case .string(let s)?: text = s
        case .data(let d)?: text = String(strictUTF8: d)
        default: text = nil
        }
        return text?.isEmpty == false ? text : nil
    }

    /// The Secret Service data of an item: its sealed data, or the view of an item made through SecItem.
    static func data(of attributes: SecDictionary, sealed: SecretServiceData?) -> SecretServiceData {
        if let sealed { return sealed }
        var pairs: [SecretAttributes.Pair] = []
        if let service = text(attributes[SecAttr.service]) { pairs.append(.init("service", service)) }
        if let account = text(attributes[SecAttr.account]) {
            // `username` too: Python keyring and other clients look accounts up by that name.
            pairs.append(.init("account", account))
            pairs.append(.init("username", account))
        }
        return SecretServiceData(
            attributes: SecretAttributes(pairs)!, collection: SecretServiceData.login,
            contentType: defaultContentType)
    }

    /// The label of an item, as Secret Service shows it.
    static func label(of attributes: SecDictionary) -> String {
        switch attributes[SecAttr.label] {
        case .string(let s)?: s
        case .data(let d)?: String(strictUTF8: d) ?? ""
        default: ""
        }
    }

    /// Unix seconds of a `cdat`/`mdat` value (CFAbsoluteTime), rounded down; 0 when absent.
    static func unixSeconds(_ value: SecValue?) -> UInt64 {
        guard case .date(let t)? = value else { return 0 }
        let unix = t + Clock.unixToReferenceDate
        return unix > 0 && unix < 1.8e19 ? UInt64(unix) : 0
    }

    // MARK: Keyed hashes

    /// `HMAC(index key, "S" ‖ u32 len(name) ‖ name ‖ u32 len(value) ‖ value)`.
    static func pairHash(_ pair: SecretAttributes.Pair, indexKey: IndexKey) throws -> [UInt8] {
        var input: [UInt8] = [0x53]
        appendField(Array(pair.name.utf8), to: &input)
        appendField(Array(pair.value.utf8), to: &input)
        return try indexKey.hash(input)
    }

    /// `HMAC(index key, "C" ‖ u32 len(id) ‖ id)`.
    static func collectionHash(_ collection: String, indexKey: IndexKey) throws -> [UInt8] {
        var input: [UInt8] = [0x43]
        appendField(Array(collection.utf8), to: &input)
        return try indexKey.hash(input)
    }

    /// The index hashes a genp item carries for Secret Service: every pair of its attribute map (or
    /// of its view), and its collection's hash unless it is in `login`.
    static func indexHashes(attributes: SecDictionary, sealed: SecretServiceData?, indexKey: IndexKey) throws
        -> [[UInt8]]
    {
        let data = data(of: attributes, sealed: sealed)
        var hashes = try data.attributes.pairs.map { try pairHash($0, indexKey: indexKey) }
        if data.collection != SecretServiceData.login {
            hashes.append(try collectionHash(data.collection, indexKey: indexKey))
        }
        return hashes
    }

    /// The bytes appended to the uniqueness hash input, or nil for an item that is unique as a plain
    /// genp item: `"S" ‖ u32 len(collection) ‖ collection ‖ u32 n ‖ n × (u32 len ‖ name ‖ u32 len ‖
    /// value) ‖ u32 len(nonce) ‖ nonce`.
    static func discriminator(_ data: SecretServiceData?) -> [UInt8]? {
        guard let data, !data.hasGenericIdentity else { return nil }
        var out: [UInt8] = [0x53]
        appendField(Array(data.collection.utf8), to: &out)
        appendU32(UInt32(data.attributes.count), to: &out)
        for pair in data.attributes.pairs {
            appendField(Array(pair.name.utf8), to: &out)
            appendField(Array(pair.value.utf8), to: &out)
        }
        appendField(data.nonce, to: &out)
        return out
    }

    static func appendField(_ bytes: [UInt8], to out: inout [UInt8]) {
        appendU32(UInt32(bytes.count), to: &out)
        out += bytes
    }

    static func appendU32(_ n: UInt32, to out: inout [UInt8]) {
        out += [UInt8(n >> 24), UInt8((n >> 16) & 0xFF), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)]
    }

    /// The genp attributes a Secret Service attribute map defines: `svce` and `acct` (their implicit
    /// empty default when the map has no such attribute).
    package static func primaryKey(of attributes: SecretAttributes) -> (service: SecValue, account: SecValue) {
        (attributes.service.map { .string($0) } ?? .data([]), attributes.account.map { .string($0) } ?? .data([]))
    }
}
