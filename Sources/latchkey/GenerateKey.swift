import ArgumentParser
import Foundation
import Latchkey
import LatchkeyCrypto

/// `latchkey generate-key`: a key pair generated in the agent (SecKeyCreateRandomKey with
/// kSecAttrIsPermanent), whose private key never leaves it.
struct GenerateKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate-key",
        abstract: "Generate a key pair in the keychain.",
        discussion: """
            The agent generates the key pair and stores the private key (with --public-too, the \
            public key as well, as an item of its own); the private key never enters this or any \
            other process unless it is exported. Prints the stored private key's attributes, as \
            find-key does, then the public key as PEM (SubjectPublicKeyInfo), which openssl and \
            other tools read.

            Sizes: EC 256, 384 or 521 (the NIST curves P-256, P-384, P-521; default 256); RSA 1024 \
            to 4096 bits in steps of 8 (default 3072). Keys default to the when-unlocked class. \
            With --non-extractable the private key can be used (signing, decryption) but never \
            exported (kSecAttrIsExtractable false).

            Examples:
              latchkey generate-key --type ec --tag com.example.signing --label "Signing key"
              latchkey generate-key --type rsa --size 4096 --non-extractable --public-too
            """)

    @Option(name: .customLong("type"), help: ArgumentHelp("Key type (kSecAttrKeyType).", valueName: "type"))
    var type: KeyAlgorithmArgument

    @Option(
        name: .customLong("size"), help: ArgumentHelp("Key size in bits (kSecAttrKeySizeInBits).", valueName: "bits"))
    var size: Int?

    @Option(
        name: [.customShort("l"), .customLong("label")],
        help: ArgumentHelp("Label (kSecAttrLabel).", valueName: "label"))
    var label: String?

    @Option(
        name: .customLong("tag"),
        help: ArgumentHelp("Application tag (kSecAttrApplicationTag), given as text.", valueName: "tag"))
    var tag: String?

    @Option(
        name: .customLong("accessible"),
        help: ArgumentHelp("Accessibility class (kSecAttrAccessible).", valueName: "class"))
    var accessible: Accessibility?

    @Flag(
        name: .customLong("non-extractable"),
        help: "The private key can never be exported (kSecAttrIsExtractable false).")
    var nonExtractable = false

    @Flag(name: .customLong("public-too"), help: "Also store the public key as a keychain item.")
    var publicToo = false

    @Option(name: .customLong("access-control"), help: AccessControlWords.help)
    var accessControl: String?

    var bits: Int { size ?? (type == .ec ? 256 : 3072) }

    func validate() throws {
        if let accessControl { _ = try AccessControlWords.parse(accessControl) }
        switch type {
        case .ec:
            guard [256, 384, 521].contains(bits) else { throw ValidationError("EC keys are 256, 384 or 521 bits") }
        case .rsa:
            guard AsymmetricKey.generatableRSABits.contains(bits), bits % 8 == 0 else {
                throw ValidationError("RSA keys are 1024 to 4096 bits, a multiple of 8")
            }
        }
    }

    func run() throws {
        var common: [String: Any] = [kSecAttrIsPermanent as String: kCFBooleanTrue!]
        if let label { common[kSecAttrLabel as String] = label }
        if let tag { common[kSecAttrApplicationTag as String] = Data(tag.utf8) }
        var privateAttributes = common
        if nonExtractable { privateAttributes[kSecAttrIsExtractable as String] = kCFBooleanFalse }
        if let accessControl {
            // The private key only: the public key is public (Apple's Secure Enclave keys likewise).
            privateAttributes[kSecAttrAccessControl as String] = try AccessControlWords.make(
                AccessControlWords.parse(accessControl),
                protection: accessible?.pdmn ?? (kSecAttrAccessibleWhenUnlocked as String))
        }
        var publicAttributes = common
        publicAttributes[kSecAttrIsPermanent as String] = publicToo ? kCFBooleanTrue : kCFBooleanFalse
        var parameters: [String: Any] = [
            kSecAttrKeyType as String: type.keyType,
            kSecAttrKeySizeInBits as String: NSNumber(value: bits),
            kSecPrivateKeyAttrs as String: privateAttributes,
            kSecPublicKeyAttrs as String: publicAttributes,
        ]
        if let accessible { parameters[kSecAttrAccessible as String] = accessible.pdmn }

        var error: Unmanaged<CFError>?
        guard let privateKey = SecKeyCreateRandomKey(parameters as CFDictionary, &error) else {
            throw keyFailure("SecKeyCreateRandomKey", error)
        }
        guard let publicKey = SecKeyCopyPublicKey(privateKey),
            let publicBytes = SecKeyCopyExternalRepresentation(publicKey, &error) as Data?
        else {
            throw keyFailure("SecKeyCopyExternalRepresentation", error)
        }
        let publicPEM: String
        do {
            publicPEM = try AsymmetricKey(
                externalRepresentation: Array(publicBytes), algorithm: type == .rsa ? .rsa : .ec,
                isPrivate: false
            ).subjectPublicKeyInfoPEM()
        } catch {
            throw failure(
                "SecKeyCopyExternalRepresentation", errSecDecode,
                detail: "the public key could not be encoded: \(error)")
        }

        // What the keychain stored, read back: its application label is the public key's SHA-1.
        var query = ItemQuery.make(
            kSecClassKey,
            [
                kSecAttrApplicationLabel as String: Data(SHA1.hash(Array(publicBytes))),
                kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
            ])
        query[kSecReturnAttributes as String] = kCFBooleanTrue
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        guard status == errSecSuccess, let attributes = ItemPrinter.dictionary(result) else {
            throw secItemFailure("SecItemCopyMatching", status == errSecSuccess ? errSecDecode : status)
        }
        print(
            ItemPrinter.render(itemClass: kSecClassKey as String, attributes: attributes, secret: nil), terminator: "")
        print(publicPEM, terminator: "")
    }
}

/// Reports a failed SecKey call from its CFError (an NSOSStatusErrorDomain error whose code is the
/// OSStatus) and returns the exit code to throw.
func keyFailure(_ function: String, _ error: Unmanaged<CFError>?) -> ExitCode {
    guard let error = error?.takeRetainedValue() else { return failure(function, errSecInternalComponent, detail: nil) }
    return failure(
        function, OSStatus(error.code), detail: LatchkeyDiagnostics.lastErrorDetail ?? error.localizedDescription)
}
