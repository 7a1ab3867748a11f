import LatchkeyDBus
import LatchkeyModel

/// The one place where engine `OSStatus` values become Secret Service D-Bus errors
/// (docs/SECRET-SERVICE.md §6), plus the errors the D-Bus layer raises itself.
enum SecretServiceErrors {
    static func map(_ error: SecError) -> BusError {
        switch error.status {
        case SecStatus.interactionNotAllowed:
            return isLocked()
        case SecStatus.itemNotFound:
            return noSuchObject(error.detail ?? "no such object")
        case SecStatus.param:
            return invalidArgs(error.detail ?? "invalid argument")
        case SecStatus.missingEntitlement:
            return BusError(name: SS.ErrorName.accessDenied, message: error.detail ?? "not this client's")
        case SecStatus.unimplemented:
            return BusError(name: SS.ErrorName.notSupported, message: error.detail ?? "not supported")
        default:
            // No keychain yet, a damaged file, a full disk: the engine's message says which.
            let text = error.detail ?? SecStatus.message(for: error.status) ?? "OSStatus \(error.status)"
            return BusError(name: SS.ErrorName.failed, message: text)
        }
    }

    /// Maps any error thrown while serving a call: bus errors pass, engine errors are translated.
    static func map(_ error: any Error) -> BusError {
        switch error {
        case let error as BusError: error
        case let error as SecError: map(error)
        default: BusError(name: SS.ErrorName.failed, message: "internal error (\(type(of: error)))")
        }
    }

    static func isLocked(_ message: String = "the keychain is locked") -> BusError {
        BusError(name: SS.ErrorName.isLocked, message: message)
    }

    static func noSuchObject(_ message: String) -> BusError {
        BusError(name: SS.ErrorName.noSuchObject, message: message)
    }

    static func noSession(_ message: String = "no such session") -> BusError {
        BusError(name: SS.ErrorName.noSession, message: message)
    }

    static func invalidArgs(_ message: String) -> BusError {
        BusError(name: SS.ErrorName.invalidArgs, message: message)
    }
}
