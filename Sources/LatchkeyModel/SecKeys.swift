/// The string values of Apple's `kSec*` dictionary keys and values. The public library defines its
/// `kSec*` constants from these, so the parser and the API cannot drift apart.
public enum SecKeys {
    // Class key and class values.
    public static let itemClass = "class"
    public static let classGenericPassword = "genp"
    public static let classInternetPassword = "inet"
    public static let classCertificate = "cert"
    public static let classKey = "keys"
    public static let classIdentity = "idnt"

    // Search keys.
    public static let matchLimit = "m_Limit"
    public static let matchLimitOne = "m_LimitOne"
    public static let matchLimitAll = "m_LimitAll"
    public static let matchCaseInsensitive = "m_CaseInsensitive"
    public static let matchItemList = "m_ItemList"
    public static let matchPolicy = "m_Policy"
    public static let matchIssuers = "m_Issuers"
    public static let matchEmailAddressIfPresent = "m_EmailAddressIfPresent"
    public static let matchSubjectContains = "m_SubjectContains"
    public static let matchSubjectStartsWith = "m_SubjectStartsWith"
    public static let matchSubjectEndsWith = "m_SubjectEndsWith"
    public static let matchSubjectWholeString = "m_SubjectWholeString"
    public static let matchTrustedOnly = "m_TrustedOnly"
    public static let matchValidOnDate = "m_ValidOnDate"
    public static let matchHostOrSubdomainOfHost = "m_HostOrSubdomainOfHost"

    // Return keys.
    public static let returnData = "r_Data"
    public static let returnAttributes = "r_Attributes"
    public static let returnRef = "r_Ref"
    public static let returnPersistentRef = "r_PersistentRef"

    // Value keys.
    public static let valueData = "v_Data"
    public static let valueRef = "v_Ref"
    public static let valuePersistentRef = "v_PersistentRef"

    // Key generation (SecKeyCreateRandomKey)
    public static let privateKeyAttributes = "private"
    public static let publicKeyAttributes = "public"

    // Use keys.
    public static let useItemList = "u_ItemList"
    public static let useAuthenticationUI = "u_AuthUI"
    public static let useAuthenticationUIAllow = "u_AuthUIA"
    public static let useAuthenticationUIFail = "u_AuthUIF"
    public static let useAuthenticationUISkip = "u_AuthUIS"
    public static let useOperationPrompt = "u_OpPrompt"
    public static let useNoAuthenticationUI = "u_NoAuthUI"
    public static let useAuthenticationContext = "u_AuthCtx"
    public static let useDataProtectionKeychain = "nleg"

    // Attribute values that are strings.
    public static let synchronizableAny = "syna"
}

/// Attribute names ("4cc" strings) of the item classes.
public enum SecAttr {
    public static let accessible = "pdmn"
    public static let accessControl = "accc"
    public static let accessGroup = "agrp"
    public static let synchronizable = "sync"
    public static let creationDate = "cdat"
    public static let modificationDate = "mdat"
    public static let description = "desc"
    public static let comment = "icmt"
    public static let creator = "crtr"
    public static let type = "type"
    public static let label = "labl"
    public static let isInvisible = "invi"
    public static let isNegative = "nega"
    public static let account = "acct"
    public static let service = "svce"
    public static let generic = "gena"
    public static let securityDomain = "sdmn"
    public static let server = "srvr"
    public static let `protocol` = "ptcl"
    public static let authenticationType = "atyp"
    public static let port = "port"
    public static let path = "path"
    public static let tokenID = "tkid"
    public static let alias = "alis"
    public static let hasCustomIcon = "cusi"
    public static let scriptCode = "scrp"
    public static let prot = "prot"
    public static let certificateType = "ctyp"
    public static let certificateEncoding = "cenc"
    public static let subject = "subj"
    public static let issuer = "issr"
    public static let serialNumber = "slnr"
    public static let subjectKeyID = "skid"
    public static let publicKeyHash = "pkhh"
    public static let keyClass = "kcls"
    public static let applicationLabel = "klbl"
    public static let applicationTag = "atag"
    public static let keyType = "type"
    public static let keySizeInBits = "bsiz"
    public static let effectiveKeySize = "esiz"
    public static let startDate = "sdat"
    public static let endDate = "edat"
}
