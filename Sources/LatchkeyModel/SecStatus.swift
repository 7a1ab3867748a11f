/// Apple's `OSStatus` result codes used by the SecItem API, with Apple's numeric values and the
/// messages `SecCopyErrorMessageString` gives for them.
package enum SecStatus {
    package static let success: Int32 = 0
    package static let unimplemented: Int32 = -4
    package static let io: Int32 = -36
    package static let param: Int32 = -50
    package static let allocate: Int32 = -108
    package static let userCanceled: Int32 = -128
    package static let badReq: Int32 = -909
    package static let internalComponent: Int32 = -2070
    package static let notAvailable: Int32 = -25291
    package static let readOnly: Int32 = -25292
    package static let authFailed: Int32 = -25293
    package static let noSuchKeychain: Int32 = -25294
    package static let invalidKeychain: Int32 = -25295
    package static let duplicateKeychain: Int32 = -25296
    package static let duplicateItem: Int32 = -25299
    package static let itemNotFound: Int32 = -25300
    package static let bufferTooSmall: Int32 = -25301
    package static let dataTooLarge: Int32 = -25302
    package static let noSuchAttr: Int32 = -25303
    package static let invalidItemRef: Int32 = -25304
    package static let noSuchClass: Int32 = -25306
    package static let noDefaultKeychain: Int32 = -25307
    package static let interactionNotAllowed: Int32 = -25308
    package static let interactionRequired: Int32 = -25315
    package static let dataNotAvailable: Int32 = -25316
    package static let decode: Int32 = -26275
    /// errSecAuthNeeded (Apple SPI): the engine's answer when items need a user check (phase one of
    /// docs/ACCESS-CONTROL.md §3). Internal to the agent: never sent to a client.
    package static let authNeeded: Int32 = -25330
    package static let missingEntitlement: Int32 = -34018
    package static let notTrusted: Int32 = -67843
    package static let verifyFailed: Int32 = -67808

    /// Apple's message for a status, as `SecCopyErrorMessageString` returns it; nil for unknown codes.
    package static func message(for status: Int32) -> String? {
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
package struct SecError: Error, Equatable, CustomStringConvertible {
    package var status: Int32
    package var detail: String?

    package init(_ status: Int32, _ detail: String? = nil) {
        self.status = status
        self.detail = detail
    }

    package var description: String {
        let base = "\(SecStatus.message(for: status) ?? "Unknown error.") (\(status))"
        if let detail { return "\(base): \(detail)" }
        return base
    }

    package static func param(_ detail: String) -> SecError { SecError(SecStatus.param, detail) }
    package static func noSuchAttr(_ name: String, _ itemClass: String) -> SecError {
        SecError(SecStatus.noSuchAttr, "attribute '\(name)' is not an attribute of class '\(itemClass)'")
    }
    package static var locked: SecError {
        SecError(SecStatus.interactionNotAllowed, "the item's class key is not available (keychain locked)")
    }
    package static var notFound: SecError { SecError(SecStatus.itemNotFound) }
}
