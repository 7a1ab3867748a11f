import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore

/// One certificate or key that a present token (a smart card, an HSM, a software token) provides, as the
/// engine shows it beside the store's items (docs/TOKENS.md). Token items are not rows: they are read from
/// the token by `LatchkeyTokens` and live as long as the token is present.
package struct TokenItem: Sendable, Equatable {
    /// The item's persistent reference (16 bytes): derived from the token id and the object, so it stays the
    /// same while the token is present (and names the same object when it comes back).
    package var ref: [UInt8]
    /// `.certificate` or `.key`.
    package var itemClass: ItemClass
    /// Every attribute the item shows, `tkid` and `agrp` (com.apple.token) among them.
    package var attributes: SecDictionary
    /// A certificate's DER, or a key's public half (its external representation): never a private key's
    /// value, which the token does not give out and is never asked for.
    package var data: [UInt8]
    /// `kSecAttrKeyType` (42 RSA, 73 EC), for keys; 0 for certificates.
    package var keyType: Int64
    /// `kSecAttrKeyClass` (0 public, 1 private), for keys.
    package var keyClass: Int64
    package var sizeInBits: Int64

    package init(
        ref: [UInt8], itemClass: ItemClass, attributes: SecDictionary, data: [UInt8], keyType: Int64 = 0,
        keyClass: Int64 = 0, sizeInBits: Int64 = 0
    ) {
        self.ref = ref
        self.itemClass = itemClass
        self.attributes = attributes
        self.data = data
        self.keyType = keyType
        self.keyClass = keyClass
        self.sizeInBits = sizeInBits
    }

    /// The token's id (`kSecAttrTokenID`).
    package var tokenID: String { attributes[SecAttr.tokenID]?.stringValue ?? "" }

    /// The protection class token items show: they are readable whenever the token is present, whatever
    /// the keychain's lock state (the token guards its keys with its PIN).
    package static let protection = ProtectionClass.alwaysThisDeviceOnly
}

/// A private-key operation on a token key, as the engine hands it to the token's side: everything the
/// request said, and who asked (for the PIN prompt).
package struct TokenKeyRequest: Sendable {
    package var item: TokenItem
    package var operation: KeyOperation
    package var algorithm: String
    package var input: [UInt8]
    /// ECDH: the peer's public key (external representation), the size asked for and the KDF's shared info.
    package var peer: [UInt8]
    package var requestedSize: Int?
    package var sharedInfo: [UInt8]
    package var caller: Caller
    /// `kSecUseOperationPrompt`, shown with the PIN prompt.
    package var prompt: String?
    /// `kSecUseAuthenticationUI`: `.fail` answers errSecInteractionNotAllowed where a PIN would be asked.
    package var authenticationUI: AuthenticationUI
    /// The PIN the program gave with its `LAContext` (`setCredential(_:type: .smartCardPIN)`): used for a
    /// login in place of asking the user.
    package var pin: SecretBytes? = nil
}

/// What the engine asks of the tokens (implemented by `LatchkeyTokens`, wired in by the agent). Both calls
/// are safe from any thread. `items` is called with the engine's mutex held, so it only reads a snapshot
/// and never waits for a token; `perform` is called without it and may wait (for the token, for the PIN).
package protocol TokenSource: Sendable {
    /// The items of the tokens present now.
    func items() -> [TokenItem]
    /// A private-key operation on the token: the result, or errSecItemNotFound (the token is gone),
    /// errSecUserCanceled, errSecAuthFailed (wrong or locked PIN), errSecInteractionNotAllowed.
    func perform(_ request: TokenKeyRequest) throws(SecError) -> [UInt8]
    /// The keychain was locked: every token forgets its PIN (the sessions are logged out).
    func keychainLocked()
    /// `SecKeyCreateRandomKey` with `kSecAttrTokenID`: a key pair made on the token (C_GenerateKeyPair);
    /// the new private key's item.
    func generate(_ request: TokenKeyGeneration) throws(SecError) -> TokenItem
}

