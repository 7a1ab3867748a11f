import LatchkeyCrypto
import LatchkeyKeybag
import LatchkeyModel
import LatchkeyStore

/// The one place where lower layers' errors become `OSStatus` values (with a detail naming the file
/// where there is one, and never a secret).
enum EngineErrors {
    static func map(_ error: any Error) -> SecError {
        switch error {
        case let error as SecError:
            return error
        case let error as KeybagError:
            switch error {
            case .wrongPassword:
                return SecError(SecStatus.authFailed, "wrong keychain password")
            case .weakParameters(let why):
                return SecError(SecStatus.param, why)
            case .notFound:
                return SecError(SecStatus.noDefaultKeychain, error.description)
            case .wrongDevice, .deviceFactorRequired:
                return SecError(SecStatus.interactionNotAllowed, error.description)
            default:
                return SecError(SecStatus.invalidKeychain, error.description)
            }
        case let error as StoreError:
            switch error {
            case .duplicate:
                return SecError(SecStatus.duplicateItem)
            case .notFound:
                return SecError(SecStatus.itemNotFound)
            case .corrupt, .notAKeychainDatabase, .newerSchema, .damagedWAL, .missingDatabase:
                return SecError(SecStatus.invalidKeychain, error.description)
            case .sqlite(let code, _, _):
                switch code & 0xFF {
                case 13: return SecError(SecStatus.notAvailable, "disk full: \(error)")  // SQLITE_FULL
                case 8: return SecError(SecStatus.readOnly, error.description)  // SQLITE_READONLY
                case 10: return SecError(SecStatus.io, error.description)  // SQLITE_IOERR
                default: return SecError(SecStatus.internalComponent, error.description)
                }
            }
        case is CryptoError:
            return SecError(SecStatus.decode, "cryptographic operation failed")
        default:
            return SecError(SecStatus.internalComponent, String(describing: type(of: error)))
        }
    }
}
