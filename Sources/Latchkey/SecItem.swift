import Foundation
import LatchkeyModel
import LatchkeyWire

/// Adds an item to the keychain (Apple's `SecItemAdd`). `result`, when given, receives what the
/// `kSecReturn*` keys ask for. A `kSecMatch*` key is errSecParam (securityd appears to report success
/// without adding anything).
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemCall.run(result) { () throws(SecError) in .add(try ValueBridge.dictionary(attributes)) }
}

/// Returns one or more items that match a query (Apple's `SecItemCopyMatching`). A damaged item makes
/// the call fail with errSecDecode, where securityd skips it and queues it for deletion.
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    let status = SecItemCall.run(result) { () throws(SecError) in .copyMatching(try ValueBridge.dictionary(query)) }
    // Keys found with a context use it for their operations (docs/ACCESS-CONTROL.md §7).
    if status == SecStatus.success, let context = (query as NSDictionary)[kSecUseAuthenticationContext] as? LAContext,
        let found = result?.pointee
    {
        SecItemCall.attach(context, to: found)
    }
    return status
}

/// Modifies every item that matches a query (Apple's `SecItemUpdate`).
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    SecItemCall.run(nil) { () throws(SecError) in
        .update(query: try ValueBridge.dictionary(query), attributes: try ValueBridge.dictionary(attributesToUpdate))
    }
}

/// Deletes every item that matches a query (Apple's `SecItemDelete`). Works while the keychain is locked;
/// after `latchkey lock --all`, deleting by attributes gives errSecInteractionNotAllowed (the lookup key
/// is gone), while deleting a whole class or a persistent reference still works.
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    SecItemCall.run(nil) { () throws(SecError) in .delete(try ValueBridge.dictionary(query)) }
}

/// Apple's message for a result code (`SecCopyErrorMessageString`); `reserved` must be nil. A code
/// without a message gives "OSStatus" and the number.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    if let message = SecStatus.message(for: status) { return NSString(string: message) }
    return NSString(string: "OSStatus \(status)")
}

enum SecItemCall {
    /// Gives `context` to every private key in a result: the key itself, an identity's, a
    /// dictionary's `kSecValueRef`, in arrays too.
    static func attach(_ context: LAContext, to object: AnyObject) {
        switch object {
        case let key as SecKey: key.authenticationContext = context
        case let identity as SecIdentity: identity.privateKey.authenticationContext = context
        case let array as NSArray: for element in array { attach(context, to: element as AnyObject) }
        case let dictionary as NSDictionary:
            if let reference = dictionary[kSecValueRef] { attach(context, to: reference as AnyObject) }
        default: break
        }
    }

    /// Zeroes the application password an `LAContext` put into the request (`u_AppPwd`), a copy of its
    /// own, once sent. (Other data values may share storage with the caller's objects: left alone.)
    private static func wipeApplicationPassword(_ request: Request) {
        switch request {
        case .add(let d), .copyMatching(let d), .update(query: let d, attributes: _):
            d[SecKeys.useApplicationPassword]?.wipeDataInPlace()
        default: break
        }
    }

    static func run(_ result: UnsafeMutablePointer<CFTypeRef?>?, _ build: () throws(SecError) -> Request) -> OSStatus {
        let request: Request
        do {
            request = try build()
        } catch {
            LastError.record(error.detail)
            return error.status
        }
        let response = AgentClient.shared.send(request)
        wipeApplicationPassword(request)
        LastError.record(response)
        guard response.status == SecStatus.success else { return response.status }
        if let result {
            guard let value = response.value else {
                result.pointee = nil
                return SecStatus.success
            }
            let dictionary: SecDictionary
            switch request {
            case .add(let d), .copyMatching(let d): dictionary = d
            default: dictionary = [:]
            }
            do {
                result.pointee = try ValueBridge.result(value, request: dictionary)
            } catch {
                LastError.record(error.detail)
                return error.status
            }
        }
        return SecStatus.success
    }
}

/// The agent's detail for the most recent failed call on this thread (which key was wrong, which file
/// is damaged). An extension for diagnostics; Apple's API has no equivalent.
public enum LatchkeyDiagnostics {
    /// The detail of the last failure on the calling thread, if the agent gave one.
    public static var lastErrorDetail: String? { LastError.current }
}

enum LastError {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { if let raw = $0 { Unmanaged<NSString>.fromOpaque(raw).release() } }
        return key
    }()

    static func record(_ response: Response) {
        record(response.status == SecStatus.success ? nil : response.message)
    }

    static func record(_ detail: String?) {
        if let old = pthread_getspecific(key) { Unmanaged<NSString>.fromOpaque(old).release() }
        pthread_setspecific(key, detail.map { Unmanaged.passRetained(NSString(string: $0)).toOpaque() })
    }

    static var current: String? {
        guard let raw = pthread_getspecific(key) else { return nil }
        return Unmanaged<NSString>.fromOpaque(raw).takeUnretainedValue() as String
    }
}
