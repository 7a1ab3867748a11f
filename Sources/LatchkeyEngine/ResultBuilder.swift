import LatchkeyModel

/// Builds what SecItemCopyMatching and SecItemAdd return for one item, with Apple's shapes: a single
/// return key gives that value; Attributes, or two or more keys, give a dictionary.
enum ResultBuilder {
    static func value(for item: OpenItem, returns: ReturnFlags) throws(SecError) -> SecValue? {
        if returns.wantsDictionary {
            var result = returns.attributes ? item.attributes : [:]
            if returns.data { result[SecKeys.valueData] = .data(try ItemSealer.openSecret(item)) }
            if returns.persistentRef { result[SecKeys.valuePersistentRef] = .data(persistentRef(item)) }
            // Passwords have no object form, so a requested ref adds only the class, as securityd does.
            if returns.ref { result[SecKeys.itemClass] = .string(item.itemClass.name) }
            return .dictionary(result)
        }
        if returns.data { return .data(try ItemSealer.openSecret(item)) }
        if returns.persistentRef { return .data(persistentRef(item)) }
        return nil // nothing requested, or a ref of a class that has none
    }

    static func persistentRef(_ item: OpenItem) -> [UInt8] {
        PersistentRef(itemClass: item.itemClass, uuid: item.persistentRef).bytes
    }
}
