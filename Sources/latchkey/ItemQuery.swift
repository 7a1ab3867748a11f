import ArgumentParser
import Foundation
import Latchkey

/// Running the queries of the find and delete verbs.
enum ItemQuery {
    /// A query on `itemClass` with the given attribute filters, matching synchronizable and
    /// non-synchronizable items alike (SecItem's default would skip synchronizable ones).
    static func make(_ itemClass: CFString, _ filters: [String: Any]) -> [String: Any] {
        var query = filters
        query[kSecClass as String] = itemClass
        query[kSecAttrSynchronizable as String] = kSecAttrSynchronizableAny
        return Interaction.applied(to: query)
    }

    /// The find verbs: prints the first matching item's attributes, its password too with `-g`, or
    /// only its password with `-w`.
    static func find(_ itemClass: CFString, _ filters: [String: Any], passwordOnly: Bool, withPassword: Bool)
        throws(ExitCode)
    {
        var query = make(itemClass, filters)
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        query[kSecReturnData as String] = (passwordOnly || withPassword) ? kCFBooleanTrue! : kCFBooleanFalse!
        query[kSecReturnAttributes as String] = passwordOnly ? kCFBooleanFalse! : kCFBooleanTrue!
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        guard status == errSecSuccess else { throw secItemFailure("SecItemCopyMatching", status) }

        if passwordOnly {
            // The password alone, then a newline, so that `$(latchkey find-... -w)` gives it back.
            var data = (result as? Data) ?? Data()
            ItemPrinter.writeRaw(data + Data("\n".utf8))
            data.resetBytes(in: 0..<data.count)
            return
        }
        guard let attributes = ItemPrinter.dictionary(result) else {
            throw failure("SecItemCopyMatching", errSecDecode, detail: "unexpected result type")
        }
        let secret = withPassword ? (attributes[kSecValueData as String] as? Data ?? Data()) : nil
        print(
            ItemPrinter.render(itemClass: itemClass as String, attributes: attributes, secret: secret), terminator: "")
    }

    /// The delete verbs: deletes every matching item and says how many, when they could be counted
    /// first (counting reads the items, which fails for locked classes; deleting needs only the
    /// index key, which a plain `lock` keeps).
    static func delete(_ itemClass: CFString, _ filters: [String: Any]) throws(ExitCode) {
        let query = make(itemClass, filters)
        var countQuery = query
        countQuery[kSecMatchLimit as String] = kSecMatchLimitAll
        countQuery[kSecReturnPersistentRef as String] = kCFBooleanTrue
        var result: CFTypeRef?
        let counted =
            SecItemCopyMatching(countQuery as CFDictionary, &result) == errSecSuccess
            ? (result as? NSArray)?.count : nil

        let status = SecItemDelete(query as CFDictionary)
        guard status == errSecSuccess else { throw secItemFailure("SecItemDelete", status) }
        if let counted {
            print("deleted \(counted) item\(counted == 1 ? "" : "s")")
        } else {
            print("deleted the matching items")
        }
    }
}
