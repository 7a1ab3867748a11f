import CP11Kit
import LatchkeyModel
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
}
