import Foundation
import LatchkeyDBus
import XCTest

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The introspection data of every kind of object, parsed and compared with the members the Secret
/// Service specification (and the D-Bus specification's standard interfaces) give them: every method,
/// argument, property and signal with its name, type and direction, nothing more and nothing less.
final class IntrospectionTests: SecretServiceTestCase {
    /// One member of one interface, as introspection describes it; arguments in order.
    struct Member: Hashable, CustomStringConvertible {
        var interface: String
        var kind: String  // method, signal, property
        var name: String
        /// "name:type:direction" for method arguments, "name:type" for a signal's, "type:access" for a property.
        var details: [String]

        var description: String { "\(interface) \(kind) \(name)(\(details.joined(separator: ", ")))" }
    }

    struct Node {
        var members: Set<Member> = []
        var children: [String] = []
    }

    struct Unparsable: Error, CustomStringConvertible {
        var description: String
    }

    /// Parses introspection XML into its members and child nodes.
    final class Parser: NSObject, XMLParserDelegate {
        var node = Node()
        var depth = 0
        var interface: String?
        var current: Member?
        var failure: String?

        static func parse(_ xml: String) throws -> Node {
            let delegate = Parser()
            let parser = XMLParser(data: Data(xml.utf8))
            parser.delegate = delegate
            guard parser.parse(), delegate.failure == nil else {
                let why = delegate.failure ?? parser.parserError.map { "\($0)" } ?? "?"
                throw Unparsable(description: "unparsable introspection data (\(why)):\n\(xml)")
            }
            return delegate.node
        }

        func parser(
            _ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            depth += 1
            switch element {
            case "node" where depth == 2:
                node.children.append(attributes["name"] ?? "")
            case "node":
                break
            case "interface":
                interface = attributes["name"]
            case "method", "signal":
                current = Member(
                    interface: interface ?? "?", kind: element, name: attributes["name"] ?? "", details: [])
            case "property":
                node.members.insert(
                    Member(
                        interface: interface ?? "?", kind: "property", name: attributes["name"] ?? "",
                        details: ["\(attributes["type"] ?? ""):\(attributes["access"] ?? "")"]))
            case "arg":
                var detail = "\(attributes["name"] ?? ""):\(attributes["type"] ?? "")"
                if current?.kind == "method" { detail += ":\(attributes["direction"] ?? "in")" }
                current?.details.append(detail)
            default:
                failure = "unexpected element <\(element)>"
            }
        }

        func parser(_ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?) {
            depth -= 1
            if element == "method" || element == "signal", let member = current {
                node.members.insert(member)
                current = nil
            }
            if element == "interface" { interface = nil }
        }
    }

    // MARK: - The specifications' members

    private static func method(_ interface: String, _ name: String, _ arguments: String...) -> Member {
        Member(interface: interface, kind: "method", name: name, details: arguments)
    }

    private static func signal(_ interface: String, _ name: String, _ arguments: String...) -> Member {
        Member(interface: interface, kind: "signal", name: name, details: arguments)
    }

    private static func property(_ interface: String, _ name: String, _ type: String, _ access: String) -> Member {
        Member(interface: interface, kind: "property", name: name, details: ["\(type):\(access)"])
    }

    /// Introspectable, Peer and Properties (the D-Bus specification), on every object.
    static let standard: Set<Member> = {
        let introspectable = "org.freedesktop.DBus.Introspectable"
        let peer = "org.freedesktop.DBus.Peer"
        let properties = "org.freedesktop.DBus.Properties"
        return [
            method(introspectable, "Introspect", "xml_data:s:out"),
            method(peer, "Ping"),
            method(peer, "GetMachineId", "machine_uuid:s:out"),
            method(properties, "Get", "interface_name:s:in", "property_name:s:in", "value:v:out"),
            method(properties, "GetAll", "interface_name:s:in", "props:a{sv}:out"),
            method(properties, "Set", "interface_name:s:in", "property_name:s:in", "value:v:in"),
            signal(
                properties, "PropertiesChanged", "interface_name:s", "changed_properties:a{sv}",
                "invalidated_properties:as"),
        ]
    }()

    static let service: Set<Member> = {
        let s = "org.freedesktop.Secret.Service"
        return [
            property(s, "Collections", "ao", "read"),
            method(s, "OpenSession", "algorithm:s:in", "input:v:in", "output:v:out", "result:o:out"),
            method(s, "CreateCollection", "properties:a{sv}:in", "alias:s:in", "collection:o:out", "prompt:o:out"),
            method(s, "SearchItems", "attributes:a{ss}:in", "unlocked:ao:out", "locked:ao:out"),
            method(s, "Unlock", "objects:ao:in", "unlocked:ao:out", "prompt:o:out"),
            method(s, "Lock", "objects:ao:in", "locked:ao:out", "Prompt:o:out"),
            method(s, "GetSecrets", "items:ao:in", "session:o:in", "secrets:a{o(oayays)}:out"),
            method(s, "ReadAlias", "name:s:in", "collection:o:out"),
            method(s, "SetAlias", "name:s:in", "collection:o:in"),
            signal(s, "CollectionCreated", "collection:o"),
            signal(s, "CollectionDeleted", "collection:o"),
            signal(s, "CollectionChanged", "collection:o"),
        ]
    }()

