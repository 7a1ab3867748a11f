import CP11Kit
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets

/// Key operations on a token (docs/TOKENS.md, "Operations" and "The PIN"): the mechanism for the
/// algorithm, the PIN when the token wants one (asked through the agent's prompter, outside every lock,
/// and given to the token at once; only the token's login state is kept, never the PIN), then the
/// operation, each step a bounded wait for the module's thread.
extension TokenService {
    package func perform(_ request: TokenKeyRequest) throws(SecError) -> [UInt8] {
        let operation = try TokenOperation(request)
        let ref = request.item.ref
        // A login that the token forgets between our check and the operation (another program logged
        // out, a card reset) is asked for again, once. Every job finds the token's session and the key's
        // object again when it runs: a rescan may have replaced them meanwhile (a restarted module).
        for _ in 0..<2 {
            guard let (token, key) = token(holding: ref), let loaded = module(token.module) else {
                throw SecError(SecStatus.itemNotFound, "the token of this key is not present")
            }
            var needsLogin = false
            if token.view.info.needsLogin && !key.alwaysAuthenticate {
                guard
                    let loggedIn = loaded.worker.run(
                        timeout: Self.callTimeout,
                        { [self] () -> Bool? in
                            guard let (current, _) = self.token(holding: ref) else { return nil }
                            return try? loaded.module.isLoggedIn(current.session)
                        })
                else { throw Self.noAnswer(token.view.id) }
                guard let loggedIn else {
                    throw SecError(SecStatus.itemNotFound, "the token of this key is not present")
                }
                needsLogin = !loggedIn
            }
            var pin: SecretBytes?
            if needsLogin || key.alwaysAuthenticate {
                pin = try pinForUse(request, token: token.view)
            }
            let fromProgram = pin != nil && request.pin != nil && !token.view.info.protectedAuthenticationPath
            let id = token.view.id
            if needsLogin {
                let entered = pin
                // Given up at the deadline, the login is cancelled and the PIN let go: it never logs in late.
                let rv = loaded.worker.runUnlessLate(timeout: Self.operationTimeout) { [self] () -> CK_RV in
                    guard let (current, _) = self.token(holding: ref) else { return CKR_TOKEN_NOT_PRESENT }
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
                guard let rv else { throw Self.noAnswer(token.view.id) }
                guard rv == CKR_OK || rv == CKR_USER_ALREADY_LOGGED_IN else { throw Self.loginError(rv, token.view.id) }
            }
            let contextPIN = key.alwaysAuthenticate ? pin : nil
            let result = loaded.worker.run(timeout: Self.operationTimeout) {
                [self] () -> Result<TokenOperation.Output, PKCS11Module.Failure> in
                guard let (current, known) = self.token(holding: ref) else {
                    return .failure(PKCS11Module.Failure(rv: CKR_TOKEN_NOT_PRESENT, call: "C_GetSlotList"))
                }
                let session = current.session
                // A key hidden before the login is found by its CKA_ID now.
                guard
                    let handle = known.handle != 0
                        ? known.handle : loaded.module.privateKey(session, ckaID: known.ckaID)
                else { return .failure(PKCS11Module.Failure(rv: CKR_KEY_HANDLE_INVALID, call: "C_FindObjects")) }
                let slot = current.view.slot
                let login: (() -> CK_RV)? =
                    known.alwaysAuthenticate
                    ? {
                        guard let contextPIN else { return loaded.module.loginOnPinPad(session) }
                        if fromProgram, self.programPINHeldBack(id) || Self.triesSpent(loaded.module, slot) {
                            return Self.programPINHeldBack
                        }
                        let rv = contextPIN.withUnsafeBytes {
                            loaded.module.login(session, pin: $0, contextSpecific: true)
                        }
                        self.noteLogin(id, rv, fromProgram: fromProgram)
                        return rv
                    } : nil
                return operation.run(loaded.module, session: session, key: handle, login: login)
            }
            guard let result else { throw Self.noAnswer(token.view.id) }
            switch result {
            case .success(let output):
                // The second step of a two-step algorithm (a KDF, AES-GCM) runs here, off the module's thread.
                return try operation.complete(output)
            case .failure(let failure) where failure.rv == CKR_USER_NOT_LOGGED_IN && !key.alwaysAuthenticate:
                continue
            case .failure(let failure):
                throw Self.operationError(failure, token.view.id)
            }
        }
        throw SecError(SecStatus.authFailed, "the token logged out during the operation")
    }

    /// The PIN for a login with a key: the program's own (`LAContext.setCredential(_:type: .smartCardPIN)`,
    /// which needs no prompt), else the user's, typed into the prompter; nil for a token with a PIN pad,
    /// once the user confirmed the prompt that names the program (the pad itself cannot say who asks).
    ///
    /// A token with a PIN pad never takes the program's PIN: the user confirms first, then types the PIN
    /// on the pad (a module may well send any login to its pad, and a PIN in the request would skip the
    /// confirmation that names the program).
    private func pinForUse(_ request: TokenKeyRequest, token: TokenView) throws(SecError) -> SecretBytes? {
        if let given = request.pin, !token.info.protectedAuthenticationPath { return given }
        guard request.authenticationUI == .allow else {
            throw SecError(SecStatus.interactionNotAllowed, "the token's PIN is needed (kSecUseAuthenticationUIFail)")
        }
        return try ask(
            PINRequest(
                caller: request.caller, tokenID: token.id, tokenLabel: token.info.label,
                keyLabel: request.item.attributes[SecAttr.label]?.stringValue, prompt: request.prompt,
                kind: token.info.protectedAuthenticationPath ? .pinPad : .pin),
            token: token)
    }

    /// Asks the user through the agent's prompter: the PIN for `.pin`, nil once a confirmation was given.
    func ask(_ question: PINRequest, token: TokenView) throws(SecError) -> SecretBytes? {
        guard let askPIN else {
            throw SecError(SecStatus.interactionNotAllowed, "the token's PIN is needed and nobody can be asked")
        }
        if question.kind != .confirm && token.info.pinLocked {
            throw SecError(
                SecStatus.authFailed, "the token's PIN is locked (CKR_PIN_LOCKED): unblock it with the SO PIN")
        }
        let answer = try askPIN(question)
        guard question.kind == .pin else { return nil }
        guard let answer else { throw SecError(SecStatus.interactionNotAllowed, "the prompter gave no PIN") }
        return answer
    }

    /// What a login answers, in place of trying a PIN the program gave, when the token says a wrong PIN
    /// was entered since its last good login: a program (any program that may use the token's keys)
    /// must not use up the card's tries and lock its PIN; it may spend one, then the user must log in.
    static let programPINHeldBack: CK_RV = 0x8000_0000 | 0x4C4B_0001  // CKR_VENDOR_DEFINED | "LK" 1

    /// Whether the token says a wrong PIN was entered since its last good login, read now (C_GetTokenInfo):
    /// the scan's copy may be a second old, long enough for a program to try twice. True when the
    /// token cannot say, too.
    static func triesSpent(_ module: PKCS11Module, _ slot: CK_SLOT_ID) -> Bool {
        (try? module.tokenInfo(slot).pinTriesSpent) ?? true
    }

    static func noAnswer(_ id: String) -> SecError {
        SecError(SecStatus.interactionNotAllowed, "the token \(id) did not answer in time")
    }

    static func loginError(_ rv: CK_RV, _ id: String) -> SecError {
        switch rv {
        case CKR_PIN_LOCKED:
            SecError(SecStatus.authFailed, "the token's PIN is locked (CKR_PIN_LOCKED): unblock it with the SO PIN")
        case CKR_PIN_INCORRECT, CKR_PIN_LEN_RANGE:
            SecError(SecStatus.authFailed, "wrong PIN for the token \(id) (\(PKCS11Errors.name(rv)))")
        case CKR_PIN_EXPIRED:
            SecError(SecStatus.authFailed, "the token's PIN has expired (CKR_PIN_EXPIRED)")
        case CKR_DEVICE_REMOVED, CKR_TOKEN_NOT_PRESENT, CKR_SESSION_HANDLE_INVALID, CKR_SESSION_CLOSED:
            SecError(SecStatus.itemNotFound, "the token \(id) was removed")
        case CKR_FUNCTION_CANCELED:
            SecError(SecStatus.userCanceled, "the PIN entry on the token was cancelled")
        case programPINHeldBack:
            SecError(
                SecStatus.authFailed,
                "a wrong PIN was entered for the token \(id) since its last login (CKF_USER_PIN_COUNT_LOW): "
                    + "the program's PIN is not tried until the user logs in")
        default:
            SecError(SecStatus.authFailed, "login to the token \(id) failed (\(PKCS11Errors.name(rv)))")
        }
    }

    static func operationError(_ failure: PKCS11Module.Failure, _ id: String) -> SecError {
        let detail = "\(failure.call) on the token \(id) failed (\(PKCS11Errors.name(failure.rv)))"
        switch failure.rv {
        case CKR_DEVICE_REMOVED, CKR_TOKEN_NOT_PRESENT, CKR_SESSION_HANDLE_INVALID, CKR_SESSION_CLOSED,
            CKR_OBJECT_HANDLE_INVALID, CKR_KEY_HANDLE_INVALID:
            return SecError(SecStatus.itemNotFound, detail)
        case CKR_PIN_LOCKED, CKR_PIN_INCORRECT, CKR_PIN_EXPIRED, CKR_USER_NOT_LOGGED_IN, programPINHeldBack:
            return loginError(failure.rv, id)
        case CKR_MECHANISM_INVALID, CKR_MECHANISM_PARAM_INVALID, CKR_FUNCTION_NOT_SUPPORTED:
            return SecError(SecStatus.unimplemented, detail)
        case CKR_ARGUMENTS_BAD where failure.call.hasSuffix("Init"):
            // The arguments of an init (C_SignInit, C_DecryptInit) are the mechanism's, and well formed: a
            // module that refuses them lacks that variant (SoftHSM 2.6 refuses OAEP with any hash but SHA-1
            // so, and would PSS with a hash it lacks).
            return SecError(SecStatus.unimplemented, detail)
        // One pattern: a `where` binds to the last of a list of patterns only.
        case let rv
        where failure.call == "C_DeriveKey"
            && [CKR_ARGUMENTS_BAD, CKR_TEMPLATE_INCONSISTENT, CKR_TEMPLATE_INCOMPLETE, CKR_ATTRIBUTE_VALUE_INVALID]
                .contains(rv):
            // The peer's point was checked to be on the key's curve before: a module that refuses the
            // parameters (it wants the point DER-wrapped) or the session secret's template lacks this form
            // of ECDH, as a token that lacks a mechanism.
            return SecError(SecStatus.unimplemented, detail)
        case CKR_FUNCTION_CANCELED:
            return SecError(SecStatus.userCanceled, detail)
        default:
            // Bad input, a key that may not do this (CKA_SIGN false), a failed decryption: as Apple
            // reports a failed operation.
            return SecError(SecStatus.param, detail)
        }
    }
}

/// The names of PKCS#11 return values, for messages and logs.
enum PKCS11Errors {
    static func name(_ rv: CK_RV) -> String {
        let names: [CK_RV: String] = [
            CKR_OK: "CKR_OK", CKR_GENERAL_ERROR: "CKR_GENERAL_ERROR", CKR_FUNCTION_FAILED: "CKR_FUNCTION_FAILED",
            CKR_ARGUMENTS_BAD: "CKR_ARGUMENTS_BAD", CKR_DEVICE_ERROR: "CKR_DEVICE_ERROR",
            CKR_DEVICE_REMOVED: "CKR_DEVICE_REMOVED", CKR_TOKEN_NOT_PRESENT: "CKR_TOKEN_NOT_PRESENT",
            CKR_PIN_INCORRECT: "CKR_PIN_INCORRECT", CKR_PIN_LOCKED: "CKR_PIN_LOCKED",
            CKR_PIN_LEN_RANGE: "CKR_PIN_LEN_RANGE", CKR_PIN_EXPIRED: "CKR_PIN_EXPIRED",
            CKR_USER_NOT_LOGGED_IN: "CKR_USER_NOT_LOGGED_IN", CKR_MECHANISM_INVALID: "CKR_MECHANISM_INVALID",
            CKR_MECHANISM_PARAM_INVALID: "CKR_MECHANISM_PARAM_INVALID",
            CKR_KEY_FUNCTION_NOT_PERMITTED: "CKR_KEY_FUNCTION_NOT_PERMITTED",
            CKR_KEY_TYPE_INCONSISTENT: "CKR_KEY_TYPE_INCONSISTENT", CKR_DATA_LEN_RANGE: "CKR_DATA_LEN_RANGE",
            CKR_DATA_INVALID: "CKR_DATA_INVALID", CKR_ENCRYPTED_DATA_INVALID: "CKR_ENCRYPTED_DATA_INVALID",
            CKR_ENCRYPTED_DATA_LEN_RANGE: "CKR_ENCRYPTED_DATA_LEN_RANGE",
            CKR_SESSION_HANDLE_INVALID: "CKR_SESSION_HANDLE_INVALID",
            CKR_FUNCTION_NOT_SUPPORTED: "CKR_FUNCTION_NOT_SUPPORTED",
            CKR_CRYPTOKI_NOT_INITIALIZED: "CKR_CRYPTOKI_NOT_INITIALIZED",
            CKR_TEMPLATE_INCONSISTENT: "CKR_TEMPLATE_INCONSISTENT", CKR_TEMPLATE_INCOMPLETE: "CKR_TEMPLATE_INCOMPLETE",
            CKR_ATTRIBUTE_VALUE_INVALID: "CKR_ATTRIBUTE_VALUE_INVALID",
        ]
        return names[rv] ?? "CKR 0x" + String(rv, radix: 16)
    }
}
