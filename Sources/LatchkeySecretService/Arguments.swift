import LatchkeyCrypto
import LatchkeyDBus
import LatchkeyEngine

/// Reading method arguments. Dispatch has checked the signature and read the call within `limits`
/// (`BusObject.dispatch`); these check every value and cap, so bad input from a client becomes
/// `InvalidArgs` and never reaches the engine (docs/SECRET-SERVICE.md §6).
enum Arguments {
    /// Objects per `Unlock`, `Lock` or `GetSecrets` call.
    static let maxObjects = 1024

    /// What reading one call may build (docs/SECRET-SERVICE.md §6): the largest legitimate call is a
    /// `CreateItem` with a full attribute map (about 1,100 values) or a `GetSecrets` of 1,024 items.
    static let limits = ReadLimits(
        maxValues: 4096, maxArrayElements: maxObjects,
        maxStringBytes: SecretServiceLimits.maxStringBytes,
        maxByteArray: SecretServiceLimits.maxSecretBytes + 2 * AES128CBC.blockSize)

    /// For the calls that carry an attribute map (`SearchItems`, `CreateItem`, `Set`): no array may
    /// be longer than a map may be, so a huge map is refused after 256 entries, not after all of them.
    static let attributeLimits: ReadLimits = {
        var limits = Arguments.limits
        limits.maxArrayElements = SecretServiceLimits.maxAttributes
        return limits
    }()

    static func string(_ value: BusValue) throws(BusError) -> String {
        guard case .string(let s) = value else { throw SecretServiceErrors.invalidArgs("expected a string") }
        return s
    }

    static func objectPath(_ value: BusValue) throws(BusError) -> String {
        guard case .objectPath(let s) = value else { throw SecretServiceErrors.invalidArgs("expected an object path") }
        return s
    }

    /// An `ao`, at most `maxObjects` long.
    static func objectPaths(_ value: BusValue) throws(BusError) -> [String] {
        guard case .array("o", let items) = value else {
            throw SecretServiceErrors.invalidArgs("expected an array of object paths")
        }
        guard items.count <= maxObjects else {
            throw SecretServiceErrors.invalidArgs("more than \(maxObjects) objects in one call")
        }
        var paths: [String] = []
        for item in items { paths.append(try objectPath(item)) }
        return paths
    }

    /// An `ay` of at most `limit` bytes. The result shares its storage with `value` (wiping one wipes
    /// both).
    static func bytes(_ value: BusValue, limit: Int) throws(BusError) -> [UInt8] {
        guard case .byteArray(let bytes) = value else { throw SecretServiceErrors.invalidArgs("expected a byte array") }
        guard bytes.count <= limit else {
            throw SecretServiceErrors.invalidArgs("a byte array is longer than \(limit) bytes")
        }
        return bytes
    }

    /// An `ay` sharing `bytes`' storage.
    static func byteArray(_ bytes: [UInt8]) -> BusValue {
        .byteArray(bytes)
    }

    /// An `a{ss}` attribute map, within the caps of `SecretServiceLimits`; a repeated name is refused.
    static func attributes(_ value: BusValue) throws(BusError) -> SecretAttributes {
        guard case .array("{ss}", let entries) = value else {
            throw SecretServiceErrors.invalidArgs("attributes must be a{ss}")
        }
        guard entries.count <= SecretServiceLimits.maxAttributes else {
            throw SecretServiceErrors.invalidArgs("more than \(SecretServiceLimits.maxAttributes) attributes")
        }
        var pairs: [SecretAttributes.Pair] = []
        for entry in entries {
            guard case .dictEntry(.string(let name), .string(let value)) = entry else {
                throw SecretServiceErrors.invalidArgs("attributes must be a{ss}")
            }
            guard name.utf8.count <= SecretServiceLimits.maxStringBytes,
                value.utf8.count <= SecretServiceLimits.maxStringBytes
            else {
                throw SecretServiceErrors.invalidArgs(
                    "an attribute is longer than \(SecretServiceLimits.maxStringBytes) bytes")
            }
            pairs.append(.init(name, value))
        }
        guard let attributes = SecretAttributes(pairs) else {
            throw SecretServiceErrors.invalidArgs("an attribute name appears twice")
        }
        return attributes
    }

    static func attributesValue(_ attributes: SecretAttributes) -> BusValue {
        .array(elementType: "{ss}", attributes.pairs.map { .dictEntry(.string($0.name), .string($0.value)) })
    }

    /// An `a{sv}` property dictionary, variants unwrapped; a repeated name is refused.
    static func properties(_ value: BusValue) throws(BusError) -> [String: BusValue] {
        guard case .array("{sv}", let entries) = value else {
            throw SecretServiceErrors.invalidArgs("properties must be a{sv}")
        }
        guard entries.count <= 64 else { throw SecretServiceErrors.invalidArgs("too many properties") }
        var result: [String: BusValue] = [:]
        for entry in entries {
            guard case .dictEntry(.string(let name), .variant(let inner)) = entry, result[name] == nil else {
                throw SecretServiceErrors.invalidArgs("properties must be a{sv} without repeated names")
            }
            result[name] = inner
        }
        return result
    }

    static func label(_ value: BusValue) throws(BusError) -> String {
        let label = try string(value)
        guard label.utf8.count <= SecretServiceLimits.maxStringBytes else {
            throw SecretServiceErrors.invalidArgs(
                "the label is longer than \(SecretServiceLimits.maxStringBytes) bytes")
        }
        return label
    }

    static func objectPathList(_ paths: [String]) -> BusValue {
        .array(elementType: "o", paths.map { .objectPath($0) })
    }
}
