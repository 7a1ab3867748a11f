import LatchkeyModel
import LatchkeySecrets

/// Unwrapped class keys, each in wiping storage.
///
/// A reference type so that handing the set around never copies key material, and so that dropping
/// the last reference (locking) releases every `SecretBytes`, which wipes itself. Immutable after
/// creation, which is what makes the `@unchecked Sendable` sound.
package final class ClassKeys: @unchecked Sendable {
    /// The keys present, by class. Not every class need be present (a locked keychain still has the
    /// Always classes).
    package let keys: [ProtectionClass: SecretBytes]

    /// Wraps an existing dictionary of keys (references are shared, not copied).
    package init(_ keys: [ProtectionClass: SecretBytes]) {
        self.keys = keys
    }

    /// The key for class `c`, or nil if that class is not unlocked.
    package subscript(_ c: ProtectionClass) -> SecretBytes? { keys[c] }

    /// The classes present, in ascending raw-value order.
    package var classes: [ProtectionClass] { keys.keys.sorted() }

    /// A set holding the keys of both, preferring `other`'s where both have a class. Used to combine
    /// the Always classes (available at agent start) with the password classes (after unlock).
    package func merging(_ other: ClassKeys) -> ClassKeys {
        ClassKeys(keys.merging(other.keys) { _, new in new })
    }
}
