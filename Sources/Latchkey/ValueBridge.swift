import Foundation
import LatchkeyModel

/// Converts between Foundation values (what SecItem callers pass and get back) and `SecValue` (what the
/// agent speaks), keeping each value's type: Apple's rules treat a CFBoolean, a CFNumber, a CFString and
/// CFData differently.
enum ValueBridge {
    /// A caller's dictionary as a SecItem dictionary; keys must be strings (errSecParam otherwise).
    static func dictionary(_ object: CFDictionary) throws(SecError) -> SecDictionary {
        var result: SecDictionary = [:]
        var context: LAContext?
        for (key, value) in object {
            guard let name = key as? String else { throw .param("dictionary keys must be strings") }
            result[name] = try secValue(value)
            if name == SecKeys.useAuthenticationContext { context = value as? LAContext }
        }
        context?.applyUse(to: &result)
        return result
    }

    /// One Foundation value as a SecValue.
    static func secValue(_ value: Any) throws(SecError) -> SecValue {
        if value is Bool || value is NSNumber {
            let object = value as AnyObject
            // Booleans bridge to the two CFBoolean singletons; any other NSNumber is a number.
            if object === kCFBooleanTrue { return .bool(true) }
            if object === kCFBooleanFalse { return .bool(false) }
            guard let number = object as? NSNumber else { throw .param("unsupported number") }
            switch String(cString: number.objCType) {
            case "d", "f": return .double(number.doubleValue)
            case "Q", "L":
                return number.uint64Value > UInt64(Int64.max) ? .double(number.doubleValue) : .int(number.int64Value)
            default: return .int(number.int64Value)
            }
        }
        switch value {
        case let key as SecKey:
            return key.secValue
        case let certificate as SecCertificate:
            return certificate.secValue
        case let identity as SecIdentity:
            return identity.secValue
        case let context as LAContext:
            // The handle the agent gave it (docs/ACCESS-CONTROL.md §7); errSecAuthFailed once invalidated.
            return .data(try context.requestHandle())
        case let control as SecAccessControl:
            // Its encoding (docs/PROTOCOL.md, "Access control"); the agent decodes and checks it.
            return .data(control.control.encoded)
        case let string as String:
            return .string(string)
        case let data as Data:
            return .data(Array(data))
        case let date as Date:
            return .date(date.timeIntervalSinceReferenceDate)
        case is NSNull:
            return .null
        case let uuid as UUID:
            return .string(uuid.uuidString)
        case let array as [Any]:
            var values: [SecValue] = []
            for element in array { values.append(try secValue(element)) }
            return .array(values)
        case let dictionary as NSDictionary:
            return .dictionary(try self.dictionary(dictionary))
        default:
            throw .param("values of type \(type(of: value)) are not supported")
        }
    }

    /// A SecValue as the Foundation object SecItem returns (NSData, NSString, NSNumber, NSDate, ...).
    static func object(_ value: SecValue) -> AnyObject {
        switch value {
        case .string(let s): return NSString(string: s)
        case .data(let d): return NSData(data: Data(d))
        case .int(let n): return NSNumber(value: n)
        case .bool(let b): return b ? kCFBooleanTrue : kCFBooleanFalse
        case .double(let d): return NSNumber(value: d)
        case .date(let t): return NSDate(timeIntervalSinceReferenceDate: t)
        case .array(let values): return NSArray(array: values.map(object))
        case .dictionary(let entries):
            let result = NSMutableDictionary(capacity: entries.count)
            for (key, value) in entries {
                // An item's kSecAttrAccessControl comes back as a SecAccessControl object, as on Apple systems.
                if key == SecAttr.accessControl, case .data(let bytes) = value,
                    let control = SecAccessControl(encoded: bytes)
                {
                    result[NSString(string: key)] = control
                    continue
                }
                result[NSString(string: key)] = object(value)
            }
            return result
        case .null: return kCFNull
        }
    }

    /// A SecItemAdd or SecItemCopyMatching result as Foundation objects, with the references that
    /// `kSecReturnRef` asked for as `SecCertificate`, `SecKey` or `SecIdentity` objects: the value itself
    /// when Ref was the only return key, otherwise the `kSecValueRef` entry of each dictionary.
    static func result(_ value: SecValue, request: SecDictionary) throws(SecError) -> AnyObject {
        guard request[SecKeys.returnRef] == .bool(true) else { return object(value) }
        let flags = [SecKeys.returnData, SecKeys.returnRef, SecKeys.returnPersistentRef].filter {
            request[$0] == .bool(true)
        }
        let wantsDictionary = request[SecKeys.returnAttributes] == .bool(true) || flags.count >= 2
        func element(_ value: SecValue) throws(SecError) -> AnyObject {
            guard wantsDictionary else { return try reference(value) }
            guard case .dictionary(var entries) = value else { return object(value) }
            let ref = entries.removeValue(forKey: SecKeys.valueRef)
            let result = object(.dictionary(entries)) as! NSMutableDictionary
            if let ref { result[NSString(string: SecKeys.valueRef)] = try reference(ref) }
            return result
        }
        if case .array(let values) = value {
            var objects: [AnyObject] = []
            for value in values { objects.append(try element(value)) }
            return NSArray(array: objects)
        }
        return try element(value)
    }

    /// The object for a reference the agent returned.
    static func reference(_ value: SecValue) throws(SecError) -> AnyObject {
        switch try ItemReference(value) {
        case .certificate(let certificate):
            return try SecCertificate(reference: certificate)
        case .key(let key):
            return try SecKey(reference: key)
        case .identity(let certificate, let key):
            return SecIdentity(
                certificate: try SecCertificate(reference: certificate), privateKey: try SecKey(reference: key))
        }
    }
}
