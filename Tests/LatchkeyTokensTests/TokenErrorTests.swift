import CP11Kit
import LatchkeyModel
import Logging
import XCTest

@testable import LatchkeyTokens

/// What the caller learns from a token's answer: a wrong PIN, a locked PIN and a removed token are told
/// apart (SoftHSM2 never locks a PIN, so the locked case is checked here, on the mapping itself).
final class TokenErrorTests: XCTestCase {
    func testWrongAndLockedPINAreBothAuthFailedWithDescriptionsThatSaySo() {
        let wrong = TokenService.loginError(CKR_PIN_INCORRECT, "softhsm2:1")
        let locked = TokenService.loginError(CKR_PIN_LOCKED, "softhsm2:1")
        XCTAssertEqual(wrong.status, SecStatus.authFailed)
        XCTAssertEqual(locked.status, SecStatus.authFailed)
        XCTAssertTrue(wrong.detail?.contains("wrong PIN") == true, wrong.detail ?? "")
        XCTAssertTrue(locked.detail?.contains("CKR_PIN_LOCKED") == true, locked.detail ?? "")
        XCTAssertFalse(wrong.detail?.contains("locked") == true)
    }

    func testARemovedTokenIsItemNotFoundAndAMissingMechanismUnimplemented() {
        let removed = TokenService.operationError(
            PKCS11Module.Failure(rv: CKR_DEVICE_REMOVED, call: "C_Sign"), "softhsm2:1")
        XCTAssertEqual(removed.status, SecStatus.itemNotFound)
        let mechanism = TokenService.operationError(
            PKCS11Module.Failure(rv: CKR_MECHANISM_INVALID, call: "C_SignInit"), "softhsm2:1")
        XCTAssertEqual(mechanism.status, SecStatus.unimplemented)
        let notPermitted = TokenService.operationError(
            PKCS11Module.Failure(rv: CKR_KEY_FUNCTION_NOT_PERMITTED, call: "C_SignInit"), "softhsm2:1")
        XCTAssertEqual(notPermitted.status, SecStatus.param)
        XCTAssertTrue(notPermitted.detail?.contains("CKR_KEY_FUNCTION_NOT_PERMITTED") == true)
    }

    /// A program's wrong PIN holds back programs' PINs on that token until a good login, whatever flags
    /// the module reports (many set CKF_USER_PIN_COUNT_LOW only when they know the count, or never); the
    /// user's own wrong PIN does not.
    func testAProgramsWrongPINHoldsBackProgramsPINsUntilAGoodLogin() {
        let tokens = TokenService(
            configuration: TokenConfiguration(systemModules: false), askPIN: nil, log: Logger(label: "test"))
        XCTAssertFalse(tokens.programPINHeldBack("softhsm2:1"))
        tokens.noteLogin("softhsm2:1", CKR_PIN_INCORRECT, fromProgram: false)
        XCTAssertFalse(tokens.programPINHeldBack("softhsm2:1"), "the user's typo")
        tokens.noteLogin("softhsm2:1", CKR_PIN_INCORRECT, fromProgram: true)
        XCTAssertTrue(tokens.programPINHeldBack("softhsm2:1"))
        XCTAssertFalse(tokens.programPINHeldBack("softhsm2:2"), "another token")
        tokens.noteLogin("softhsm2:1", CKR_OK, fromProgram: false)
        XCTAssertFalse(tokens.programPINHeldBack("softhsm2:1"))
        let held = TokenService.loginError(TokenService.programPINHeldBack, "softhsm2:1")
        XCTAssertEqual(held.status, SecStatus.authFailed)
        XCTAssertTrue(held.detail?.contains("not tried") == true, held.detail ?? "")
    }

    /// A module that refuses the form of ECDH the agent asks for (the parameters, or the session secret's
    /// template) lacks it: errSecUnimplemented, as a missing mechanism; the same answers elsewhere stay
    /// errSecParam.
    func testADeriveTheModuleCannotMakeIsUnimplemented() {
        for rv in [CKR_ARGUMENTS_BAD, CKR_TEMPLATE_INCONSISTENT, CKR_TEMPLATE_INCOMPLETE, CKR_ATTRIBUTE_VALUE_INVALID] {
            let derive = TokenService.operationError(PKCS11Module.Failure(rv: rv, call: "C_DeriveKey"), "opensc:1")
            XCTAssertEqual(derive.status, SecStatus.unimplemented, PKCS11Errors.name(rv))
            XCTAssertTrue(derive.detail?.contains(PKCS11Errors.name(rv)) == true, derive.detail ?? "")
            let sign = TokenService.operationError(PKCS11Module.Failure(rv: rv, call: "C_Sign"), "opensc:1")
            XCTAssertEqual(sign.status, SecStatus.param, PKCS11Errors.name(rv))
        }
    }
}
