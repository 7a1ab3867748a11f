import LatchkeyModel

// Apple's OSStatus result codes (SecBase.h), with Apple's numeric values.

/// No error (MacTypes' `noErr`).
public let noErr: OSStatus = 0
/// Apple's `errSecSuccess`.
public let errSecSuccess: OSStatus = SecStatus.success
/// Apple's `errSecUnimplemented`.
public let errSecUnimplemented: OSStatus = SecStatus.unimplemented
/// Apple's `errSecIO`.
public let errSecIO: OSStatus = SecStatus.io
/// Apple's `errSecParam`.
public let errSecParam: OSStatus = SecStatus.param
/// Apple's `errSecAllocate`.
public let errSecAllocate: OSStatus = SecStatus.allocate
/// Apple's `errSecUserCanceled`.
public let errSecUserCanceled: OSStatus = SecStatus.userCanceled
/// Apple's `errSecBadReq`.
public let errSecBadReq: OSStatus = SecStatus.badReq
/// Apple's `errSecInternalComponent`.
public let errSecInternalComponent: OSStatus = SecStatus.internalComponent
/// Apple's `errSecNotAvailable`. Also what every call returns when the agent can neither be reached
/// nor started, at once rather than hanging.
public let errSecNotAvailable: OSStatus = SecStatus.notAvailable
/// Apple's `errSecReadOnly`.
public let errSecReadOnly: OSStatus = SecStatus.readOnly
/// Apple's `errSecAuthFailed`: a wrong keychain password or PKCS#12 passphrase.
public let errSecAuthFailed: OSStatus = SecStatus.authFailed
/// Apple's `errSecNoSuchKeychain`.
public let errSecNoSuchKeychain: OSStatus = SecStatus.noSuchKeychain
/// Apple's `errSecInvalidKeychain`: the keybag or the store is damaged or of an unknown format.
public let errSecInvalidKeychain: OSStatus = SecStatus.invalidKeychain
/// Apple's `errSecDuplicateKeychain`.
public let errSecDuplicateKeychain: OSStatus = SecStatus.duplicateKeychain
/// Apple's `errSecDuplicateItem`.
public let errSecDuplicateItem: OSStatus = SecStatus.duplicateItem
/// Apple's `errSecItemNotFound`.
public let errSecItemNotFound: OSStatus = SecStatus.itemNotFound
/// Apple's `errSecBufferTooSmall`.
public let errSecBufferTooSmall: OSStatus = SecStatus.bufferTooSmall
/// Apple's `errSecDataTooLarge`.
public let errSecDataTooLarge: OSStatus = SecStatus.dataTooLarge
/// Apple's `errSecNoSuchAttr`.
public let errSecNoSuchAttr: OSStatus = SecStatus.noSuchAttr
/// Apple's `errSecInvalidItemRef`.
public let errSecInvalidItemRef: OSStatus = SecStatus.invalidItemRef
/// Apple's `errSecNoSuchClass`.
public let errSecNoSuchClass: OSStatus = SecStatus.noSuchClass
/// Apple's `errSecNoDefaultKeychain`: no keychain has been created yet (`latchkey init`).
public let errSecNoDefaultKeychain: OSStatus = SecStatus.noDefaultKeychain
/// Apple's `errSecInteractionNotAllowed`: the item's accessibility class is locked.
public let errSecInteractionNotAllowed: OSStatus = SecStatus.interactionNotAllowed
/// Apple's `errSecInteractionRequired`.
public let errSecInteractionRequired: OSStatus = SecStatus.interactionRequired
/// Apple's `errSecDataNotAvailable`: the bytes of a key that is not extractable were asked for.
public let errSecDataNotAvailable: OSStatus = SecStatus.dataNotAvailable
/// Apple's `errSecDecode`. Also a stored item that fails authentication (damage, tampering):
/// securityd skips such an item, latchkey reports it.
public let errSecDecode: OSStatus = SecStatus.decode
/// Apple's `errSecInternalError` (-26276): an internal error of the Security framework. latchkey never
/// returns it; Apple's sample code throws it for a result it cannot read (seed 001).
public let errSecInternalError: OSStatus = -26_276
/// Apple's `errSecMissingEntitlement`: an access group the caller may not use (docs/APPLICATIONS.md).
public let errSecMissingEntitlement: OSStatus = SecStatus.missingEntitlement
/// Apple's `errSecNotTrusted`.
public let errSecNotTrusted: OSStatus = SecStatus.notTrusted
/// Apple's `errSecVerifyFailed`.
public let errSecVerifyFailed: OSStatus = SecStatus.verifyFailed
