/// Which SecItem call a query dictionary belongs to; the same key means different things in each.
package enum QueryOperation: Sendable {
    case copyMatching
    case update
    case delete
}

/// Parses SecItem dictionaries with securityd's rules (`query_applier` in SecDbQuery.c): four-character
/// keys are attributes of the class, anything else is dispatched on its first character (`c`lass,
/// `m`atch, `r`eturn, `u`se, `v`alue; `f` ignored), and every misuse gets Apple's status.
package enum DictionaryParser {
    /// securityd's QUERY_KEY_LIMIT.
    package static let maximumKeys = 128

    /// Parses a SecItemAdd dictionary.
    package static func parseAdd(_ dictionary: SecDictionary) throws(SecError) -> AddRequest {
        try checkShape(dictionary)
        let reference = try dictionary[SecKeys.valueRef].map { value throws(SecError) in try ItemReference(value) }
        let (itemClass, identity) = try classOf(dictionary, persistentRef: nil, reference: reference)
        if identity, reference == nil { throw .param("an identity is added through kSecValueRef only") }
        var request = AddRequest(itemClass: itemClass)
        request.reference = reference
        for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) {
            if isAttributeKey(key) {
                switch try attribute(key, value, itemClass: itemClass, query: false, identity: identity) {
                case .attribute(let v): request.attributes[key] = v
                case .protection(let p): request.protection = p
                case .synchronizable(let sync): request.synchronizable = sync ?? false
                case .accessControl(let control): request.accessControl = control
                case .ignored: break
                }
                continue
            }
            switch key.first {
            case "c": continue  // the class, already read
            case "m": throw .param("search key '\(key)' is not allowed in SecItemAdd")
            case "r": try setReturn(key, value, &request.returns)
            case "v":
                switch key {
                case SecKeys.valueData: request.data = try dataValue(value, key)
                case SecKeys.valueRef: continue  // parsed above
                case SecKeys.valuePersistentRef: throw .param("kSecValuePersistentRef is not allowed in SecItemAdd")
                default: throw .param("unknown value key '\(key)'")
                }
            case "u":
                try checkUseKey(key, value, allowSkip: false)
                applyUseKey(key, value, ui: &request.authenticationUI, prompt: &request.operationPrompt)
            case "f": continue
            default: throw .param("unknown key '\(key)'")
            }
        }
        if let control = request.accessControl {
            request.protection = try protection(
                of: control, accessible: request.protection, sync: request.synchronizable)
        }
        return request
    }

    /// Parses a query dictionary for SecItemCopyMatching, SecItemUpdate or SecItemDelete.
    package static func parseQuery(_ dictionary: SecDictionary, for operation: QueryOperation) throws(SecError)
        -> ItemQuery
    {
        try checkShape(dictionary)
        var persistentRef: PersistentRef?
        if let refValue = dictionary[SecKeys.valuePersistentRef] {
            guard case .data(let bytes) = refValue, let ref = PersistentRef(bytes: bytes) else {
                throw .param("kSecValuePersistentRef is not a persistent reference")
            }
            persistentRef = ref
        }
        let reference = try dictionary[SecKeys.valueRef].map { value throws(SecError) in try ItemReference(value) }
        let (itemClass, identity) = try classOf(dictionary, persistentRef: persistentRef, reference: reference)
        var query = ItemQuery(itemClass: itemClass, limit: operation == .copyMatching ? .one : .all)
        query.persistentRef = persistentRef
        query.reference = reference
        query.identity = identity
        var sawAttribute = false
        for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) {
            if isAttributeKey(key) {
                if key != SecKeys.useDataProtectionKeychain { sawAttribute = true }
                switch try attribute(key, value, itemClass: itemClass, query: true, identity: identity) {
                case .attribute(let v) where identity && itemClass.attribute(key) == nil: query.keyAttributes[key] = v
                case .attribute(let v): query.attributes[key] = v
                case .protection(let p): query.protection = p
                case .synchronizable(let sync): query.synchronizable = sync
                case .accessControl, .ignored: break  // no column: not a filter (secitem-semantics §5.3)
                }
                continue
            }
            switch key.first {
            case "c": continue
            case "m":
                guard operation == .copyMatching else {
                    throw .param(
                        "search key '\(key)' is not allowed in \(operation == .update ? "SecItemUpdate" : "SecItemDelete")"
                    )
                }
                try applyMatchKey(key, value, itemClass: itemClass, &query)
            case "r":
                var flags = query.returns
                try setReturn(key, value, &flags)
                switch operation {
                case .copyMatching: query.returns = flags
                case .update where !flags.isEmpty: throw .param("return key '\(key)' is not allowed in SecItemUpdate")
                case .update, .delete: continue  // ignored by delete, as in securityd
                }
            case "v":
                switch key {
                case SecKeys.valueData: continue  // accepted, never a match criterion
                case SecKeys.valuePersistentRef, SecKeys.valueRef: continue  // parsed above
                default: throw .param("unknown value key '\(key)'")
                }
            case "u":
                try checkUseKey(key, value, allowSkip: operation == .copyMatching)
                applyUseKey(key, value, ui: &query.authenticationUI, prompt: &query.operationPrompt)
            case "f": continue
            default: throw .param("unknown key '\(key)'")
            }
        }
        if persistentRef != nil {
            guard !sawAttribute else { throw .param("kSecValuePersistentRef cannot be combined with attributes") }
            guard reference == nil else { throw .param("kSecValuePersistentRef cannot be combined with kSecValueRef") }
            query.synchronizable = nil  // a persistent reference names one item, synchronizable or not
        }
        return query
    }

    /// Parses the `attributesToUpdate` dictionary of SecItemUpdate: attributes of the class and
    /// `kSecValueData` only; any other key is errSecNoSuchAttr, as in securityd.
    package static func parseChanges(_ dictionary: SecDictionary, itemClass: ItemClass) throws(SecError)
        -> AttributeChanges
    {
        try checkShape(dictionary)
        var changes = AttributeChanges()
        for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) {
            if key == SecKeys.valueData {
                changes.data = try dataValue(value, key)
            } else if isAttributeKey(key) {
                switch try attribute(key, value, itemClass: itemClass, query: false) {
                case .attribute(let v): changes.attributes[key] = v
                case .protection(let p): changes.protection = p
                case .synchronizable(let sync): changes.synchronizable = sync ?? false
                case .accessControl(let control): changes.accessControl = control
                case .ignored: break
                }
            } else {
                throw .noSuchAttr(key, itemClass.name)
            }
        }
        if let control = changes.accessControl {
            changes.protection = try protection(
                of: control, accessible: changes.protection, sync: changes.synchronizable ?? false)
        }
        return changes
    }

    // MARK: - Pieces

    static func checkShape(_ dictionary: SecDictionary) throws(SecError) {
        guard dictionary.count <= maximumKeys else {
            throw .param("a SecItem dictionary holds at most \(maximumKeys) keys")
        }
        for (key, value) in dictionary where value == .null {
            throw .param("key '\(key)' has a null value")
        }
    }

    /// Whether a dictionary key names an attribute (four characters, as in securityd).
    package static func isAttributeKey(_ key: String) -> Bool {
        key.utf8.count == 4
    }

    /// The stored class a dictionary works on, and whether it is the virtual identity class (whose
    /// stored half is the certificate). Without `kSecClass` the class comes from the persistent
    /// reference or from `kSecValueRef`, as Apple infers it.
    static func classOf(
        _ dictionary: SecDictionary, persistentRef: PersistentRef?,
        reference: ItemReference?
    ) throws(SecError) -> (ItemClass, identity: Bool) {
        let name: String
        if let value = dictionary[SecKeys.itemClass] {
            guard case .string(let given) = value else { throw .param("kSecClass must be a string") }
            name = given
        } else if let persistentRef {
            name = persistentRef.identity ? SecKeys.classIdentity : persistentRef.itemClass.name
        } else if let reference {
            name = reference.className
        } else {
            throw .param("kSecClass is missing")
        }
        // An identity query may name its certificate (Apple's client turns it into the certificate's
        // attributes); otherwise the reference's class must be the dictionary's.
        if let reference, reference.className != name,
            !(name == SecKeys.classIdentity && reference.className == SecKeys.classCertificate)
        {
            throw .param("kSecValueRef is a \(reference.className) reference but kSecClass is '\(name)'")
        }
        if name == SecKeys.classIdentity {
            if let persistentRef, !persistentRef.identity {
                throw SecError(SecStatus.noSuchClass, "kSecClass does not match the persistent reference's class")
            }
            return (.certificate, true)
        }
        guard let itemClass = ItemClass(name: name) else {
            throw SecError(SecStatus.noSuchClass, "unknown kSecClass '\(name)'")
        }
        if let persistentRef, persistentRef.itemClass != itemClass || persistentRef.identity {
            throw SecError(SecStatus.noSuchClass, "kSecClass does not match the persistent reference's class")
        }
        return (itemClass, false)
    }

    /// What a four-character key contributes to a request.
    enum AttributeOutcome {
        case attribute(SecValue)
        case protection(ProtectionClass)
        /// nil: `kSecAttrSynchronizableAny`.
        case synchronizable(Bool?)
        case accessControl(AccessControl)
        case ignored
    }

    static func attribute(
        _ key: String, _ value: SecValue, itemClass: ItemClass, query: Bool,
        identity: Bool = false
    ) throws(SecError) -> AttributeOutcome {
        switch key {
        case SecKeys.useDataProtectionKeychain:
            return .ignored  // kSecUseDataProtectionKeychain: a no-op here, as in securityd
        case SecAttr.accessible:
            guard case .string(let pdmn) = value, let cls = ProtectionClass(pdmn: pdmn) else {
                throw .param("kSecAttrAccessible has an unknown value")
            }
            return .protection(cls)
        case SecAttr.synchronizable:
            return .synchronizable(try syncValue(value, query: query))
        case SecAttr.accessControl:
            // Apple's client checks the type before anything else: a value that is not a SecAccessControl
            // (whose serialised form is data) is errSecParam (SecItem.m, SecItemAttributesPrepare).
            // The library sends a SecAccessControl as its encoding (docs/PROTOCOL.md); data that is not one
            // is, like any other type, not a SecAccessControl.
            guard case .data(let bytes) = value, let control = try? AccessControl(decoding: bytes) else {
                throw .param("kSecAttrAccessControl must be a SecAccessControl")
            }
            return .accessControl(control)
        case SecAttr.appClipItem:
            // securityd refuses its internal attributes in every dictionary (SecItemServer.c,
            // queryHasValidAttributes): errSecParam, not errSecNoSuchAttr.
            throw .param("'\(key)' is an internal attribute")
        case SecAttr.tokenID where !query:
            // Token items come from their token (docs/TOKENS.md); a stored item claiming a token's id would
            // answer a query that names the token while it is away. Apple's SecItemAdd hands such an add to
            // the token, whose items are read-only here.
            throw .param("kSecAttrTokenID cannot be set on a stored item: token items come from the token")
        default:
            // An identity accepts every certificate and every key attribute; the certificate's wins.
            guard let spec = itemClass.attribute(key) ?? (identity ? ItemClass.key.attribute(key) : nil) else {
                throw .noSuchAttr(key, identity ? SecKeys.classIdentity : itemClass.name)
            }
            return .attribute(try AttributeValue.coerce(value, for: spec))
        }
    }

    /// The protection class of an item given an access control: the access control's, which a
    /// `kSecAttrAccessible` may repeat but not contradict, and never for a synchronizable item
    /// (secitem-semantics §4.6: SecAccessControlCreateWithFlags always attaches an ACL).
    static func protection(of control: AccessControl, accessible: ProtectionClass?, sync: Bool) throws(SecError)
        -> ProtectionClass
    {
        if let accessible, accessible != control.protection {
            throw .param("kSecAttrAccessible differs from the protection of kSecAttrAccessControl")
        }
        if sync { throw .param("kSecAttrAccessControl cannot be given to a synchronizable item") }
        return control.protection
    }

    /// Records what a valid use key asks for: the authentication UI and the operation prompt.
    static func applyUseKey(_ key: String, _ value: SecValue, ui: inout AuthenticationUI, prompt: inout String?) {
        switch (key, value) {
        case (SecKeys.useAuthenticationUI, .string(SecKeys.useAuthenticationUIFail)): ui = .fail
        case (SecKeys.useAuthenticationUI, .string(SecKeys.useAuthenticationUISkip)): ui = .skip
        // The legacy kSecUseNoAuthenticationUI = true behaves as Fail; an explicit Skip stays Skip.
        case (SecKeys.useNoAuthenticationUI, .bool(true)) where ui == .allow: ui = .fail
        case (SecKeys.useOperationPrompt, .string(let text)): prompt = text
        default: break
        }
    }

    static func syncValue(_ value: SecValue, query: Bool) throws(SecError) -> Bool? {
        switch value {
        case .bool(let b): return b
        case .int(0), .string("0"): return false
        case .int(1), .string("1"): return true
        case .string(SecKeys.synchronizableAny) where query: return nil
        default: throw .param("kSecAttrSynchronizable has an invalid value")
        }
    }

    static func setReturn(_ key: String, _ value: SecValue, _ flags: inout ReturnFlags) throws(SecError) {
        guard case .bool(let on) = value else { throw .param("return key '\(key)' must be a boolean") }
        switch key {
        case SecKeys.returnData: flags.data = on
        case SecKeys.returnAttributes: flags.attributes = on
        case SecKeys.returnRef: flags.ref = on
        case SecKeys.returnPersistentRef: flags.persistentRef = on
        default: throw .param("unknown return key '\(key)'")
        }
    }

    static func dataValue(_ value: SecValue, _ key: String) throws(SecError) -> [UInt8] {
        guard case .data(let bytes) = value else { throw .param("'\(key)' must be data") }
        return bytes
    }

    static func applyMatchKey(_ key: String, _ value: SecValue, itemClass: ItemClass, _ query: inout ItemQuery)
        throws(SecError)
    {
        switch key {
        case SecKeys.matchLimit:
            switch value {
            case .string(SecKeys.matchLimitOne): query.limit = .one
            case .string(SecKeys.matchLimitAll): query.limit = .all
            case .int(let n) where n >= 1: query.limit = .count(Int(clamping: n))
            default: throw .param("kSecMatchLimit has an invalid value")
            }
        case SecKeys.matchCaseInsensitive, SecKeys.matchItemList:
            return  // recorded but not used by securityd: matching is exact
        case SecKeys.matchPolicy, SecKeys.matchIssuers, SecKeys.matchSubjectContains, SecKeys.matchSubjectStartsWith,
            SecKeys.matchSubjectEndsWith, SecKeys.matchSubjectWholeString, SecKeys.matchTrustedOnly,
            SecKeys.matchValidOnDate:
            throw SecError(SecStatus.unimplemented, "'\(key)' is not supported (it needs SecPolicy or SecTrust)")
        case SecKeys.matchHostOrSubdomainOfHost:
            // securityd: a string, for internet passwords only (errSecUnsupportedOperation, -4, for any
            // other class; SecItemServer.c, _SecItemCopyMatching).
            guard case .string(let host) = value else { throw .param("'\(key)' must be a string") }
            guard itemClass == .internetPassword else {
                throw SecError(SecStatus.unimplemented, "'\(key)' applies to internet passwords only")
            }
            query.hostOrSubdomain = host
        case SecKeys.matchEmailAddressIfPresent:
            // securityd: a string; it filters certificates and identities and is ignored for other classes.
            guard case .string(let address) = value else { throw .param("'\(key)' must be a string") }
            if itemClass == .certificate { query.emailAddress = address }
        default:
            throw .param("unknown search key '\(key)'")
        }
    }

    static func checkUseKey(_ key: String, _ value: SecValue, allowSkip: Bool) throws(SecError) {
        switch key {
        case SecKeys.useAuthenticationUI:
            switch value {
            case .string(SecKeys.useAuthenticationUIAllow), .string(SecKeys.useAuthenticationUIFail): return
            case .string(SecKeys.useAuthenticationUISkip) where allowSkip: return
            default: throw .param("kSecUseAuthenticationUI has an invalid value here")
            }
        case SecKeys.useOperationPrompt:
            guard case .string = value else { throw .param("kSecUseOperationPrompt must be a string") }
        case SecKeys.useNoAuthenticationUI:
            guard case .bool = value else { throw .param("kSecUseNoAuthenticationUI must be a boolean") }
        case SecKeys.useAuthenticationContext:
            // The library sends an LAContext as the handle the agent gave it; the agent's request layer
            // decides what it is worth (docs/ACCESS-CONTROL.md §7). Anything else is not an LAContext.
            guard case .data(let handle) = value, handle.count == SecKeys.authenticationContextLength else {
                throw .param("kSecUseAuthenticationContext must be an LAContext")
            }
        case SecKeys.useApplicationPassword:
            // Read by the agent's request layer (docs/ACCESS-CONTROL.md §8); the engine never sees it.
            guard case .data(let password) = value, password.count <= 4096 else {
                throw .param("the application password must be data of at most 4096 bytes")
            }
        default:
            throw .param("use key '\(key)' is not supported")
        }
    }
}
