import CP11Kit
import LatchkeyCrypto
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets

/// `SecKeyCreateRandomKey` with `kSecAttrTokenID` (docs/TOKENS.md §4): C_GenerateKeyPair on the token, in
/// a read-write session of its own, after the login the token wants; the private key is sensitive and not
/// extractable, and the new pair is read back by a look at the token, so that what is returned is the
/// item every query will find.
extension TokenService {
    package func generate(_ request: TokenKeyGeneration) throws(SecError) -> TokenItem {
        let (mechanism, publicTemplate, privateTemplate) = try Self.templates(request)
        guard let token = token(id: request.tokenID), let loaded = module(token.module) else {
            throw SecError(SecStatus.itemNotFound, "no token \(request.tokenID) is present")
        }
        let id = request.tokenID
        let ckaID = Self.ckaID(of: privateTemplate)
        // Refused before anyone is asked, when the token shows an object with that CKA_ID already (the
        // job below checks again, on the token, with the objects a login reveals).
        if !ckaID.isEmpty, token.view.items.contains(where: { $0.attributes[SecAttr.applicationTag] == .data(ckaID) }) {
            throw SecError(SecStatus.duplicateItem, "the token \(id) has an object with this CKA_ID already")
        }
        let question = PINRequest(
            caller: request.caller, tokenID: id, tokenLabel: token.view.info.label, keyLabel: request.label,
            prompt: request.prompt, purpose: .makeKey(Self.describe(request)))
        // Making a key writes to the token for good: the user says yes to each one, through the PIN
        // prompt when the token wants a login, else through a confirmation, unless the program proved it
        // may by logging in with the PIN itself (its LAContext's). A program that may use the token's keys
        // may not fill it with keys of its own behind the user's back.
        var userAgreed = false
        if token.view.info.needsLogin {
            guard
                let loggedIn = loaded.worker.run(
                    timeout: Self.callTimeout,
                    { [self] () -> Bool? in
                        guard let current = self.token(id: id) else { return nil }
                        return try? loaded.module.isLoggedIn(current.session)
                    })
            else { throw Self.noAnswer(id) }
            guard let loggedIn else { throw SecError(SecStatus.itemNotFound, "the token \(id) was removed") }
            if !loggedIn {
                // A PIN pad never takes the program's PIN (see `pinForUse`).
                let programPIN = token.view.info.protectedAuthenticationPath ? nil : request.pin
                var pin = programPIN
                if pin == nil {
                    guard request.authenticationUI == .allow else {
                        throw SecError(
                            SecStatus.interactionNotAllowed, "the token's PIN is needed (kSecUseAuthenticationUIFail)")
                    }
                    var asked = question
                    asked.kind = token.view.info.protectedAuthenticationPath ? .pinPad : .pin
                    pin = try ask(asked, token: token.view)
                }
                let entered = pin
                let fromProgram = programPIN != nil
                // Given up at the deadline, the login is cancelled and the PIN let go: it never logs in late.
                let rv = loaded.worker.runUnlessLate(timeout: Self.operationTimeout) { [self] () -> CK_RV in
                    guard let current = self.token(id: id) else { return CKR_TOKEN_NOT_PRESENT }
                    guard let entered else { return loaded.module.loginOnPinPad(current.session) }
                    if fromProgram, self.programPINHeldBack(id) || Self.triesSpent(loaded.module, current.view.slot) {
                        return Self.programPINHeldBack
                    }
                    let rv = entered.withUnsafeBytes {
                        loaded.module.login(current.session, pin: $0, contextSpecific: false)
                    }
                    self.noteLogin(id, rv, fromProgram: fromProgram)
                    return rv
                }
                guard let rv else { throw Self.noAnswer(id) }
                // Already logged in (another request got there first): the PIN proved nothing, so ask.
                guard rv == CKR_OK || rv == CKR_USER_ALREADY_LOGGED_IN else { throw Self.loginError(rv, id) }
                userAgreed = rv == CKR_OK
            }
        }
        if !userAgreed {
            guard request.authenticationUI == .allow else {
                throw SecError(
                    SecStatus.interactionNotAllowed,
                    "making a key on the token needs the user's consent (kSecUseAuthenticationUIFail)")
            }
            var asked = question
            asked.kind = .confirm
            _ = try ask(asked, token: token.view)
        }
        let index = token.module
        let made = loaded.worker.run(timeout: Self.operationTimeout) {
            [self] () -> Generated in
            guard let current = self.token(id: id) else {
                return .failed(PKCS11Module.Failure(rv: CKR_TOKEN_NOT_PRESENT, call: "C_GetSlotList"))
            }
            let module = loaded.module
            let session: CK_SESSION_HANDLE
            do throws(PKCS11Module.Failure) {
                session = try module.openReadWriteSession(current.view.slot)
            } catch {
                return .failed(error)
            }
            defer { module.closeSession(session) }
            // A second key with the CKA_ID of the user's would stand beside it as the same identity's half
            // (the public key, a certificate's private key): refused, as a stored key's tag is not.
            do throws(PKCS11Module.Failure) {
                if try module.hasObject(session, ckaID: ckaID) { return .duplicate }
            } catch {
                return .failed(error)
            }
            let handles: (publicKey: CK_OBJECT_HANDLE, privateKey: CK_OBJECT_HANDLE)
            do throws(PKCS11Module.Failure) {
                handles = try module.generateKeyPair(
                    session, mechanism: mechanism, publicTemplate: publicTemplate, privateTemplate: privateTemplate)
            } catch {
                return .failed(error)
            }
            guard let publicKey = TokenScan.publicKey(module, session, handles.publicKey) else {
                return .failed(PKCS11Module.Failure(rv: CKR_GENERAL_ERROR, call: "C_GetAttributeValue (new key)"))
            }
            // Read the token again now, so the new pair is in the view before this returns.
            rescan(index, module)
            return .made(publicKey.publicKey)
        }
        guard let made else { throw Self.noAnswer(id) }
        switch made {
        case .duplicate:
            throw SecError(SecStatus.duplicateItem, "the token \(id) already has an object with this application tag")
        case .failed(let failure):
            throw Self.operationError(failure, id)
        case .made(let publicKey):
            guard
                let item = self.token(id: id)?.view.items.first(where: {
                    $0.itemClass == .key && $0.keyClass == KeyReference.classPrivate && $0.data == publicKey
                })
            else {
                throw SecError(SecStatus.internalComponent, "the new key is not among the token's items")
            }
            return item
        }
    }

