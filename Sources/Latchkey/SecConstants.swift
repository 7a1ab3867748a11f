import Foundation
import LatchkeyModel

// Apple's kSec* keys and values with Apple's string values (SecItemConstants.c), so that code written
// for `import Security` compiles against `import Latchkey`. Generated from the Model's vocabulary
// (SecKeys, SecAttr) where the engine parses them, so the two cannot drift apart. They are immutable
// NSStrings, hence `nonisolated(unsafe)`: Swift 6 cannot prove an NSString Sendable.

/// Apple's `kSecClass`.
nonisolated(unsafe) public let kSecClass: CFString = SecKeys.itemClass as NSString
/// Apple's `kSecClassGenericPassword`.
nonisolated(unsafe) public let kSecClassGenericPassword: CFString = SecKeys.classGenericPassword as NSString
/// Apple's `kSecClassInternetPassword`.
nonisolated(unsafe) public let kSecClassInternetPassword: CFString = SecKeys.classInternetPassword as NSString
/// Apple's `kSecClassCertificate`.
nonisolated(unsafe) public let kSecClassCertificate: CFString = SecKeys.classCertificate as NSString
/// Apple's `kSecClassKey`.
nonisolated(unsafe) public let kSecClassKey: CFString = SecKeys.classKey as NSString
/// Apple's `kSecClassIdentity`.
nonisolated(unsafe) public let kSecClassIdentity: CFString = SecKeys.classIdentity as NSString
/// Apple's `kSecMatchLimit`.
nonisolated(unsafe) public let kSecMatchLimit: CFString = SecKeys.matchLimit as NSString
/// Apple's `kSecMatchLimitOne`.
nonisolated(unsafe) public let kSecMatchLimitOne: CFString = SecKeys.matchLimitOne as NSString
/// Apple's `kSecMatchLimitAll`.
nonisolated(unsafe) public let kSecMatchLimitAll: CFString = SecKeys.matchLimitAll as NSString
/// Apple's `kSecMatchCaseInsensitive`. Accepted and ignored, as securityd does: matching is exact.
nonisolated(unsafe) public let kSecMatchCaseInsensitive: CFString = SecKeys.matchCaseInsensitive as NSString
/// Apple's `kSecMatchItemList`. Accepted and ignored, as securityd does.
nonisolated(unsafe) public let kSecMatchItemList: CFString = SecKeys.matchItemList as NSString
/// Apple's `kSecMatchPolicy`. Not implemented: a SecItemCopyMatching query with it
/// gives errSecUnimplemented.
nonisolated(unsafe) public let kSecMatchPolicy: CFString = SecKeys.matchPolicy as NSString
/// Apple's `kSecMatchIssuers`. Not implemented: a SecItemCopyMatching query with it
/// gives errSecUnimplemented.
nonisolated(unsafe) public let kSecMatchIssuers: CFString = SecKeys.matchIssuers as NSString
/// Apple's `kSecMatchEmailAddressIfPresent` (a string): certificates and identities one of whose email
/// addresses (subject or subjectAltName) is this one, whatever the case; ignored for other classes, as in
/// securityd. A certificate without an address does not match.
nonisolated(unsafe) public let kSecMatchEmailAddressIfPresent: CFString = SecKeys.matchEmailAddressIfPresent as NSString
/// Apple's `kSecMatchSubjectContains`. Not implemented: a SecItemCopyMatching query with it
/// gives errSecUnimplemented.
nonisolated(unsafe) public let kSecMatchSubjectContains: CFString = SecKeys.matchSubjectContains as NSString
/// Apple's `kSecMatchSubjectStartsWith`. Not implemented: a SecItemCopyMatching query with it
/// gives errSecUnimplemented.
nonisolated(unsafe) public let kSecMatchSubjectStartsWith: CFString = SecKeys.matchSubjectStartsWith as NSString
/// Apple's `kSecMatchSubjectEndsWith`. Not implemented: a SecItemCopyMatching query with it
/// gives errSecUnimplemented.
nonisolated(unsafe) public let kSecMatchSubjectEndsWith: CFString = SecKeys.matchSubjectEndsWith as NSString
/// Apple's `kSecMatchSubjectWholeString`. Not implemented: a SecItemCopyMatching query with it
/// gives errSecUnimplemented.
nonisolated(unsafe) public let kSecMatchSubjectWholeString: CFString = SecKeys.matchSubjectWholeString as NSString
/// Apple's `kSecMatchTrustedOnly`. Not implemented: a SecItemCopyMatching query with it
/// gives errSecUnimplemented.
nonisolated(unsafe) public let kSecMatchTrustedOnly: CFString = SecKeys.matchTrustedOnly as NSString
/// Apple's `kSecMatchValidOnDate`. Not implemented: a SecItemCopyMatching query with it
/// gives errSecUnimplemented.
nonisolated(unsafe) public let kSecMatchValidOnDate: CFString = SecKeys.matchValidOnDate as NSString
/// Apple's `kSecMatchHostOrSubdomainOfHost` (a string): internet passwords whose `kSecAttrServer` is this
/// host or ends with "." and it, compared exactly (no case folding). errSecUnimplemented for another class,
/// as securityd's errSecUnsupportedOperation.
nonisolated(unsafe) public let kSecMatchHostOrSubdomainOfHost: CFString = SecKeys.matchHostOrSubdomainOfHost as NSString
/// Apple's `kSecReturnData`.
nonisolated(unsafe) public let kSecReturnData: CFString = SecKeys.returnData as NSString
/// Apple's `kSecReturnAttributes`.
nonisolated(unsafe) public let kSecReturnAttributes: CFString = SecKeys.returnAttributes as NSString
/// Apple's `kSecReturnRef`.
nonisolated(unsafe) public let kSecReturnRef: CFString = SecKeys.returnRef as NSString
/// Apple's `kSecReturnPersistentRef`.
nonisolated(unsafe) public let kSecReturnPersistentRef: CFString = SecKeys.returnPersistentRef as NSString
/// Apple's `kSecValueData`.
nonisolated(unsafe) public let kSecValueData: CFString = SecKeys.valueData as NSString
/// Apple's `kSecValueRef`. In a query it matches what the object implies (a certificate's
/// issuer, serial and type; a key's label, class and type), not the item it was read from.
nonisolated(unsafe) public let kSecValueRef: CFString = SecKeys.valueRef as NSString
/// Apple's `kSecValuePersistentRef`.
nonisolated(unsafe) public let kSecValuePersistentRef: CFString = SecKeys.valuePersistentRef as NSString
/// Apple's `kSecUseItemList`. Not supported: errSecParam.
nonisolated(unsafe) public let kSecUseItemList: CFString = SecKeys.useItemList as NSString
/// Apple's `kSecUseAuthenticationUI`.
nonisolated(unsafe) public let kSecUseAuthenticationUI: CFString = SecKeys.useAuthenticationUI as NSString
/// Apple's `kSecUseAuthenticationUIAllow`.
nonisolated(unsafe) public let kSecUseAuthenticationUIAllow: CFString = SecKeys.useAuthenticationUIAllow as NSString
/// Apple's `kSecUseAuthenticationUIFail`.
nonisolated(unsafe) public let kSecUseAuthenticationUIFail: CFString = SecKeys.useAuthenticationUIFail as NSString
/// Apple's `kSecUseAuthenticationUISkip`. Accepted by SecItemCopyMatching only (errSecParam
/// elsewhere): items whose secret needs a user check are left out of the results.
nonisolated(unsafe) public let kSecUseAuthenticationUISkip: CFString = SecKeys.useAuthenticationUISkip as NSString
/// Apple's `kSecUseOperationPrompt`: the reason the user check's prompt shows, under the name of the
/// program that asks.
nonisolated(unsafe) public let kSecUseOperationPrompt: CFString = SecKeys.useOperationPrompt as NSString
/// Apple's `kSecUseNoAuthenticationUI`. True behaves as ``kSecUseAuthenticationUIFail``.
nonisolated(unsafe) public let kSecUseNoAuthenticationUI: CFString = SecKeys.useNoAuthenticationUI as NSString
/// Apple's `kSecUseAuthenticationContext`: an ``LAContext`` whose evaluation serves the call's user checks
/// (docs/ACCESS-CONTROL.md §7). Any other value is errSecParam; an invalidated context errSecAuthFailed.
nonisolated(unsafe) public let kSecUseAuthenticationContext: CFString = SecKeys.useAuthenticationContext as NSString
/// Apple's `kSecUseDataProtectionKeychain`. Accepted and ignored: latchkey is a data-protection
/// keychain, with no file keychain beside it.
nonisolated(unsafe) public let kSecUseDataProtectionKeychain: CFString = SecKeys.useDataProtectionKeychain as NSString
/// Apple's `kSecAttrAccessible`.
nonisolated(unsafe) public let kSecAttrAccessible: CFString = SecAttr.accessible as NSString
/// Apple's `kSecAttrAccessControl`: a ``SecAccessControl``. Its protection class is the item's
/// accessibility (a different ``kSecAttrAccessible`` is errSecParam, as is a synchronizable item); reading
/// the item's secret, changing the item or using its key then needs a user check through PAM
/// (docs/ACCESS-CONTROL.md). Any other value is errSecParam. Not a filter in a query.
nonisolated(unsafe) public let kSecAttrAccessControl: CFString = SecAttr.accessControl as NSString
/// Apple's `kSecAttrAccessGroup`. Stored and part of uniqueness; items added without one go to the
/// calling application's first group (`default` for a program without an application file). A group
/// outside the caller's is errSecMissingEntitlement (docs/APPLICATIONS.md).
nonisolated(unsafe) public let kSecAttrAccessGroup: CFString = SecAttr.accessGroup as NSString
/// Apple's `kSecAttrAccessGroupToken` (`com.apple.token`): the group of items that tokens provide. Every
/// caller may query it; adding, changing or deleting in it is errSecMissingEntitlement.
nonisolated(unsafe) public let kSecAttrAccessGroupToken: CFString = "com.apple.token" as NSString
/// Apple's `kSecAttrSynchronizable`. Stored and matched as on Apple systems (false by default);
/// nothing is synchronised, since there is no iCloud Keychain.
nonisolated(unsafe) public let kSecAttrSynchronizable: CFString = SecAttr.synchronizable as NSString
/// Apple's `kSecAttrSynchronizableAny`.
nonisolated(unsafe) public let kSecAttrSynchronizableAny: CFString = SecKeys.synchronizableAny as NSString
/// Apple's `kSecAttrCreationDate`.
nonisolated(unsafe) public let kSecAttrCreationDate: CFString = SecAttr.creationDate as NSString
/// Apple's `kSecAttrModificationDate`.
nonisolated(unsafe) public let kSecAttrModificationDate: CFString = SecAttr.modificationDate as NSString
/// Apple's `kSecAttrDescription`.
nonisolated(unsafe) public let kSecAttrDescription: CFString = SecAttr.description as NSString
/// Apple's `kSecAttrComment`.
nonisolated(unsafe) public let kSecAttrComment: CFString = SecAttr.comment as NSString
/// Apple's `kSecAttrCreator`.
nonisolated(unsafe) public let kSecAttrCreator: CFString = SecAttr.creator as NSString
/// Apple's `kSecAttrType`.
nonisolated(unsafe) public let kSecAttrType: CFString = SecAttr.type as NSString
/// Apple's `kSecAttrLabel`.
nonisolated(unsafe) public let kSecAttrLabel: CFString = SecAttr.label as NSString
/// Apple's `kSecAttrIsInvisible`.
nonisolated(unsafe) public let kSecAttrIsInvisible: CFString = SecAttr.isInvisible as NSString
/// Apple's `kSecAttrIsNegative`.
nonisolated(unsafe) public let kSecAttrIsNegative: CFString = SecAttr.isNegative as NSString
/// Apple's `kSecAttrAccount`.
nonisolated(unsafe) public let kSecAttrAccount: CFString = SecAttr.account as NSString
/// Apple's `kSecAttrService`.
nonisolated(unsafe) public let kSecAttrService: CFString = SecAttr.service as NSString
/// Apple's `kSecAttrGeneric`.
nonisolated(unsafe) public let kSecAttrGeneric: CFString = SecAttr.generic as NSString
/// Apple's `kSecAttrSecurityDomain`.
nonisolated(unsafe) public let kSecAttrSecurityDomain: CFString = SecAttr.securityDomain as NSString
/// Apple's `kSecAttrServer`.
nonisolated(unsafe) public let kSecAttrServer: CFString = SecAttr.server as NSString
/// Apple's `kSecAttrProtocol`.
nonisolated(unsafe) public let kSecAttrProtocol: CFString = SecAttr.protocol as NSString
/// Apple's `kSecAttrAuthenticationType`.
nonisolated(unsafe) public let kSecAttrAuthenticationType: CFString = SecAttr.authenticationType as NSString
/// Apple's `kSecAttrPort`.
nonisolated(unsafe) public let kSecAttrPort: CFString = SecAttr.port as NSString
/// Apple's `kSecAttrPath`.
nonisolated(unsafe) public let kSecAttrPath: CFString = SecAttr.path as NSString
/// Apple's `kSecAttrTokenID`: the id of the token (smart card, HSM) a token item comes from
/// (docs/TOKENS.md); `SecKeyCreateRandomKey` with a present token's id makes the key on that token. A
/// stored item cannot carry it (errSecParam).
nonisolated(unsafe) public let kSecAttrTokenID: CFString = SecAttr.tokenID as NSString
/// Apple's `kSecAttrAlias`.
nonisolated(unsafe) public let kSecAttrAlias: CFString = SecAttr.alias as NSString
/// Apple's `kSecAttrCertificateType`.
nonisolated(unsafe) public let kSecAttrCertificateType: CFString = SecAttr.certificateType as NSString
/// Apple's `kSecAttrCertificateEncoding`.
nonisolated(unsafe) public let kSecAttrCertificateEncoding: CFString = SecAttr.certificateEncoding as NSString
/// Apple's `kSecAttrSubject`.
nonisolated(unsafe) public let kSecAttrSubject: CFString = SecAttr.subject as NSString
/// Apple's `kSecAttrIssuer`.
nonisolated(unsafe) public let kSecAttrIssuer: CFString = SecAttr.issuer as NSString
/// Apple's `kSecAttrSerialNumber`.
nonisolated(unsafe) public let kSecAttrSerialNumber: CFString = SecAttr.serialNumber as NSString
/// Apple's `kSecAttrSubjectKeyID`.
nonisolated(unsafe) public let kSecAttrSubjectKeyID: CFString = SecAttr.subjectKeyID as NSString
/// Apple's `kSecAttrPublicKeyHash`.
nonisolated(unsafe) public let kSecAttrPublicKeyHash: CFString = SecAttr.publicKeyHash as NSString
/// Apple's `kSecAttrKeyClass`.
nonisolated(unsafe) public let kSecAttrKeyClass: CFString = SecAttr.keyClass as NSString
/// Apple's `kSecAttrApplicationLabel`.
nonisolated(unsafe) public let kSecAttrApplicationLabel: CFString = SecAttr.applicationLabel as NSString
/// Apple's `kSecAttrApplicationTag`.
nonisolated(unsafe) public let kSecAttrApplicationTag: CFString = SecAttr.applicationTag as NSString
/// Apple's `kSecAttrKeyType`.
nonisolated(unsafe) public let kSecAttrKeyType: CFString = SecAttr.keyType as NSString
/// Apple's `kSecAttrKeySizeInBits`.
nonisolated(unsafe) public let kSecAttrKeySizeInBits: CFString = SecAttr.keySizeInBits as NSString
/// Apple's `kSecAttrEffectiveKeySize`.
nonisolated(unsafe) public let kSecAttrEffectiveKeySize: CFString = SecAttr.effectiveKeySize as NSString
/// Apple's `kSecAttrStartDate`.
nonisolated(unsafe) public let kSecAttrStartDate: CFString = SecAttr.startDate as NSString
/// Apple's `kSecAttrEndDate`.
nonisolated(unsafe) public let kSecAttrEndDate: CFString = SecAttr.endDate as NSString
/// Apple's `kSecAttrAccessibleWhenUnlocked` ("ak"). The default. Locks with `latchkey lock`, the screen lock
/// (after a grace period) and sleep.
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
/// Apple's `kSecAttrAccessibleAfterFirstUnlock` ("ck"). Available from login or `latchkey unlock` until the last
/// session closes or `latchkey lock --all`.
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
/// Apple's `kSecAttrAccessibleAlways` ("dk"). Never locked: protected by file permissions only, as Apple's
/// class D.
nonisolated(unsafe) public let kSecAttrAccessibleAlways: CFString = "dk"
/// Apple's `kSecAttrAccessibleWhenUnlockedThisDeviceOnly` ("aku"). Locks as WhenUnlocked; bound to this
/// machine once the keybag is bound (at the first login through pam_latchkey).
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
/// Apple's `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly` ("cku"). Locks as AfterFirstUnlock; bound to
/// this machine once the keybag is bound.
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
/// Apple's `kSecAttrAccessibleAlwaysThisDeviceOnly` ("dku"). Not locked by `latchkey lock`; once the keybag
/// is bound it opens only on this machine, after a login through pam_latchkey.
nonisolated(unsafe) public let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = "dku"
/// Apple's `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly` ("akpu"). Locks as WhenUnlocked and is bound
/// to the machine like `aku`; a latchkey keychain always has a password, so the passcode condition
/// always holds.
nonisolated(unsafe) public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"
/// Apple's `kSecAttrCanEncrypt` ("encr").
nonisolated(unsafe) public let kSecAttrCanEncrypt: CFString = "encr"
/// Apple's `kSecAttrCanDecrypt` ("decr").
nonisolated(unsafe) public let kSecAttrCanDecrypt: CFString = "decr"
/// Apple's `kSecAttrCanDerive` ("drve").
nonisolated(unsafe) public let kSecAttrCanDerive: CFString = "drve"
/// Apple's `kSecAttrCanSign` ("sign").
nonisolated(unsafe) public let kSecAttrCanSign: CFString = "sign"
/// Apple's `kSecAttrCanVerify` ("vrfy").
nonisolated(unsafe) public let kSecAttrCanVerify: CFString = "vrfy"
/// Apple's `kSecAttrCanWrap` ("wrap").
nonisolated(unsafe) public let kSecAttrCanWrap: CFString = "wrap"
/// Apple's `kSecAttrCanUnwrap` ("unwp").
nonisolated(unsafe) public let kSecAttrCanUnwrap: CFString = "unwp"
/// Apple's `kSecAttrIsPermanent` ("perm").
nonisolated(unsafe) public let kSecAttrIsPermanent: CFString = "perm"
/// Apple's `kSecAttrIsExtractable` ("extr"). False keeps a private key in the agent for good: its bytes
/// cannot be exported (errSecDataNotAvailable) and the attribute cannot be set back to true.
nonisolated(unsafe) public let kSecAttrIsExtractable: CFString = "extr"
/// Apple's `kSecAttrIsSensitive` ("sens").
nonisolated(unsafe) public let kSecAttrIsSensitive: CFString = "sens"
/// Apple's `kSecAttrProtocolFTP` ("ftp ").
nonisolated(unsafe) public let kSecAttrProtocolFTP: CFString = "ftp "
/// Apple's `kSecAttrProtocolHTTP` ("http").
nonisolated(unsafe) public let kSecAttrProtocolHTTP: CFString = "http"
/// Apple's `kSecAttrProtocolHTTPS` ("htps").
nonisolated(unsafe) public let kSecAttrProtocolHTTPS: CFString = "htps"
/// Apple's `kSecAttrProtocolSSH` ("ssh ").
nonisolated(unsafe) public let kSecAttrProtocolSSH: CFString = "ssh "
/// Apple's `kSecAttrProtocolIMAP` ("imap").
nonisolated(unsafe) public let kSecAttrProtocolIMAP: CFString = "imap"
/// Apple's `kSecAttrProtocolIMAPS` ("imps").
nonisolated(unsafe) public let kSecAttrProtocolIMAPS: CFString = "imps"
/// Apple's `kSecAttrProtocolSMTP` ("smtp").
nonisolated(unsafe) public let kSecAttrProtocolSMTP: CFString = "smtp"
/// Apple's `kSecAttrProtocolPOP3` ("pop3").
nonisolated(unsafe) public let kSecAttrProtocolPOP3: CFString = "pop3"
/// Apple's `kSecAttrProtocolPOP3S` ("pops").
nonisolated(unsafe) public let kSecAttrProtocolPOP3S: CFString = "pops"
/// Apple's `kSecAttrProtocolLDAP` ("ldap").
nonisolated(unsafe) public let kSecAttrProtocolLDAP: CFString = "ldap"
/// Apple's `kSecAttrProtocolLDAPS` ("ldps").
nonisolated(unsafe) public let kSecAttrProtocolLDAPS: CFString = "ldps"
/// Apple's `kSecAttrProtocolSMB` ("smb ").
nonisolated(unsafe) public let kSecAttrProtocolSMB: CFString = "smb "
/// Apple's `kSecAttrProtocolFTPS` ("ftps").
nonisolated(unsafe) public let kSecAttrProtocolFTPS: CFString = "ftps"
/// Apple's `kSecAttrProtocolTelnet` ("teln").
nonisolated(unsafe) public let kSecAttrProtocolTelnet: CFString = "teln"
/// Apple's `kSecAttrProtocolIRC` ("irc ").
nonisolated(unsafe) public let kSecAttrProtocolIRC: CFString = "irc "
/// Apple's `kSecAttrProtocolSOCKS` ("sox ").
nonisolated(unsafe) public let kSecAttrProtocolSOCKS: CFString = "sox "
/// Apple's `kSecAttrProtocolAFP` ("afp ").
nonisolated(unsafe) public let kSecAttrProtocolAFP: CFString = "afp "
/// Apple's `kSecAttrProtocolNNTP` ("nntp").
nonisolated(unsafe) public let kSecAttrProtocolNNTP: CFString = "nntp"
/// Apple's `kSecAttrProtocolRTSP` ("rtsp").
nonisolated(unsafe) public let kSecAttrProtocolRTSP: CFString = "rtsp"
/// Apple's `kSecAttrAuthenticationTypeDefault` ("dflt").
nonisolated(unsafe) public let kSecAttrAuthenticationTypeDefault: CFString = "dflt"
/// Apple's `kSecAttrAuthenticationTypeHTTPBasic` ("http").
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTTPBasic: CFString = "http"
/// Apple's `kSecAttrAuthenticationTypeHTTPDigest` ("httd").
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTTPDigest: CFString = "httd"
/// Apple's `kSecAttrAuthenticationTypeHTMLForm` ("form").
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTMLForm: CFString = "form"
/// Apple's `kSecAttrAuthenticationTypeNTLM` ("ntlm").
nonisolated(unsafe) public let kSecAttrAuthenticationTypeNTLM: CFString = "ntlm"
/// Apple's `kSecAttrAuthenticationTypeMSN` ("msna").
nonisolated(unsafe) public let kSecAttrAuthenticationTypeMSN: CFString = "msna"
/// Apple's `kSecAttrAuthenticationTypeDPA` ("dpaa").
nonisolated(unsafe) public let kSecAttrAuthenticationTypeDPA: CFString = "dpaa"
/// Apple's `kSecAttrAuthenticationTypeRPA` ("rpaa").
nonisolated(unsafe) public let kSecAttrAuthenticationTypeRPA: CFString = "rpaa"