    static let collection: Set<Member> = {
        let c = "org.freedesktop.Secret.Collection"
        return [
            property(c, "Items", "ao", "read"),
            property(c, "Label", "s", "readwrite"),
            property(c, "Locked", "b", "read"),
            property(c, "Created", "t", "read"),
            property(c, "Modified", "t", "read"),
            method(c, "Delete", "prompt:o:out"),
            method(c, "SearchItems", "attributes:a{ss}:in", "results:ao:out"),
            method(
                c, "CreateItem", "properties:a{sv}:in", "secret:(oayays):in", "replace:b:in", "item:o:out",
                "prompt:o:out"),
            signal(c, "ItemCreated", "item:o"),
            signal(c, "ItemDeleted", "item:o"),
            signal(c, "ItemChanged", "item:o"),
        ]
    }()

    static let item: Set<Member> = {
        let i = "org.freedesktop.Secret.Item"
        return [
            property(i, "Locked", "b", "read"),
            property(i, "Attributes", "a{ss}", "readwrite"),
            property(i, "Label", "s", "readwrite"),
            property(i, "Created", "t", "read"),
            property(i, "Modified", "t", "read"),
            method(i, "Delete", "Prompt:o:out"),
            method(i, "GetSecret", "session:o:in", "secret:(oayays):out"),
            method(i, "SetSecret", "secret:(oayays):in"),
        ]
    }()

    static let session: Set<Member> = [method("org.freedesktop.Secret.Session", "Close")]

    static let prompt: Set<Member> = {
        let p = "org.freedesktop.Secret.Prompt"
        return [
            method(p, "Prompt", "window-id:s:in"),
            method(p, "Dismiss"),
            signal(p, "Completed", "dismissed:b", "result:v"),
        ]
    }()

    // MARK: - The test

    private func introspect(_ client: SecretServiceClient, _ path: String) throws -> Node {
        let xml = try XCTUnwrap(
            try client.call(path, "org.freedesktop.DBus.Introspectable", "Introspect").first?.string)
        XCTAssertTrue(
            xml.hasPrefix("<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\""), xml)
        return try Parser.parse(xml)
    }

    private func assertMembers(
        _ node: Node, _ expected: Set<Member>, _ path: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let wanted = expected.union(Self.standard)
        for missing in wanted.subtracting(node.members).sorted(by: { $0.description < $1.description }) {
            XCTFail("\(path) lacks \(missing)", file: file, line: line)
        }
        for extra in node.members.subtracting(wanted).sorted(by: { $0.description < $1.description }) {
            XCTFail("\(path) has \(extra), which the specification does not", file: file, line: line)
        }
    }

    func testEveryObjectIntrospectsAsTheSpecificationSays() throws {
        try createKeychain()
        let client = try SecretServiceClient(bus.address)
        let session = try client.openPlainSession()
        let item = try XCTUnwrap(
            try client.call(
                SSPath.login, SSPath.collectionInterface, "CreateItem",
                [
                    .dictionary(keyType: "s", valueType: "v", []), SecretServiceClient.plainSecret(session, "x"),
                    .boolean(false),
                ]
            ).first?.string)

        let service = try introspect(client, SSPath.service)
        assertMembers(service, Self.service, SSPath.service)
        XCTAssertEqual(Set(service.children), ["collection", "aliases", "session", "prompt"])

        for path in [SSPath.login, SSPath.defaultAlias] {
            let collection = try introspect(client, path)
            assertMembers(collection, Self.collection, path)
            XCTAssertEqual(collection.children, [String(item.split(separator: "/").last!)])
        }

        let itemNode = try introspect(client, item)
        assertMembers(itemNode, Self.item, item)
        XCTAssertEqual(itemNode.children, [])

        let sessionNode = try introspect(client, session)
        assertMembers(sessionNode, Self.session, session)
        XCTAssertEqual(sessionNode.children, [])

        XCTAssertEqual(try cli(["lock"]).status, 0)
        let prompt = try XCTUnwrap(
            try client.call(
                SSPath.service, SSPath.serviceInterface, "Unlock",
                [.array(elementType: "o", [.objectPath(SSPath.login)])]
            ).last?.string)
        let promptNode = try introspect(client, prompt)
        assertMembers(promptNode, Self.prompt, prompt)
        XCTAssertEqual(promptNode.children, [])
        try client.call(prompt, SSPath.promptInterface, "Dismiss")

        // The nodes between the service and its objects, for tools that walk the tree.
        for node in ["collection", "aliases", "session", "prompt"] {
            let path = SSPath.service + "/" + node
            let parsed = try introspect(client, path)
            assertMembers(parsed, [], path)
            XCTAssertEqual(parsed.children, [])
        }
    }
}