/// A key pair to make on a token.
package struct TokenKeyGeneration: Sendable {
    package var tokenID: String
    /// 42 (RSA) or 73 (EC).
    package var keyType: Int64
    package var sizeInBits: Int64
    /// The label and application tag of the new objects (`CKA_LABEL`, `CKA_ID`), when given.
    package var label: String?
    package var tag: [UInt8]?
    package var caller: Caller
    package var prompt: String?
    /// `kSecUseAuthenticationUI`: `.fail` answers errSecInteractionNotAllowed where the user would be asked.
    package var authenticationUI: AuthenticationUI = .allow
    /// The PIN the program gave with its `LAContext`, for the login (see `TokenKeyRequest.pin`).
    package var pin: SecretBytes? = nil
}

extension SecDictionary {
    /// The smart-card PIN a request carries (`u_CardPIN`, from `LAContext.setCredential(_:type:
    /// .smartCardPIN)`), copied into wiping storage; the request's own copy is wiped with its other data
    /// once answered. errSecParam for a value that is not data of 1 to 256 bytes.
    package func smartCardPIN() throws(SecError) -> SecretBytes? {
        guard let value = self[SecKeys.useSmartCardPIN] else { return nil }
        guard case .data(let bytes) = value, (1...SecKeys.maximumSmartCardPINLength).contains(bytes.count) else {
            throw .param("the smart card PIN must be data of 1 to \(SecKeys.maximumSmartCardPINLength) bytes")
        }
        return SecretBytes(copying: bytes)
    }

    /// `kSecUseAuthenticationUI` (or the older `kSecUseNoAuthenticationUI`) as a token sees it: Fail and
    /// Skip both mean the user may not be asked.
    package var tokenAuthenticationUI: AuthenticationUI {
        switch self[SecKeys.useAuthenticationUI]?.stringValue {
        case SecKeys.useAuthenticationUIFail?, SecKeys.useAuthenticationUISkip?: return .fail
        default: return self[SecKeys.useNoAuthenticationUI] == .bool(true) ? .fail : .allow
        }
    }
}

extension OpenItem {
    /// A token item as the item rules handle it: no row, no item key; `token` carries what it is.
    ///
    /// Its bytes are copies, never the snapshot's buffers: the agent wipes the data of every response in
    /// place once sent (`SecValue.wipeDataInPlace`), which would otherwise zero the snapshot itself.
    init(token shared: TokenItem) {
        var item = shared
        item.data = Self.fresh(shared.data)
        item.attributes = shared.attributes.mapValues { value in
            if case .data(let bytes) = value { return .data(Self.fresh(bytes)) }
            return value
        }
        let protection = TokenItem.protection
        self.init(
            id: -1, persistentRef: item.ref, itemClass: item.itemClass, protection: protection,
            attributes: item.attributes, itemKey: SecretBytes(count: 0),
            row: StoreRow(
                id: -1, persistentRef: item.ref, itemClass: Int(item.itemClass.rawValue),
                protection: Int(protection.rawValue), synchronizable: false, uniqueHash: [], wrappedKey: [],
                metadata: [], secret: []),
            token: item)
    }

    /// A copy of `bytes` in a buffer of its own (`Array(bytes)` would share the buffer).
    private static func fresh(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBufferPointer { [UInt8]($0) }
    }
}

/// The attributes Apple derives for a certificate or a key, for the token side to give its items the
/// same ones as stored items (one derivation for both: `KeyMaterial`).
package enum TokenAttributes {
    /// A certificate's: type, encoding, subject, issuer, serial number, `pkhh`, label, `skid`.
    package static func certificate(_ der: [UInt8]) throws(SecError) -> SecDictionary {
        try KeyMaterial.attributes(ofCertificate: der)
    }

    /// A key's: class, `klbl` (SHA-1 of the public key), type, sizes and Apple's default usage flags.
    package static func key(_ reference: KeyReference) -> SecDictionary {
        KeyMaterial.attributes(of: reference)
    }

    /// The public key of a key's external representation (checked, as SecItemAdd checks it): its bytes and size.
    package static func publicKey(_ bytes: [UInt8], keyType: Int64) throws(SecError) -> KeyReference {
        try KeyMaterial.reference(material: bytes, keyType: keyType, keyClass: KeyReference.classPublic)
    }
}