// Keys (SecItem.h, SecKey.h).

/// Apple's `kSecAttrKeyTypeRSA` ("42").
nonisolated(unsafe) public let kSecAttrKeyTypeRSA: CFString = "42"
/// Apple's `kSecAttrKeyTypeEC` ("73").
nonisolated(unsafe) public let kSecAttrKeyTypeEC: CFString = "73"
/// Apple's `kSecAttrKeyTypeECSECPrimeRandom` ("73", the same as `kSecAttrKeyTypeEC`).
nonisolated(unsafe) public let kSecAttrKeyTypeECSECPrimeRandom: CFString = "73"
/// Apple's `kSecAttrKeyClassPublic` ("0").
nonisolated(unsafe) public let kSecAttrKeyClassPublic: CFString = "0"
/// Apple's `kSecAttrKeyClassPrivate` ("1").
nonisolated(unsafe) public let kSecAttrKeyClassPrivate: CFString = "1"
/// Apple's `kSecAttrKeyClassSymmetric` ("2").
nonisolated(unsafe) public let kSecAttrKeyClassSymmetric: CFString = "2"
/// Apple's `kSecPrivateKeyAttrs` ("private").
nonisolated(unsafe) public let kSecPrivateKeyAttrs: CFString = SecKeys.privateKeyAttributes as NSString
/// Apple's `kSecPublicKeyAttrs` ("public").
nonisolated(unsafe) public let kSecPublicKeyAttrs: CFString = SecKeys.publicKeyAttributes as NSString
/// Apple's `kSecAttrIsPrivate` ("priv").
nonisolated(unsafe) public let kSecAttrIsPrivate: CFString = "priv"
/// Apple's `kSecAttrIsModifiable` ("modi").
nonisolated(unsafe) public let kSecAttrIsModifiable: CFString = "modi"
/// Apple's `kSecAttrWasAlwaysSensitive` ("asen").
nonisolated(unsafe) public let kSecAttrWasAlwaysSensitive: CFString = "asen"
/// Apple's `kSecAttrWasNeverExtractable` ("next").
nonisolated(unsafe) public let kSecAttrWasNeverExtractable: CFString = "next"
/// Apple's `kSecAttrCanSignRecover` ("snrc").
nonisolated(unsafe) public let kSecAttrCanSignRecover: CFString = "snrc"
/// Apple's `kSecAttrCanVerifyRecover` ("vyrc").
nonisolated(unsafe) public let kSecAttrCanVerifyRecover: CFString = "vyrc"
/// Apple's `kSecAttrTokenIDSecureEnclave`. latchkey has no Secure Enclave: a key generated with it
/// gives errSecUnimplemented.
nonisolated(unsafe) public let kSecAttrTokenIDSecureEnclave: CFString = "com.apple.setoken"
