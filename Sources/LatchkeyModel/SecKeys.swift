/// The string values of Apple's `kSec*` dictionary keys and values. The public library defines its
/// `kSec*` constants from these, so the parser and the API cannot drift apart.
package enum SecKeys {
    // Class key and class values.
    package static let itemClass = "class"
    package static let classGenericPassword = "genp"
    package static let classInternetPassword = "inet"
    package static let classCertificate = "cert"
    package static let classKey = "keys"
    package static let classIdentity = "idnt"

    // Search keys.
    package static let matchLimit = "m_Limit"
    package static let matchLimitOne = "m_LimitOne"
    package static let matchLimitAll = "m_LimitAll"
    package static let matchCaseInsensitive = "m_CaseInsensitive"
    package static let matchItemList = "m_ItemList"
    package static let matchPolicy = "m_Policy"
    package static let matchIssuers = "m_Issuers"
    package static let matchEmailAddressIfPresent = "m_EmailAddressIfPresent"
    package static let matchSubjectContains = "m_SubjectContains"
    package static let matchSubjectStartsWith = "m_SubjectStartsWith"
    package static let matchSubjectEndsWith = "m_SubjectEndsWith"
    package static let matchSubjectWholeString = "m_SubjectWholeString"
    package static let matchTrustedOnly = "m_TrustedOnly"
    package static let matchValidOnDate = "m_ValidOnDate"
    package static let matchHostOrSubdomainOfHost = "m_HostOrSubdomainOfHost"

    // Return keys.
    package static let returnData = "r_Data"
    package static let returnAttributes = "r_Attributes"
    package static let returnRef = "r_Ref"
    package static let returnPersistentRef = "r_PersistentRef"

    // Value keys.
    package static let valueData = "v_Data"
    package static let valueRef = "v_Ref"
    package static let valuePersistentRef = "v_PersistentRef"

    // Key generation (SecKeyCreateRandomKey)
    package static let privateKeyAttributes = "private"
    package static let publicKeyAttributes = "public"

    // Use keys.
    package static let useItemList = "u_ItemList"
    package static let useAuthenticationUI = "u_AuthUI"
    package static let useAuthenticationUIAllow = "u_AuthUIA"
    package static let useAuthenticationUIFail = "u_AuthUIF"
    package static let useAuthenticationUISkip = "u_AuthUIS"
    package static let useOperationPrompt = "u_OpPrompt"
    package static let useNoAuthenticationUI = "u_NoAuthUI"
    package static let useAuthenticationContext = "u_AuthCtx"
    /// Bytes of the handle an `LAContext` is sent as under `u_AuthCtx` (the agent's, docs/PROTOCOL.md).
    package static let authenticationContextLength = 32
    /// latchkey's own: the application password of the request's `LAContext` (`setCredential`), which
    /// Apple carries inside the context (docs/PROTOCOL.md, "Authentication contexts").
    package static let useApplicationPassword = "u_AppPwd"
    /// latchkey's own: the smart-card PIN of the request's `LAContext` (`setCredential(_:type:
    /// .smartCardPIN)`), for a token key's login (docs/TOKENS.md §5).
    package static let useSmartCardPIN = "u_CardPIN"
    /// The longest smart-card PIN a request may carry.
    package static let maximumSmartCardPINLength = 256
    package static let useDataProtectionKeychain = "nleg"

    // Attribute values that are strings.
    package static let synchronizableAny = "syna"
}

/// Attribute names ("4cc" strings) of the item classes.
package enum SecAttr {
    package static let accessible = "pdmn"
    package static let accessControl = "accc"
    /// securityd's internal `kSecAttrAppClipItem`, which no caller may pass.
    package static let appClipItem = "clip"
    package static let accessGroup = "agrp"
    package static let synchronizable = "sync"
    package static let creationDate = "cdat"
    package static let modificationDate = "mdat"
    package static let description = "desc"
    package static let comment = "icmt"
    package static let creator = "crtr"
    package static let type = "type"
    package static let label = "labl"
    package static let isInvisible = "invi"
    package static let isNegative = "nega"
    package static let account = "acct"
    package static let service = "svce"
    package static let generic = "gena"
    package static let securityDomain = "sdmn"
    package static let server = "srvr"
    package static let `protocol` = "ptcl"
    package static let authenticationType = "atyp"
    package static let port = "port"
    package static let path = "path"
    package static let tokenID = "tkid"
    package static let alias = "alis"
    package static let hasCustomIcon = "cusi"
    package static let scriptCode = "scrp"
    package static let prot = "prot"
    package static let certificateType = "ctyp"
    package static let certificateEncoding = "cenc"
    package static let subject = "subj"
    package static let issuer = "issr"
    package static let serialNumber = "slnr"
    package static let subjectKeyID = "skid"
    package static let publicKeyHash = "pkhh"
    package static let keyClass = "kcls"
    package static let applicationLabel = "klbl"
    package static let applicationTag = "atag"
    package static let keyType = "type"
    package static let keySizeInBits = "bsiz"
    package static let effectiveKeySize = "esiz"
    package static let startDate = "sdat"
    package static let endDate = "edat"
}
