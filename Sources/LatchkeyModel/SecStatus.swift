/// Apple's `OSStatus` result codes used by the SecItem API, with Apple's numeric values and the
/// messages `SecCopyErrorMessageString` gives for them.
public enum SecStatus {
    public static let success: Int32 = 0
    public static let unimplemented: Int32 = -4
    public static let io: Int32 = -36
    public static let param: Int32 = -50
    public static let allocate: Int32 = -108
    public static let userCanceled: Int32 = -128
    public static let badReq: Int32 = -909
    public static let internalComponent: Int32 = -2070
    public static let notAvailable: Int32 = -25291
    public static let readOnly: Int32 = -25292
    public static let authFailed: Int32 = -25293
    public static let noSuchKeychain: Int32 = -25294
    public static let invalidKeychain: Int32 = -25295
    public static let duplicateKeychain: Int32 = -25296
    public static let duplicateItem: Int32 = -25299
    public static let itemNotFound: Int32 = -25300
    public static let bufferTooSmall: Int32 = -25301
    public static let dataTooLarge: Int32 = -25302
    public static let noSuchAttr: Int32 = -25303
    public static let invalidItemRef: Int32 = -25304
    public static let noSuchClass: Int32 = -25306
    public static let noDefaultKeychain: Int32 = -25307
    public static let interactionNotAllowed: Int32 = -25308
    public static let interactionRequired: Int32 = -25315
    public static let dataNotAvailable: Int32 = -25316
    public static let decode: Int32 = -26275
    public static let missingEntitlement: Int32 = -34018
    public static let notTrusted: Int32 = -67843
    public static let verifyFailed: Int32 = -67808

    /// Apple's message for a status, as `SecCopyErrorMessageString` returns it; nil for unknown codes.
    public static func message(for status: Int32) -> String? {
        messages[status]
    }

    private static let messages: [Int32: String] = [
        success: "No error.",
        unimplemented: "Function or operation not implemented.",
        io: "I/O error.",
        param: "One or more parameters passed to a function were not valid.",
        allocate: "Failed to allocate memory.",
        userCanceled: "User canceled the operation.",
        badReq: "Bad parameter or invalid state for operation.",
        internalComponent: "An internal component failed.",
        notAvailable: "No keychain is available. You may need to restart your computer.",
        readOnly: "This keychain cannot be modified.",
        authFailed: "The user name or passphrase you entered is not correct.",
        noSuchKeychain: "The specified keychain could not be found.",
        invalidKeychain: "The specified keychain is not a valid keychain file.",
        duplicateKeychain: "A keychain with the same name already exists.",
        duplicateItem: "The specified item already exists in the keychain.",
        itemNotFound: "The specified item could not be found in the keychain.",
        bufferTooSmall: "There is not enough memory available to use the specified item.",
        dataTooLarge: "This item contains information which is too large or in a format that cannot be displayed.",
        noSuchAttr: "The specified attribute does not exist.",
        invalidItemRef: "The specified item is no longer valid. It may have been deleted from the keychain.",
        noSuchClass: "The specified item does not appear to be a valid keychain item.",
        noDefaultKeychain: "A default keychain could not be found.",
        interactionNotAllowed: "User interaction is not allowed.",
        interactionRequired: "User interaction is required, but is currently not allowed.",
        dataNotAvailable: "The contents of this item cannot be retrieved.",
        decode: "Unable to decode the provided data.",
        missingEntitlement: "A required entitlement isn't present.",
        notTrusted: "The trust policy was not trusted.",
        verifyFailed: "A cryptographic verification failure has occurred.",
    ]
}

/// A SecItem failure: an `OSStatus` plus an optional detail for diagnostics (which key was wrong, which
/// file is corrupt). The detail never contains a secret or an attribute value.
public struct SecError: Error, Equatable, CustomStringConvertible {
    public var status: Int32
    public var detail: String?

    public init(_ status: Int32, _ detail: String? = nil) {
        self.status = status
        self.detail = detail
    }

    public var description: String {
        let base = "\(SecStatus.message(for: status) ?? "Unknown error.") (\(status))"
        if let detail { return "\(base): \(detail)" }
        return base
    }

    public static func param(_ detail: String) -> SecError { SecError(SecStatus.param, detail) }
    public static func noSuchAttr(_ name: String, _ itemClass: String) -> SecError {
        SecError(SecStatus.noSuchAttr, "attribute '\(name)' is not an attribute of class '\(itemClass)'")
    }
    public static var locked: SecError {
        SecError(SecStatus.interactionNotAllowed, "the item's class key is not available (keychain locked)")
    }
    public static var notFound: SecError { SecError(SecStatus.itemNotFound) }
}
