import Foundation
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets

// Apple's SecPKCS12Import and its keys (SecImportExport.h), with Apple's string values
// (SecImportExport.c).

/// Apple's `kSecImportExportPassphrase` ("passphrase"): the PKCS#12 file's password, a CFString.
nonisolated(unsafe) public let kSecImportExportPassphrase: CFString = "passphrase"
/// Apple's `kSecImportToMemoryOnly` ("memory"). latchkey's SecPKCS12Import never adds to the keychain,
/// so the option is accepted and changes nothing.
nonisolated(unsafe) public let kSecImportToMemoryOnly: CFString = "memory"
/// Apple's `kSecImportItemLabel` ("label"): the identity's friendly name, when the file has one.
nonisolated(unsafe) public let kSecImportItemLabel: CFString = "label"
/// Apple's `kSecImportItemKeyID` ("keyid"): the SHA-1 of the private key's public key bytes, which is
/// the key's `kSecAttrApplicationLabel` and its certificate's `kSecAttrPublicKeyHash`.
nonisolated(unsafe) public let kSecImportItemKeyID: CFString = "keyid"
/// Apple's `kSecImportItemTrust` ("trust"). latchkey has no SecTrust, so results never hold it.
nonisolated(unsafe) public let kSecImportItemTrust: CFString = "trust"
/// Apple's `kSecImportItemCertChain` ("chain"): the certificates, leaf first.
nonisolated(unsafe) public let kSecImportItemCertChain: CFString = "chain"
/// Apple's `kSecImportItemIdentity` ("identity"): a `SecIdentity`.
nonisolated(unsafe) public let kSecImportItemIdentity: CFString = "identity"

/// Reads a PKCS#12 (`.p12`, `.pfx`) file (Apple's `SecPKCS12Import`).
///
/// `items` receives an array with one dictionary per identity: `kSecImportItemIdentity` (a
/// `SecIdentity` whose private key this process holds), `kSecImportItemCertChain` (its certificate
/// first, then the issuers found in the file, each signed by the next), `kSecImportItemKeyID` and,
/// when the file names the identity, `kSecImportItemLabel`. Certificates of the file that are in no
/// identity's chain come last, in one dictionary holding only `kSecImportItemCertChain`, as macOS
/// returns them (iOS drops them). There is no `kSecImportItemTrust`: latchkey has no SecTrust.
///
/// Nothing is added to the keychain: add the identity with `SecItemAdd` and `kSecValueRef`
/// ("Import, Then Add"). The passphrase is `kSecImportExportPassphrase`, a CFString; as an
/// extension, a CFData of UTF-8 bytes is accepted too, so that a caller can wipe it afterwards. A
/// missing passphrase is the empty one.
///
/// Files encrypted with the legacy ciphers of Keychain Access, older macOS and Windows (RC2-40, 3DES) are
/// read too, through OpenSSL's legacy provider, which is loaded for this and nothing else.
///
/// - Returns: errSecSuccess; errSecAuthFailed (-25293) when the passphrase is wrong; errSecDecode
///   (-26275) when the data is not a (readable) PKCS#12 file, does not decrypt although its passphrase
///   is right, is encrypted with a cipher OpenSSL cannot read, asks for more key-derivation work or holds
///   more certificates (1024) than accepted, or holds a key latchkey cannot use (RSA and EC
///   P-256/384/521 are supported; other types are refused undecoded, as Apple's import refuses keys
///   whose algorithm is neither) or one whose private part does not belong to its certificate; errSecParam for a passphrase of another type or one holding a NUL
///   character (which OpenSSL would end the passphrase at).
///   `LatchkeyDiagnostics.lastErrorDetail` says more.
///
/// OpenSSL reads one private key per file, so a file with several keys gives the first identity only.
public func SecPKCS12Import(_ pkcs12_data: CFData, _ options: CFDictionary, _ items: UnsafeMutablePointer<CFArray?>)
    -> OSStatus
{
    // As Apple's, a failed call leaves `items` untouched.
    let contents: PKCS12.Contents
    do throws(SecError) {
        let passphrase = try importPassphrase(options)
        // Copied straight from the NSData (no bridged Data between) and wiped after: a file without a MAC
        // may hold its private key unencrypted. OpenSSL's own copies (the decoded safes, each bag) are
        // freed without being cleansed, except the decrypted PrivateKeyInfo; they cannot be wiped here.
        var der = [UInt8](repeating: 0, count: pkcs12_data.length)
        der.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { pkcs12_data.getBytes(base, length: buffer.count) }
        }
        defer { SecretBytes.wipe(&der) }
        do {
            contents = try PKCS12.parse(der: der, password: passphrase)
        } catch .wrongPassword {
            throw SecError(SecStatus.authFailed, "the PKCS#12 passphrase is wrong")
        } catch .unsupported(let why) {
            // A cipher or a key that cannot be used here; as Apple's p12 decoder reports what it cannot
            // decode (p12_decodeErr), errSecDecode, never errSecAuthFailed.
            throw SecError(SecStatus.decode, "latchkey cannot use this PKCS#12 file: \(why)")
        } catch .invalidInput(let why) {
            throw SecError(SecStatus.decode, why)
        } catch {
            throw SecError(SecStatus.decode, "the PKCS#12 file could not be read: \(error)")
        }
    } catch {
        LastError.record(error.detail)
        return error.status
    }

    var results: [NSDictionary] = []
    var unused = contents.additional
    if let key = contents.key, key.isPrivate, let leaf = contents.certificate,
        leaf.publicKeyBytes == key.publicKeyBytes
    {
        let chain = [leaf] + issuerChain(of: leaf, from: &unused)
        let certificates = chain.map { SecCertificate($0) }
        let identity = SecIdentity(certificate: certificates[0], privateKey: SecKey(local: key))
        let entry = NSMutableDictionary()
        entry[kSecImportItemIdentity] = identity
        entry[kSecImportItemCertChain] = NSArray(array: certificates)
        entry[kSecImportItemKeyID] = NSData(data: Data(key.applicationLabel))
        if let name = contents.friendlyName { entry[kSecImportItemLabel] = NSString(string: name) }
        results.append(entry)
    } else if let certificate = contents.certificate {
        // A key without its certificate makes no identity (Apple drops it too); the certificate is
        // returned with the others.
        unused.insert(certificate, at: 0)
    }
    if !unused.isEmpty {
        results.append([kSecImportItemCertChain: NSArray(array: unused.map { SecCertificate($0) })] as NSDictionary)
    }
    LastError.record(nil)
    items.pointee = NSArray(array: results)
    return errSecSuccess
}