    /// What the generation job found: the new public key, a failure, or the CKA_ID already in use.
    enum Generated: Sendable {
        case made([UInt8])
        case failed(PKCS11Module.Failure)
        case duplicate
    }

    /// The kind of key, for the prompt: "EC P-256", "RSA 2048-bit".
    static func describe(_ request: TokenKeyGeneration) -> String {
        request.keyType == KeyReference.typeEC ? "EC P-\(request.sizeInBits)" : "RSA \(request.sizeInBits)-bit"
    }

    /// The CKA_ID a template sets (`templates` always sets one).
    static func ckaID(of template: [(CK_ATTRIBUTE_TYPE, [UInt8])]) -> [UInt8] {
        template.first { $0.0 == CK_ATTRIBUTE_TYPE(CKA_ID) }?.1 ?? []
    }

    /// The mechanism and the public and private templates for a request.
    static func templates(_ request: TokenKeyGeneration) throws(SecError) -> (
        CK_MECHANISM_TYPE, [(CK_ATTRIBUTE_TYPE, [UInt8])], [(CK_ATTRIBUTE_TYPE, [UInt8])]
    ) {
        let yes: [UInt8] = [1]
        let no: [UInt8] = [0]
        // CKA_ID links the halves (and a certificate added later); random unless the caller gave a tag.
        var ckaID = request.tag ?? []
        if ckaID.isEmpty {
            do {
                ckaID = try SecureRandom.bytes(16)
            } catch {
                throw SecError(SecStatus.internalComponent, "no random bytes for the key's CKA_ID")
            }
        }
        var common: [(CK_ATTRIBUTE_TYPE, [UInt8])] = [
            (CK_ATTRIBUTE_TYPE(CKA_TOKEN), yes), (CK_ATTRIBUTE_TYPE(CKA_ID), ckaID),
        ]
        if let label = request.label { common.append((CK_ATTRIBUTE_TYPE(CKA_LABEL), Array(label.utf8))) }
        var publicTemplate = common + [(CK_ATTRIBUTE_TYPE(CKA_VERIFY), yes)]
        var privateTemplate =
            common + [
                (CK_ATTRIBUTE_TYPE(CKA_PRIVATE), yes), (CK_ATTRIBUTE_TYPE(CKA_SENSITIVE), yes),
                (CK_ATTRIBUTE_TYPE(CKA_EXTRACTABLE), no), (CK_ATTRIBUTE_TYPE(CKA_SIGN), yes),
            ]
        switch request.keyType {
        case KeyReference.typeEC:
            let curve: [UInt8]
            switch request.sizeInBits {
            case 256: curve = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
            case 384: curve = [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x22]
            case 521: curve = [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x23]
            default: throw SecError(SecStatus.param, "EC keys on a token are 256, 384 or 521 bits")
            }
            publicTemplate.append((CK_ATTRIBUTE_TYPE(CKA_EC_PARAMS), curve))
            privateTemplate.append((CK_ATTRIBUTE_TYPE(CKA_DERIVE), yes))
            return (CK_MECHANISM_TYPE(CKM_EC_KEY_PAIR_GEN), publicTemplate, privateTemplate)
        case KeyReference.typeRSA:
            // Capped at 4096: a larger key takes a token minutes to make, with its module's thread held.
            guard (1024...4096).contains(request.sizeInBits), request.sizeInBits % 8 == 0 else {
                throw SecError(SecStatus.param, "RSA keys on a token are 1024 to 4096 bits")
            }
            let bits = CK_ULONG(request.sizeInBits)
            publicTemplate += [
                (CK_ATTRIBUTE_TYPE(CKA_MODULUS_BITS), withUnsafeBytes(of: bits) { Array($0) }),
                (CK_ATTRIBUTE_TYPE(CKA_PUBLIC_EXPONENT), [0x01, 0x00, 0x01]), (CK_ATTRIBUTE_TYPE(CKA_ENCRYPT), yes),
            ]
            privateTemplate.append((CK_ATTRIBUTE_TYPE(CKA_DECRYPT), yes))
            return (CK_MECHANISM_TYPE(CKM_RSA_PKCS_KEY_PAIR_GEN), publicTemplate, privateTemplate)
        default:
            throw SecError(SecStatus.unimplemented, "key type \(request.keyType) cannot be made on a token")
        }
    }
}
