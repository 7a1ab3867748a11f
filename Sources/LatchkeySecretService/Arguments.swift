import LatchkeyDesktop
import LatchkeyEngine

/// Reading method arguments: the signature is checked first, then every value and cap, so bad input
/// from a client becomes `InvalidArgs` and never reaches the engine (docs/SECRET-SERVICE.md §6).
enum Arguments {
    /// Objects per `Unlock`, `Lock` or `GetSecrets` call.
    static let maxObjects = 1024

    /// The call's arguments, if its body has exactly `signature`.
    static func read(_ call: BusMessage, _ signature: String) throws(BusError) -> [BusValue] {
        guard call.signature == signature else {
            throw SecretServiceErrors.invalidArgs("expected arguments (\(signature)), got (\(call.signature))")
        }
        return try call.arguments()
    }

    static func string(_ value: BusValue) throws(BusError) -> String {
        guard case .string(let s) = value else { throw SecretServiceErrors.invalidArgs("expected a string") }
        return s
    }

    static func objectPath(_ value: BusValue) throws(BusError) -> String {
        guard case .objectPath(let s) = value else { throw SecretServiceErrors.invalidArgs("expected an object path") }
        return s
    }

    static func bool(_ value: BusValue) throws(BusError) -> Bool {
        guard case .boolean(let b) = value else { throw SecretServiceErrors.invalidArgs("expected a boolean") }
        return b
    }

    /// An `ao`, at most `maxObjects` long.
    static func objectPaths(_ value: BusValue) throws(BusError) -> [String] {
        guard case .array("o", let items) = value else { throw SecretServiceErrors.invalidArgs("expected an array of object paths") }
        guard items.count <= maxObjects else {
            throw SecretServiceErrors.invalidArgs("more than \(maxObjects) objects in one call")
        }
        var paths: [String] = []
        for item in items { paths.append(try objectPath(item)) }
        return paths
    }

    /// An `ay` of at most `limit` bytes.
    static func bytes(_ value: BusValue, limit: Int) throws(BusError) -> [UInt8] {
        guard case .array("y", let items) = value else { throw SecretServiceErrors.invalidArgs("expected a byte array") }
        guard items.count <= limit else { throw SecretServiceErrors.invalidArgs("a byte array is longer than \(limit) bytes") }
        var out: [UInt8] = []
        out.reserveCapacity(items.count)
        for item in items {
            guard case .byte(let b) = item else { throw SecretServiceErrors.invalidArgs("expected a byte array") }
            out.append(b)
        }
        return out
    }

    static func byteArray(_ bytes: [UInt8]) -> BusValue {
        .array(elementType: "y", bytes.map { .byte($0) })
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
            guard name.utf8.count <= SecretServiceLimits.maxStringBytes, value.utf8.count <= SecretServiceLimits.maxStringBytes else {
                throw SecretServiceErrors.invalidArgs("an attribute is longer than \(SecretServiceLimits.maxStringBytes) bytes")
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
            throw SecretServiceErrors.invalidArgs("the label is longer than \(SecretServiceLimits.maxStringBytes) bytes")
        }
        return label
    }

    static func objectPathList(_ paths: [String]) -> BusValue {
        .array(elementType: "o", paths.map { .objectPath($0) })
    }
}
