import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Python `secretstorage` and `keyring` (from PyPI, in a virtual environment that `scripts/install-deps`
/// prepares) against the agent: a full round trip, and the crossing to SecItem.
final class PythonClientTests: SecretServiceTestCase {
    /// `LATCHKEY_TEST_VENV`, else `.build-venv` in the repository (ignored by git).
    static var venv: String {
        ProcessInfo.processInfo.environment["LATCHKEY_TEST_VENV"] ?? repository + "/.build-venv"
    }

    /// The venv's python with secretstorage and keyring importable; made here if missing. Skips with
    /// the reason when it cannot be made (no python3-venv, no access to PyPI).
    static func python() throws -> String {
        let python = venv + "/bin/python"
        let check = { (try? TestProcess.run(python, ["-c", "import secretstorage, keyring"]))?.status == 0 }
        if check() { return python }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            throw XCTSkip("no /usr/bin/python3 to make \(venv) with")
        }
        let made = try TestProcess.run("/usr/bin/python3", ["-m", "venv", venv])
        guard made.status == 0 else {
            throw XCTSkip("cannot create a virtual environment at \(venv) (apt-get install python3-venv): \(made.err)")
        }
        let installed = try TestProcess.run(
            python,
            [
                "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                "secretstorage", "keyring",
            ])
        guard installed.status == 0, check() else {
            throw XCTSkip("cannot install secretstorage and keyring from PyPI into \(venv): \(installed.err)")
        }
        return python
    }

    private func runPython(_ script: String) throws -> TestProcess.Output {
        let python = try Self.python()
        let path = base + "/client.py"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        return try TestProcess.run(python, [path])
    }

    func testSecretStorageRoundTripWithDHSession() throws {
        _ = try Self.python()
        try createKeychain()
        let result = try runPython(
            """
            import secretstorage
            conn = secretstorage.dbus_init()
            coll = secretstorage.get_default_collection(conn)
            assert coll.get_label() == "Login", coll.get_label()
            assert not coll.is_locked()
            item = coll.create_item("py item", {"service": "py", "account": "me", "extra": "x"}, b"py-secret", replace=True)
            assert item.session is None or item.session.encrypted
            assert item.get_secret() == b"py-secret"
            assert item.get_attributes() == {"service": "py", "account": "me", "extra": "x"}, item.get_attributes()
            assert item.get_label() == "py item"
            found = list(coll.search_items({"service": "py"}))
            assert [f.item_path for f in found] == [item.item_path], found
            assert list(secretstorage.search_items(conn, {"extra": "x"}))[0].item_path == item.item_path
            item.set_label("renamed")
            assert item.get_label() == "renamed"
            item.set_secret(b"second", content_type="application/octet-stream")
            assert item.get_secret() == b"second"
            assert item.get_secret_content_type() == "application/octet-stream"
            # replace=True with the same attributes changes that item; a different set makes another.
            same = coll.create_item("again", {"service": "py", "account": "me", "extra": "x"}, b"third", replace=True)
            assert same.item_path == item.item_path
            other = coll.create_item("other", {"service": "py", "account": "me"}, b"plain", replace=True)
            assert other.item_path != item.item_path
            work = secretstorage.create_collection(conn, "Work", "")
            work.create_item("w", {"a": "b"}, b"w")
            assert [i.get_label() for i in work.get_all_items()] == ["w"]
            work.delete()
            item.delete()
            assert list(coll.search_items({"extra": "x"})) == []
            print("ok")
            """)
        XCTAssertEqual(result.status, 0, result.err + agentLog())
        XCTAssertEqual(result.out, "ok\n")
        // The plain (service, account) item is the SecItem item of that service and account.
        var data: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "py", kSecAttrAccount: "me",
                    kSecReturnData: true,
                ] as NSDictionary, &data), errSecSuccess)
        XCTAssertEqual((data as? Data).map { String(decoding: $0, as: UTF8.self) }, "plain")
    }

    func testKeyringRoundTripAndCrossingToSecItem() throws {
        _ = try Self.python()
        try createKeychain()
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "from-secitem",
                    kSecAttrAccount: "user", kSecValueData: Data("apple".utf8),
                ] as NSDictionary, nil),
            errSecSuccess)
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "rotated-by-keyring",
                    kSecAttrAccount: "user", kSecValueData: Data("old".utf8),
                ] as NSDictionary, nil),
            errSecSuccess)
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "deleted-by-keyring",
                    kSecAttrAccount: "user", kSecValueData: Data("x".utf8),
                ] as NSDictionary, nil),
            errSecSuccess)
        let result = try runPython(
            """
            import keyring
            from keyring.backends import SecretService
            keyring.set_keyring(SecretService.Keyring())
            keyring.set_password("py-service", "py-user", "py-password")
            assert keyring.get_password("py-service", "py-user") == "py-password"
            keyring.set_password("py-service", "py-user", "changed")
            assert keyring.get_password("py-service", "py-user") == "changed"
            # keyring searches {"username", "service"}: the view of an item made through SecItem has
            # "username" as well as "account", so keyring finds it (and so does secretstorage).
            assert keyring.get_password("from-secitem", "user") == "apple"
            cred = keyring.get_credential("from-secitem", None)
            assert (cred.username, cred.password) == ("user", "apple"), (cred.username, cred.password)
            import secretstorage
            conn = secretstorage.dbus_init()
            [seen] = secretstorage.search_items(conn, {"service": "from-secitem", "account": "user"})
            assert seen.get_secret() == b"apple"
            assert seen.get_attributes() == {"service": "from-secitem", "account": "user", "username": "user"}
            # set_password on an account that SecItem made changes that item, not a second one.
            keyring.set_password("rotated-by-keyring", "user", "new")
            assert keyring.get_password("rotated-by-keyring", "user") == "new"
            assert len(list(secretstorage.search_items(conn, {"service": "rotated-by-keyring"}))) == 1
            keyring.delete_password("deleted-by-keyring", "user")
            assert keyring.get_password("deleted-by-keyring", "user") is None
            keyring.set_password("to-delete", "u", "x")
            keyring.delete_password("to-delete", "u")
            assert keyring.get_password("to-delete", "u") is None
            print("ok")
            """)
        XCTAssertEqual(result.status, 0, result.err + agentLog())
        XCTAssertEqual(result.out, "ok\n")
        // keyring's item (application, service, username) is found by SecItem through svce/acct.
        var data: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "py-service",
                    kSecAttrAccount: "py-user", kSecReturnData: true,
                ] as NSDictionary, &data),
            errSecSuccess)
        XCTAssertEqual((data as? Data).map { String(decoding: $0, as: UTF8.self) }, "changed")
        // The SecItem items keyring changed and deleted.
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "rotated-by-keyring",
                    kSecAttrAccount: "user", kSecReturnData: true,
                ] as NSDictionary, &data),
            errSecSuccess)
        XCTAssertEqual((data as? Data).map { String(decoding: $0, as: UTF8.self) }, "new")
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "rotated-by-keyring",
                    kSecAttrAccount: "user", kSecValueData: Data("again".utf8),
                ] as NSDictionary, nil),
            errSecDuplicateItem, "still the one generic password of that service and account")
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "deleted-by-keyring",
                    kSecReturnData: true,
                ] as NSDictionary, &data), errSecItemNotFound)
    }

    func testKeyringUnlocksALockedKeychainThroughThePrompter() throws {
        _ = try Self.python()
        try createKeychain()
        XCTAssertEqual(try cli(["lock"]).status, 0)
        let result = try runPython(
            """
            import keyring
            from keyring.backends import SecretService
            keyring.set_keyring(SecretService.Keyring())
            keyring.set_password("locked-service", "u", "after unlock")
            assert keyring.get_password("locked-service", "u") == "after unlock"
            print("ok")
            """)
        XCTAssertEqual(result.status, 0, result.err + agentLog())
        XCTAssertEqual(result.out, "ok\n")
    }
}
