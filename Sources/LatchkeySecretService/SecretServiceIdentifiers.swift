import LatchkeyEngine
import LatchkeyModel

/// Checks of what a client gives (docs/SECRET-SERVICE.md §6) and the ids of new collections.
extension SecretServiceKeychain {
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
            name.utf8.allSatisfy(ObjectPath.isPathCharacter)
        else {
            throw .param("\(what) must be 1–\(SecretServiceLimits.maxIdentifierBytes) characters of [A-Za-z0-9_]")
        }
    }

    /// An id from a label: other characters become `_`, at most 48 bytes, a number appended when taken.
    static func newIdentifier(for label: String, taken state: SecretServiceState) -> String {
        var base = String(
            decoding: label.utf8.prefix(48).map { ObjectPath.isPathCharacter($0) ? $0 : 0x5F }, as: UTF8.self)
        if base.isEmpty { base = "collection" }
        var candidate = base
        var n = 2
        // `session` names the in-memory collection (SessionCollection), whatever is stored.
        while state.collection(candidate) != nil || candidate == login || candidate == SessionCollection.id {
            candidate = "\(base)_\(n)"
            n += 1
        }
        return candidate
    }
}
