import ArgumentParser
import Foundation
import Latchkey

/// The attributes that identify an internet password, shared by the three internet verbs (the
/// option letters of macOS `security`).
struct InternetOptions: ParsableArguments {
    @Option(name: .customShort("s"), help: ArgumentHelp("Server name (kSecAttrServer).", valueName: "server"))
    var server: String?

    @Option(name: .customShort("a"), help: ArgumentHelp("Account name (kSecAttrAccount).", valueName: "account"))
    var account: String?

    @Option(
        name: .customShort("r"),
        help: ArgumentHelp(
            "Protocol, a four-character code such as htps, http, ftp, ssh, imps (kSecAttrProtocol); "
                + "shorter codes are padded with spaces.", valueName: "protocol"))
    var protocolCode: FourCharCode?

    @Option(name: .customShort("P"), help: ArgumentHelp("Port number (kSecAttrPort).", valueName: "port"))
    var port: UInt16?

    @Option(name: .customShort("p"), help: ArgumentHelp("Path (kSecAttrPath).", valueName: "path"))
    var path: String?

    @Option(
        name: .customShort("d"), help: ArgumentHelp("Security domain (kSecAttrSecurityDomain).", valueName: "domain"))
    var securityDomain: String?

    @Option(
        name: .customShort("t"),
        help: ArgumentHelp(
            "Authentication type, a four-character code such as dflt, form, http, ntlm "
                + "(kSecAttrAuthenticationType).", valueName: "type"))
    var authenticationType: FourCharCode?

    /// True when no attribute was given.
    var isEmpty: Bool {
        server == nil && account == nil && protocolCode == nil && port == nil && path == nil
            && securityDomain == nil && authenticationType == nil
    }

    /// The given attributes, for a query.
    var filters: [String: Any] {
        var attributes: [String: Any] = [:]
        if let server { attributes[kSecAttrServer as String] = server }
        if let account { attributes[kSecAttrAccount as String] = account }
        if let protocolCode { attributes[kSecAttrProtocol as String] = protocolCode.code }
        if let port { attributes[kSecAttrPort as String] = NSNumber(value: Int(port)) }
        if let path { attributes[kSecAttrPath as String] = path }
        if let securityDomain { attributes[kSecAttrSecurityDomain as String] = securityDomain }
        if let authenticationType { attributes[kSecAttrAuthenticationType as String] = authenticationType.code }
        return attributes
    }

    /// The whole primary key of a new item: the given attributes plus the values the keychain stores
    /// for the missing ones (empty, or 0), so that `-U` updates exactly the item that collided and
    /// not, say, the same account on every port.
    var primaryKey: [String: Any] {
        var attributes = filters
        for key in [kSecAttrServer, kSecAttrAccount, kSecAttrPath, kSecAttrSecurityDomain, kSecAttrAuthenticationType]
        where attributes[key as String] == nil {
            attributes[key as String] = ""
        }
        for key in [kSecAttrProtocol, kSecAttrPort] where attributes[key as String] == nil {
            attributes[key as String] = NSNumber(value: 0)
        }
        return attributes
    }
}

/// A four-character code (`ptcl`, `atyp`), as Apple's string constants spell them: "htps", "ftp ".
struct FourCharCode: ExpressibleByArgument {
    var code: String

    init?(argument: String) {
        guard (1...4).contains(argument.utf8.count),
            argument.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 })
        else { return nil }
        code = argument + String(repeating: " ", count: 4 - argument.utf8.count)
    }
}