/// The passphrase option as bytes in wiping storage.
private func importPassphrase(_ options: CFDictionary) throws(SecError) -> SecretBytes {
    let dictionary = options as NSDictionary
    guard let value = dictionary[kSecImportExportPassphrase as String] else { return SecretBytes(count: 0) }
    let passphrase: SecretBytes
    switch value {
    case let string as String:
        // Straight into wiping storage (an Array of the UTF-8 would be a copy left behind); the String
        // itself is the caller's, and cannot be wiped (pass a CFData to avoid it).
        var utf8 = string.utf8CString
        passphrase = SecretBytes(count: utf8.count - 1)
        passphrase.withUnsafeMutableBytes { out in
            utf8.withUnsafeBytes { input in
                for k in 0..<out.count { out[k] = input[k] }
            }
        }
        utf8.withUnsafeMutableBytes { SecretBytes.wipe($0.baseAddress!, count: $0.count) }
    case let data as Data: passphrase = SecretBytes(copying: data)
    default: throw .param("kSecImportExportPassphrase must be a string")
    }
    // OpenSSL takes a PKCS#12 passphrase as a C string: "ab\0cd" would be used as "ab".
    guard !passphrase.withUnsafeBytes({ $0.contains(0) }) else {
        throw .param("kSecImportExportPassphrase must not contain a NUL character")
    }
    return passphrase
}

/// The issuers of `certificate` among `candidates`, nearest first, each the issuer of the one before
/// (matched by normalised Name, as the keychain compares them), up to a self-issued certificate.
/// Certificates used are removed from `candidates`.
private func issuerChain(of certificate: X509Certificate, from candidates: inout [X509Certificate]) -> [X509Certificate]
{
    var chain: [X509Certificate] = []
    var current = certificate
    while current.normalizedIssuer != current.normalizedSubject,
        let index = candidates.firstIndex(where: { $0.normalizedSubject == current.normalizedIssuer })
    {
        current = candidates.remove(at: index)
        chain.append(current)
    }
    return chain
}
