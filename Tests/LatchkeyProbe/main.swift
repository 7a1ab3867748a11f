// latchkey-probe: a small application of the public library, for the access-group tests (issue 12).
//
// The end-to-end tests copy this one binary to several root-owned places and give each copy an
// application file of its own, so that each copy is another application to the agent. Each run does one
// SecItem call and prints one line: the OSStatus, then what the call returned (text, hex, or a list).
//
//   latchkey-probe add SERVICE ACCOUNT DATA [GROUP]     -> status
//   latchkey-probe find SERVICE ACCOUNT [GROUP]         -> status data
//   latchkey-probe find-with-context SERVICE ACCOUNT HEX -> status data (HEX: another process's
//                                                          LAContext handle, sent as kSecUseAuthenticationContext)
//   latchkey-probe update SERVICE ACCOUNT DATA          -> status
//   latchkey-probe delete SERVICE ACCOUNT               -> status
//   latchkey-probe list                                 -> status group/service/account;...
//   latchkey-probe ref SERVICE ACCOUNT                  -> status persistent-ref-hex
//   latchkey-probe find-ref HEX | delete-ref HEX | update-ref HEX DATA -> status [data]
//   latchkey-probe generate-key TAG                     -> status (the private key's persistent ref hex)
//   latchkey-probe sign HEX                             -> status (signs with the key of that reference)
//   latchkey-probe wait                                 -> connects, prints "ready", waits for stdin's end
import Foundation
import Latchkey

func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }

func bytes(hex text: String) -> Data? {
    var data = Data()
    var index = text.startIndex
    while index < text.endIndex {
        guard let next = text.index(index, offsetBy: 2, limitedBy: text.endIndex),
            let byte = UInt8(text[index..<next], radix: 16)
        else { return nil }
        data.append(byte)
        index = next
    }
    return data
}

func genp(_ service: String, _ account: String, group: String? = nil) -> [String: Any] {
    var query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
        kSecAttrAccount as String: account,
    ]
    if let group { query[kSecAttrAccessGroup as String] = group }
    return query
}

func copy(_ query: [String: Any]) -> (OSStatus, AnyObject?) {
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    return (status, result)
}

func byRef(_ text: String) -> [String: Any]? {
    guard let ref = bytes(hex: text) else { return nil }
    return [kSecClass as String: kSecClassGenericPassword, kSecValuePersistentRef as String: ref]
}

func run(_ arguments: [String]) -> String? {
    guard let command = arguments.first else { return nil }
    let rest = Array(arguments.dropFirst())
    switch (command, rest.count) {
    case ("add", 3), ("add", 4):
        var item = genp(rest[0], rest[1], group: rest.count == 4 ? rest[3] : nil)
        item[kSecValueData as String] = Data(rest[2].utf8)
        return "\(SecItemAdd(item as CFDictionary, nil))"
    case ("find", 2), ("find", 3):
        var query = genp(rest[0], rest[1], group: rest.count == 3 ? rest[2] : nil)
        query[kSecReturnData as String] = true
        let (status, result) = copy(query)
        return "\(status)" + ((result as? Data).map { " " + String(decoding: $0, as: UTF8.self) } ?? "")
    case ("find-with-context", 3):
        guard let handle = bytes(hex: rest[2]) else { return nil }
        var query = genp(rest[0], rest[1])
        query[kSecReturnData as String] = true
        query[kSecUseAuthenticationContext as String] = handle
        let (status, result) = copy(query)
        return "\(status)" + ((result as? Data).map { " " + String(decoding: $0, as: UTF8.self) } ?? "")
    case ("update", 3):
        let changes = [kSecValueData as String: Data(rest[2].utf8)]
        return "\(SecItemUpdate(genp(rest[0], rest[1]) as CFDictionary, changes as CFDictionary))"
    case ("delete", 2):
        return "\(SecItemDelete(genp(rest[0], rest[1]) as CFDictionary))"
    case ("list", 0):
        let (status, result) = copy([
            kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: kSecMatchLimitAll,
            kSecReturnAttributes as String: true,
        ])
        let items = (result as? [[String: Any]] ?? []).map { attributes in
            ["agrp", "svce", "acct"].map { attributes[$0] as? String ?? "" }.joined(separator: "/")
        }
        return "\(status) " + items.sorted().joined(separator: ";")
    case ("ref", 2):
        var query = genp(rest[0], rest[1])
        query[kSecReturnPersistentRef as String] = true
        let (status, result) = copy(query)
        return "\(status)" + ((result as? Data).map { " " + hex($0) } ?? "")
    case ("find-ref", 1):
        guard var query = byRef(rest[0]) else { return nil }
        query[kSecReturnData as String] = true
        let (status, result) = copy(query)
        return "\(status)" + ((result as? Data).map { " " + String(decoding: $0, as: UTF8.self) } ?? "")
    case ("delete-ref", 1):
        guard let query = byRef(rest[0]) else { return nil }
        return "\(SecItemDelete(query as CFDictionary))"
    case ("update-ref", 2):
        guard let query = byRef(rest[0]) else { return nil }
        return "\(SecItemUpdate(query as CFDictionary, [kSecValueData as String: Data(rest[1].utf8)] as CFDictionary))"
    case ("generate-key", 1):
        let parameters: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
            kSecPrivateKeyAttrs as String: [
                kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: Data(rest[0].utf8),
            ],
        ]
        var error: Unmanaged<CFError>?
        guard SecKeyCreateRandomKey(parameters as CFDictionary, &error) != nil else {
            return "\(error.map { $0.takeRetainedValue().code } ?? -1)"
        }
        let (status, result) = copy([
            kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data(rest[0].utf8),
            kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecReturnPersistentRef as String: true,
        ])
        return "\(status)" + ((result as? Data).map { " " + hex($0) } ?? "")
    case ("sign", 1):
        guard let ref = bytes(hex: rest[0]) else { return nil }
        let (status, result) = copy([
            kSecClass as String: kSecClassKey, kSecValuePersistentRef as String: ref, kSecReturnRef as String: true,
        ])
        guard status == errSecSuccess, let key = result as? SecKey else { return "\(status)" }
        var error: Unmanaged<CFError>?
        let signature = SecKeyCreateSignature(
            key, .ecdsaSignatureMessageX962SHA256, Data("probe".utf8) as CFData, &error)
        return signature != nil ? "0" : "\(error.map { $0.takeRetainedValue().code } ?? -1)"
    case ("wait", 0):
        // One call opens the library's connection; it stays open while this process waits.
        let (status, _) = copy(genp("latchkey-probe", "wait"))
        FileHandle.standardOutput.write(Data("ready \(status)\n".utf8))
        while readLine() != nil {}
        return "done"
    default:
        return nil
    }
}

guard let line = run(Array(CommandLine.arguments.dropFirst())) else {
    FileHandle.standardError.write(Data("usage: see the comment at the top of Tests/LatchkeyProbe/main.swift\n".utf8))
    exit(2)
}
print(line)
