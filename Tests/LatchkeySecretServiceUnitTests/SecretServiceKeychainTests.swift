import Foundation
import LatchkeyEngineTestSupport
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyEngine
@testable import LatchkeySecretService

/// The Secret Service's collections, aliases and items on the engine (docs/SECRET-SERVICE.md), without D-Bus.
final class SecretServiceKeychainTests: XCTestCase {
    private func attrs(_ pairs: KeyValuePairs<String, String>) -> SecretAttributes {
        SecretAttributes(pairs.map { SecretAttributes.Pair($0.key, $0.value) })!
    }

    private func text(_ s: String, _ type: String = "text/plain") -> SecretServiceSecret {
        SecretServiceSecret(value: Array(s.utf8), contentType: type)
    }

    private let login = SecretServiceKeychain.login

    func testSecretToolStyleItemIsAGenericPasswordForSecItem() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        let made = try ss.createItem(
            in: login, label: "Foo bar", attributes: attrs(["service": "foo", "account": "bar"]),
            secret: text("s3cret"), replace: true)
        XCTAssertTrue(made.created)
        XCTAssertEqual(try kc.copy(genp("foo", "bar", ["r_Data": .bool(true)])), bytes("s3cret"))
        guard case .dictionary(let found)? = try kc.copy(genp("foo", "bar", ["r_Attributes": .bool(true)])) else {
            return XCTFail("no attributes")
        }
        XCTAssertEqual(found["labl"], .string("Foo bar"))
        XCTAssertEqual(found["pdmn"], .string("ak"))
        XCTAssertEqual(found["agrp"], .string("default"))
        XCTAssertNil(found["ss"], "the sealed Secret Service data never reaches SecItem callers")
        // Nor can a SecItem caller write or query it: it is no attribute of the class.
        XCTAssertNotEqual(status { _ = try kc.add(genp("x", "y", ["ss": .string("forged")])) }, 0)
        XCTAssertNotEqual(status { _ = try kc.copy(genp("foo", "bar", ["ss": .string("forged")])) }, 0)
        // The same (service, account) is the same genp item: Apple's uniqueness holds across the APIs.
        XCTAssertEqual(
            status { _ = try kc.add(genp("foo", "bar", ["v_Data": bytes("other")])) }, SecStatus.duplicateItem)
        // And secret-tool storing it again replaces it.
        let again = try ss.createItem(
            in: login, label: "Foo bar", attributes: attrs(["service": "foo", "account": "bar"]),
            secret: text("new"), replace: true)
        XCTAssertEqual(again.id, made.id)
        XCTAssertFalse(again.created)
        XCTAssertEqual(try kc.copy(genp("foo", "bar", ["r_Data": .bool(true)])), bytes("new"))
    }

    /// Access groups hold on the bus too (issue 12): a Secret Service client is an unlisted program, so an
    /// item an application keeps in its own group is found, listed and read through neither search,
    /// the collection's items, nor its path; an item of `default` is.
    func testItemsOfOtherAccessGroupsAreNotReachableThroughTheSecretService() throws {
        let (kc, _) = try makeKeychain()
        let app = Caller(uid: getuid(), pid: 1, accessGroups: ["com.example.mail"], mayUseAnyGroup: false)
        _ = try kc.add(genp("mail", "alice", ["v_Data": bytes("app's")]), caller: app)
        let appRef = try XCTUnwrap(
            kc.copyMatching(genp("mail", "alice", ["r_PersistentRef": .bool(true)]), caller: app)?.dataValue)
        _ = try kc.add(genp("mail", "bob", ["v_Data": bytes("shared")]))
        let ss = kc.secretService
        XCTAssertEqual(try ss.search(attrs(["service": "mail", "account": "alice"])).count, 0)
        XCTAssertEqual(try ss.search(attrs(["service": "mail"])).map(\.collection), [login], "bob's only")
        let listed = try ss.items(in: login)
        XCTAssertEqual(listed.count, 1)
        let id = Array(appRef.suffix(16))
        XCTAssertEqual(status { _ = try ss.secret(id, in: login) }, SecStatus.itemNotFound, "by its path")
        // Locked, it is not counted among the locked matches either.
        kc.lock(all: false)
        XCTAssertEqual(try ss.search(attrs(["service": "mail"])).count, 1)
    }

    func testSecItemItemIsVisibleToSecretService() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.add(genp("mail", "alice", ["v_Data": bytes("pw1"), "labl": .string("Mail")]))
        _ = try kc.add(genp("mail", "bob", ["v_Data": bytes("pw2")]))
        let ss = kc.secretService
        let found = try ss.search(attrs(["service": "mail", "account": "alice"]))
        XCTAssertEqual(found.count, 1)
        XCTAssertEqual(found.first?.collection, login)
        XCTAssertEqual(found.first?.locked, false)
        let id = try XCTUnwrap(found.first?.id)
        let item = try ss.item(id, in: login)
        XCTAssertEqual(item.label, "Mail")
        XCTAssertEqual(item.attributes, attrs(["service": "mail", "account": "alice", "username": "alice"]))
        XCTAssertEqual(item.contentType, "text/plain")
        XCTAssertEqual(item.created, UInt64(Date().timeIntervalSince1970), accuracy: 5)
        XCTAssertEqual(try ss.secret(id, in: login).value, Array("pw1".utf8))
        XCTAssertEqual(try ss.search(attrs(["service": "mail"])).count, 2)
        XCTAssertEqual(try ss.items(in: login).count, 2)
        XCTAssertEqual(try ss.search(attrs(["account": "alice", "extra": "x"])), [])
        // Replacing through Secret Service changes the SecItem item in place.
        let replaced = try ss.createItem(
            in: login, label: "Mail 2", attributes: attrs(["service": "mail", "account": "bob"]),
            secret: text("pw3"), replace: true)
        XCTAssertFalse(replaced.created)
        XCTAssertEqual(try kc.copy(genp("mail", "bob", ["r_Data": .bool(true)])), bytes("pw3"))
        // It keeps its view, `username` included, and its SecItem identity.
        XCTAssertEqual(
            try ss.item(replaced.id, in: login).attributes,
            attrs(["service": "mail", "account": "bob", "username": "bob"]))
        XCTAssertEqual(status { _ = try kc.add(genp("mail", "bob")) }, SecStatus.duplicateItem)
    }

    func testSecItemItemsAreFoundByUsernameAsPythonKeyringSearches() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.add(genp("github", "alice", ["v_Data": bytes("token")]))
        _ = try kc.add(genp("github", "", ["v_Data": bytes("no account")]))
        let ss = kc.secretService
        let found = try ss.search(attrs(["service": "github", "username": "alice"]))
        XCTAssertEqual(found.count, 1)
        XCTAssertEqual(try ss.secret(try XCTUnwrap(found.first).id, in: login).value, Array("token".utf8))
        XCTAssertEqual(try ss.search(attrs(["username": "alice", "account": "alice"])).map(\.id), found.map(\.id))
        XCTAssertEqual(try ss.search(attrs(["username": "bob"])), [])
        // An empty acct has no account and no username in the view.
        let other = try XCTUnwrap(ss.search(attrs(["service": "github"])).first { $0.id != found[0].id })
        XCTAssertEqual(try ss.item(other.id, in: login).attributes, attrs(["service": "github"]))

        // Sealing the view (a label set through Secret Service) keeps the item unique as SecItem's, and a
        // SecItemUpdate of acct moves `username` with `account`.
        try ss.updateItem(found[0].id, in: login, label: "GitHub")
        XCTAssertEqual(status { _ = try kc.add(genp("github", "alice")) }, SecStatus.duplicateItem)
        try kc.update(genp("github", "alice"), ["acct": .string("alice2")])
        XCTAssertEqual(
            try ss.item(found[0].id, in: login).attributes,
            attrs(["service": "github", "account": "alice2", "username": "alice2"]))
        XCTAssertEqual(try ss.search(attrs(["service": "github", "username": "alice2"])).map(\.id), [found[0].id])
        XCTAssertEqual(status { _ = try kc.add(genp("github", "alice2")) }, SecStatus.duplicateItem)
    }

    func testKeyringSetPasswordOverASecItemItemChangesThatItem() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.add(genp("svc", "u", ["v_Data": bytes("old")]))
        let ss = kc.secretService
        let viewed = try XCTUnwrap(ss.search(attrs(["service": "svc", "username": "u"])).first)
        // keyring.set_password("svc", "u", "new"): CreateItem(replace) with keyring's attributes.
        let keyring = attrs(["application": "Python keyring library", "service": "svc", "username": "u"])
        let made = try ss.createItem(
            in: login, label: "Password for 'u' on 'svc'", attributes: keyring,
            secret: text("new"), replace: true)
        XCTAssertFalse(made.created)
        XCTAssertEqual(made.id, viewed.id, "the account's SecItem item, not a second one")
        XCTAssertEqual(try kc.copy(genp("svc", "u", ["r_Data": .bool(true)])), bytes("new"))
        XCTAssertEqual(
            try ss.item(made.id, in: login).attributes,
            attrs(["account": "u", "application": "Python keyring library", "service": "svc", "username": "u"]))
        XCTAssertEqual(try ss.search(attrs(["service": "svc", "username": "u"])).map(\.id), [made.id])
        XCTAssertEqual(try ss.search(attrs(["service": "svc", "account": "u"])).map(\.id), [made.id])
        // It is still the generic password of (svc, u) for SecItem's uniqueness...
        XCTAssertEqual(status { _ = try kc.add(genp("svc", "u")) }, SecStatus.duplicateItem)
        // ...and keyring replacing it again changes it in place (now by its own attributes).
        XCTAssertEqual(
            try ss.createItem(
                in: login, label: "again", attributes: keyring, secret: text("newer"),
                replace: true
            ).id, made.id)
        XCTAssertEqual(try kc.copy(genp("svc", "u", ["r_Data": .bool(true)])), bytes("newer"))
        // replace = false never takes it over.
        XCTAssertTrue(
            try ss.createItem(in: login, label: "", attributes: keyring, secret: text("dup"), replace: false).created)
    }

    func testKeyringStyleItemsMapUsernameToAccountAndKeepTheirOwnIdentity() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        let keyring = attrs(["application": "Python keyring library", "service": "svc", "username": "u"])
        _ = try ss.createItem(
            in: login, label: "Password for 'u' on 'svc'", attributes: keyring, secret: text("k"),
            replace: true)
        XCTAssertEqual(try kc.copy(genp("svc", "u", ["r_Data": .bool(true)])), bytes("k"))
        // Richer Secret Service items never collide with a SecItem item of the same svce/acct...
        XCTAssertEqual(status { _ = try kc.add(genp("svc", "u", ["v_Data": bytes("apple")])) }, 0)
        // ...and a search by `account` does not find an item whose acct came from `username`.
        XCTAssertEqual(try ss.search(attrs(["account": "u", "service": "svc"])).count, 1, "only the SecItem one")
        // The SecItem item's view has `username` too; keyring's own item comes first.
        let byUsername = try ss.search(attrs(["username": "u"]))
        XCTAssertEqual(byUsername.count, 2)
        XCTAssertEqual(try ss.secret(try XCTUnwrap(byUsername.first).id, in: login).value, Array("k".utf8))
        XCTAssertEqual(try ss.search(attrs(["service": "svc"])).count, 2)
    }

    func testReplaceAndDuplicates() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        let nm = attrs(["connection-uuid": "1234", "setting-name": "802-11-wireless-security", "setting-key": "psk"])
        let first = try ss.createItem(in: login, label: "Wi-Fi", attributes: nm, secret: text("a"), replace: false)
        // replace = false with the same attributes: a deliberate duplicate, as gnome-keyring makes.
        let second = try ss.createItem(in: login, label: "Wi-Fi", attributes: nm, secret: text("b"), replace: false)
        XCTAssertTrue(second.created)
        XCTAssertNotEqual(first.id, second.id)
        XCTAssertEqual(try ss.search(nm).map(\.id), [first.id, second.id])
        // replace = true replaces the first exact match.
        let third = try ss.createItem(in: login, label: "Wi-Fi", attributes: nm, secret: text("c"), replace: true)
        XCTAssertEqual(third.id, first.id)
        XCTAssertEqual(try ss.secret(first.id, in: login).value, Array("c".utf8))
        XCTAssertEqual(try ss.secret(second.id, in: login).value, Array("b".utf8))
        // A superset of attributes is another item, and it is found by a subset query.
        var more = nm.setting("extra", "1")
        let fourth = try ss.createItem(in: login, label: "x", attributes: more, secret: text("d"), replace: true)
        XCTAssertTrue(fourth.created)
        XCTAssertEqual(try ss.search(nm).count, 3)
        more = more.setting("extra", nil)
        XCTAssertEqual(more, nm)
        // Plain (service, account) items: a second one with replace = false is a duplicate too.
        let plain = attrs(["service": "p", "account": "q"])
        let p1 = try ss.createItem(in: login, label: "p", attributes: plain, secret: text("1"), replace: false)
        let p2 = try ss.createItem(in: login, label: "p", attributes: plain, secret: text("2"), replace: false)
        XCTAssertNotEqual(p1.id, p2.id)
        XCTAssertEqual(
            try kc.copy(genp("p", "q", ["r_Data": .bool(true)])), bytes("1"), "SecItem sees the older one first")
    }

    func testQueriesWithMoreAttributesThanOneLookupJoins() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        // a and b differ in one pair only, and that pair is the most common one in the keychain, so the
        // lookup (which joins the rarest few) finds both and the per-row probe tells them apart.
        let a = SecretAttributes((0..<20).map { .init("k\($0)", "v") })!
        let b = a.setting("k19", "other")
        for n in 0..<70 {
            _ = try ss.createItem(
                in: login, label: "", attributes: attrs(["k19": "v", "n": "\(n)"]), secret: text(""),
                replace: false)
        }
        let madeA = try ss.createItem(in: login, label: "a", attributes: a, secret: text("a"), replace: true)
        let madeB = try ss.createItem(in: login, label: "b", attributes: b, secret: text("b"), replace: true)
        XCTAssertEqual(try ss.search(a).map(\.id), [madeA.id])
        XCTAssertEqual(try ss.search(b).map(\.id), [madeB.id])
        XCTAssertEqual(try ss.search(a.setting("k19", nil)).count, 2)
        XCTAssertEqual(
            try ss.createItem(in: login, label: "a2", attributes: a, secret: text("a2"), replace: true).id, madeA.id)
        // Locked rows are matched on their hashes alone: every pair is checked there too.
        kc.lock(all: false)
        XCTAssertEqual(try ss.search(a), [SecretServiceItemInfo(id: madeA.id, collection: login, locked: true)])
        XCTAssertEqual(try ss.search(b).map(\.id), [madeB.id])
        // The full 256 pairs of the cap are a valid query.
        let full = SecretAttributes((0..<SecretServiceLimits.maxAttributes).map { .init("k\($0)", "v") })!
        XCTAssertEqual(try ss.search(full), [])
    }

    func testAttributesAreComparedByteForByte() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        XCTAssertEqual(composed, decomposed, "Swift calls them equal")
        _ = try ss.createItem(
            in: login, label: "", attributes: attrs(["n": composed]), secret: text("1"), replace: true)
        _ = try ss.createItem(
            in: login, label: "", attributes: attrs(["n": decomposed]), secret: text("2"), replace: true)
        XCTAssertEqual(try ss.search(attrs(["n": composed])).count, 1)
        XCTAssertEqual(try ss.search(attrs(["n": decomposed])).count, 1)
        XCTAssertNil(SecretAttributes([.init("k", "1"), .init("k", "2")]), "a repeated name is refused")
        XCTAssertNotNil(
            SecretAttributes([.init(composed, "1"), .init(decomposed, "2")]), "different bytes, different names")
    }

    func testSecItemUpdateKeepsTheSecretServiceViewInStep() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        let made = try ss.createItem(
            in: login, label: "l", attributes: attrs(["service": "s", "user": "u", "x": "y"]),
            secret: text("v"), replace: true)
        try kc.update(genp("s", "u"), ["svce": .string("s2"), "acct": .string("u2"), "labl": .string("L2")])
        let item = try ss.item(made.id, in: login)
        XCTAssertEqual(item.attributes, attrs(["service": "s2", "user": "u2", "x": "y"]))
        XCTAssertEqual(item.label, "L2")
        XCTAssertEqual(try ss.search(attrs(["service": "s2", "user": "u2"])).map(\.id), [made.id])
        XCTAssertEqual(try ss.search(attrs(["service": "s"])), [])
        // And the other way: new Secret Service attributes give new svce/acct.
        try ss.updateItem(made.id, in: login, attributes: attrs(["service": "s3", "account": "a3"]))
        XCTAssertEqual(try kc.copy(genp("s3", "a3", ["r_Data": .bool(true)])), bytes("v"))
        XCTAssertEqual(status { _ = try kc.copy(genp("s2", "u2")) }, SecStatus.itemNotFound)
        try ss.updateItem(made.id, in: login, label: "L3", secret: text("w", "application/octet-stream"))
        XCTAssertEqual(try ss.secret(made.id, in: login).contentType, "application/octet-stream")
        XCTAssertEqual(try ss.item(made.id, in: login).label, "L3")
        XCTAssertGreaterThanOrEqual(try ss.item(made.id, in: login).modified, try ss.item(made.id, in: login).created)
    }

    func testCollectionsAliasesAndDeletion() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        // The initial state, but for login's dates: the keychain's creation time (issue 11), not 0.
        let initial = try ss.state()
        XCTAssertEqual(initial.collections.map(\.id), [login])
        XCTAssertEqual(initial.collections.map(\.label), ["Login"])
        XCTAssertEqual(initial.aliases, SecretServiceState.initial.aliases)
        XCTAssertEqual(
            Double(try XCTUnwrap(initial.collections.first?.created)), Date().timeIntervalSince1970, accuracy: 60)
        let (work, created) = try ss.createCollection(label: "Work stuff!", alias: "")
        XCTAssertTrue(created)
        XCTAssertEqual(work.id, "Work_stuff_")
        XCTAssertEqual(try ss.createCollection(label: "Work stuff!", alias: "").collection.id, "Work_stuff__2")
        let w = try ss.createItem(
            in: work.id, label: "w", attributes: attrs(["service": "s", "account": "a"]),
            secret: text("work"), replace: true)
        let l = try ss.createItem(
            in: login, label: "l", attributes: attrs(["service": "s", "account": "a"]),
            secret: text("login"), replace: true)
        XCTAssertNotEqual(w.id, l.id, "the same attributes in another collection are another item")
        XCTAssertEqual(try ss.search(attrs(["service": "s"]), in: work.id).map(\.id), [w.id])
        XCTAssertEqual(try ss.search(attrs(["service": "s"]), in: login).map(\.id), [l.id])
        XCTAssertEqual(Set(try ss.search(attrs(["service": "s"])).map(\.collection)), [login, work.id])
        XCTAssertEqual(try ss.items(in: work.id).map(\.id), [w.id])
        XCTAssertEqual(try ss.items(in: login).map(\.id), [l.id])
        XCTAssertNil(try ss.info(item: w.id, in: login))
        XCTAssertNotNil(try ss.info(item: w.id, in: work.id))
        XCTAssertEqual(status { _ = try ss.secret(w.id, in: login) }, SecStatus.itemNotFound)
        // SecItem sees both (one keychain); SecItemAdd of (s, a) collides with the login one only.
        XCTAssertEqual(status { _ = try kc.add(genp("s", "a")) }, SecStatus.duplicateItem)

        try ss.setAlias("default", to: work.id)
        XCTAssertEqual(try ss.state().aliases["default"], work.id)
        XCTAssertEqual(try ss.createCollection(label: "ignored", alias: "default").collection.id, work.id)
        try ss.setLabel("Work", ofCollection: work.id)
        XCTAssertEqual(try ss.state().collection(work.id)?.label, "Work")
        XCTAssertEqual(status { try ss.setAlias("bad/alias", to: work.id) }, SecStatus.param)

        XCTAssertEqual(status { _ = try ss.deleteCollection(login) }, SecStatus.unimplemented)
        XCTAssertEqual(try ss.deleteCollection(work.id), [w.id])
        XCTAssertNil(try ss.state().collection(work.id))
        XCTAssertNil(try ss.state().aliases["default"], "the alias went with its collection")
        XCTAssertEqual(try ss.items(in: login).map(\.id), [l.id])
        XCTAssertEqual(status { _ = try ss.items(in: work.id) }, SecStatus.itemNotFound)

        // The state survives a restart of the agent (a new engine on the same files).
        let reopened = Keychain(location: kc.location)
        try reopened.unlock(password: secret("pw"))
        XCTAssertEqual(try reopened.secretService.state().collections.map(\.id), [login, "Work_stuff__2"])
    }

    func testLockedBehaviour() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        let made = try ss.createItem(
            in: login, label: "l", attributes: attrs(["service": "s", "account": "a"]),
            secret: text("v"), replace: true)
        _ = try kc.add(genp("ck", "a", ["v_Data": bytes("ck"), "pdmn": .string("ck")]))
        XCTAssertEqual(ss.lockState(), SecretServiceLockState(collectionsLocked: false, searchable: true))

        kc.lock(all: false)
        XCTAssertEqual(ss.lockState(), SecretServiceLockState(collectionsLocked: true, searchable: true))
        XCTAssertEqual(
            try ss.search(attrs(["service": "s"])),
            [SecretServiceItemInfo(id: made.id, collection: login, locked: true)])
        XCTAssertEqual(try ss.info(item: made.id, in: login)?.locked, true)
        XCTAssertEqual(status { _ = try ss.secret(made.id, in: login) }, SecStatus.interactionNotAllowed)
        XCTAssertEqual(status { _ = try ss.item(made.id, in: login) }, SecStatus.interactionNotAllowed)
        XCTAssertEqual(
            status {
                _ = try ss.createItem(
                    in: login, label: "", attributes: attrs(["x": "y"]),
                    secret: text(""), replace: false)
            },
            SecStatus.interactionNotAllowed)
        XCTAssertEqual(status { try ss.updateItem(made.id, in: login, label: "x") }, SecStatus.interactionNotAllowed)
        // An AfterFirstUnlock item made through SecItem stays readable after a screen lock.
        let ck = try XCTUnwrap(ss.search(attrs(["service": "ck"])).first)
        XCTAssertFalse(ck.locked)
        XCTAssertEqual(try ss.secret(ck.id, in: login).value, Array("ck".utf8))
        // Deleting works while locked, as SecItemDelete does.
        try ss.deleteItem(made.id, in: login)
        XCTAssertNil(try ss.info(item: made.id, in: login))

        // After `lock --all` the Secret Service still evaluates searches (its lookup keys stay, issue 11):
        // the AfterFirstUnlock item is found, as locked; nothing can be read.
        kc.lock(all: true)
        XCTAssertEqual(ss.lockState(), SecretServiceLockState(collectionsLocked: true, searchable: true))
        XCTAssertEqual(try ss.search(attrs(["service": "ck"])).map(\.locked), [true])
        XCTAssertEqual(status { _ = try ss.secret(ck.id, in: login) }, SecStatus.interactionNotAllowed)
        XCTAssertEqual(try ss.state().collections.map(\.id), [login])

        try kc.unlock(password: secret("pw"))
        XCTAssertEqual(try ss.search(attrs(["service": "ck"])).map(\.locked), [false])

        // An engine that never had the password holds no lookup key: searches cannot be evaluated.
        let fresh = Keychain(location: kc.location).secretService
        XCTAssertEqual(fresh.lockState(), SecretServiceLockState(collectionsLocked: true, searchable: false))
        XCTAssertEqual(status { _ = try fresh.search(attrs(["service": "ck"])) }, SecStatus.interactionNotAllowed)
    }

    /// The lookup keys kept after `lock --all` only read: aliases, collections and a collection's items
    /// cannot be changed or deleted with them (an attacker's review of issue 11 found all three worked).
    func testKeptLookupKeysDoNotWrite() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        let (work, _) = try ss.createCollection(label: "Work", alias: "")
        let item = try ss.createItem(
            in: work.id, label: "w", attributes: attrs(["service": "s"]), secret: text("work"), replace: false)
        try ss.setAlias("default", to: work.id)
        kc.lock(all: true)
        XCTAssertEqual(try ss.search(attrs(["service": "s"]), in: work.id).map(\.locked), [true], "still searchable")
        XCTAssertEqual(status { try ss.setAlias("default", to: login) }, SecStatus.interactionNotAllowed)
        XCTAssertEqual(status { try ss.setAlias("default", to: nil) }, SecStatus.interactionNotAllowed)
        XCTAssertEqual(status { try ss.setAlias("other", to: work.id) }, SecStatus.interactionNotAllowed)
        XCTAssertEqual(status { _ = try ss.deleteCollection(work.id) }, SecStatus.interactionNotAllowed)
        XCTAssertEqual(status { try ss.setLabel("x", ofCollection: work.id) }, SecStatus.interactionNotAllowed)
        XCTAssertEqual(status { _ = try ss.createCollection(label: "New", alias: "") }, SecStatus.interactionNotAllowed)

        try kc.unlock(password: secret("pw"))
        XCTAssertEqual(try ss.state().aliases["default"], work.id, "nothing changed while locked")
        XCTAssertEqual(try ss.state().collections.map(\.id), [login, work.id])
        XCTAssertEqual(try ss.secret(item.id, in: work.id).value, Array("work".utf8))
    }

    /// Before the first unlock there is no lookup key: even an empty query cannot be evaluated, so it does
    /// not list (and count) every item as locked.
    func testAnEmptySearchBeforeTheFirstUnlockListsNothing() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.secretService.createItem(
            in: login, label: "a", attributes: attrs(["service": "a"]), secret: text("a"), replace: false)
        let fresh = Keychain(location: kc.location).secretService
        XCTAssertEqual(status { _ = try fresh.search(SecretAttributes()) }, SecStatus.interactionNotAllowed)
    }

    func testCapsAreEnforced() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        let many = SecretAttributes((0...SecretServiceLimits.maxAttributes).map { .init("k\($0)", "v") })!
        XCTAssertEqual(
            status {
                _ = try ss.createItem(
                    in: login, label: "", attributes: many, secret: text(""),
                    replace: false)
            }, SecStatus.param)
        XCTAssertEqual(status { _ = try ss.search(many) }, SecStatus.param)
        let long = String(repeating: "x", count: SecretServiceLimits.maxStringBytes + 1)
        XCTAssertEqual(
            status {
                _ = try ss.createItem(
                    in: login, label: long, attributes: attrs(["a": "b"]),
                    secret: text(""), replace: false)
            }, SecStatus.param)
        XCTAssertEqual(
            status {
                _ = try ss.createItem(
                    in: login, label: "", attributes: attrs(["a": long]),
                    secret: text(""), replace: false)
            }, SecStatus.param)
        let big = SecretServiceSecret(
            value: [UInt8](repeating: 1, count: SecretServiceLimits.maxSecretBytes + 1),
            contentType: "x")
        XCTAssertEqual(
            status {
                _ = try ss.createItem(
                    in: login, label: "", attributes: attrs(["a": "b"]),
                    secret: big, replace: false)
            }, SecStatus.param)
        XCTAssertEqual(
            status {
                _ = try ss.createItem(
                    in: "nope", label: "", attributes: attrs(["a": "b"]),
                    secret: text(""), replace: false)
            }, SecStatus.itemNotFound)
    }

    func testNoAttributeNameOrValueReachesTheDisk() throws {
        let (kc, directory) = try makeKeychain()
        let ss = kc.secretService
        let markers = [
            "NAME-MARKER-5d1c", "VALUE-MARKER-b7e2", "LABEL-MARKER-0a9f", "SECRET-MARKER-3c44",
            "SERVICE-MARKER-61aa", "COLLECTION-MARKER-9e07",
        ]
        let work = try ss.createCollection(label: markers[5], alias: "").collection
        _ = try ss.createItem(
            in: work.id, label: markers[2],
            attributes: attrs([markers[0]: markers[1], "service": markers[4]]),
            secret: text(markers[3]), replace: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            let contents = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
            for marker in markers {
                XCTAssertNil(contents.range(of: Data(marker.utf8)), "\(marker) found in \(name)")
            }
        }
    }

    func testRowsFromBeforeTheUsernameViewAreReindexedOnce() throws {
        let (kc, directory) = try makeKeychain()
        _ = try kc.add(genp("old", "alice", ["v_Data": bytes("1")]))
        let ss = kc.secretService
        XCTAssertEqual(try ss.search(attrs(["username": "alice"])).count, 1)
        // Make the database what the previous mapping (index version 1) left: no `username` hashes,
        // no index version recorded.
        let indexKey = try XCTUnwrap(kc.lockState.keys.indexKey)
        let hash = try SecretServiceMapping.pairHash(.init("username", "alice"), indexKey: indexKey)
        let sql =
            "DELETE FROM item_index WHERE hash = X'\(hash.map { String(format: "%02x", $0) }.joined())'; "
            + "DELETE FROM ss_state WHERE name = 'index-version';"
        let database = KeychainLocation(directory: directory).databasePath
        let sqlite = try TestShell.run("/usr/bin/sqlite3", [database, sql])
        XCTAssertEqual(sqlite.status, 0, sqlite.err)

        let restarted = Keychain(location: kc.location)
        try restarted.unlock(password: secret("pw"))
        XCTAssertEqual(try restarted.secretService.search(attrs(["username": "alice"])).count, 1)
        let recorded = try TestShell.run(
            "/usr/bin/sqlite3",
            [
                database,
                "SELECT hex(value) FROM ss_state WHERE name = 'index-version'; SELECT count(*) FROM ss_reindex;",
            ])
        XCTAssertEqual(recorded.out, "00000002\n0\n", "recorded once; nothing left to re-index")
    }

    func testRowsFromBeforeSecretServiceAreReindexedWhenTheirKeyIsHeld() throws {
        let (kc, directory) = try makeKeychain()
        _ = try kc.add(genp("old", "ak", ["v_Data": bytes("1")]))
        _ = try kc.add(genp("old", "dk", ["v_Data": bytes("2"), "pdmn": .string("dk")]))
        // Make the database what a v1-only latchkey left: no S hashes, no v2 tables or migration row.
        let indexKey = try XCTUnwrap(kc.lockState.keys.indexKey)
        let sHashes = try [("service", "old"), ("account", "ak"), ("account", "dk")].map {
            try SecretServiceMapping.pairHash(.init($0.0, $0.1), indexKey: indexKey)
        }
        let hex = sHashes.map { "X'" + $0.map { String(format: "%02x", $0) }.joined() + "'" }.joined(separator: ",")
        let sql =
            "DELETE FROM item_index WHERE hash IN (\(hex)); DROP TABLE ss_state; DROP TABLE ss_reindex; "
            + "DELETE FROM migrations WHERE name = 'v2-secret-service';"
        let sqlite = try TestShell.run("/usr/bin/sqlite3", [KeychainLocation(directory: directory).databasePath, sql])
        XCTAssertEqual(sqlite.status, 0, sqlite.err)

        // A restarted agent: only the Always classes until the password is given.
        let restarted = Keychain(location: kc.location)
        let ss = restarted.secretService
        XCTAssertEqual(status { _ = try ss.search(attrs(["service": "old"])) }, SecStatus.interactionNotAllowed)
        try restarted.unlock(password: secret("pw"))
        restarted.lock(all: false)  // ak locked: its row stays pending, the dk row is re-indexed
        XCTAssertEqual(try ss.search(attrs(["service": "old"])).count, 1)
        try restarted.unlock(password: secret("pw"))
        XCTAssertEqual(try ss.search(attrs(["service": "old"])).count, 2)
        XCTAssertEqual(try ss.search(attrs(["account": "ak"])).map(\.locked), [false])
    }
}

/// Runs a system tool and collects its output (these unit tests do not depend on the shared test support).
enum TestShell {
    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let o = out.fileHandleForReading.readDataToEndOfFile(), e = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }
}
