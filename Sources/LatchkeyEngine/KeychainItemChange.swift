/// A generic password added, changed or deleted through SecItem (the Secret Service announces its own
/// changes), by its persistent reference UUID.
package enum KeychainItemChange: Sendable, Equatable {
    case added([UInt8])
    case changed([UInt8])
    case deleted([UInt8])
}
