import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// `latchkey backup` and `latchkey restore` against real agents and real keychains (docs/BACKUP.md): a
/// keychain backed up, then restored into another one, of another agent, with another password.
final class BackupTests: AgentTestCase {
    private var work = ""
    private let weak = [
        "--argon2-memory", "8", "--argon2-time", "1", "--argon2-parallelism", "1", "--argon2-allow-weak",
    ]

    override func setUpWithError() throws {
        try super.setUpWithError()
        work = NSTemporaryDirectory() + "lk-backup-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: work)
        super.tearDown()
    }

    /// Stops this keychain's agent and points everything at a new keychain (new data and runtime
    /// directories: another agent), created with `password`.
    private func moveToAnotherKeychain(password: String) throws {
        stopAgent()
        AgentClient.shared.resetConnection()
        try setUpWithError()
        try KeychainControl.create(
            password: SecretBytes(copying: Array(password.utf8)),
            options: .init(timeCost: 1, memoryKiB: 8192, parallelism: 1, allowWeak: true))
    }

    private func authorizeEveryGroup(_ password: String) throws {
        try KeychainControl.authorizeAccessGroups(["*"], password: SecretBytes(copying: Array(password.utf8)))
    }

    private func backup(_ file: String, password: String = "pw") throws -> (status: Int32, out: String, err: String) {
        try cli(
            ["backup", "-o", file, "--passphrase-stdin", "--keychain-password-fd", "0"] + weak,
            input: "backup passphrase\n\(password)\n")
    }

    private func restore(
        _ file: String, _ options: [String], password: String, passphrase: String = "backup passphrase"
    )
        throws -> (status: Int32, out: String, err: String)
    {
        try cli(
            ["restore", file, "--passphrase-stdin", "--keychain-password-fd", "0"] + options,
            input: "\(passphrase)\n\(password)\n")
    }

    private func add(_ attributes: [CFString: Any]) {
        XCTAssertEqual(SecItemAdd(attributes as NSDictionary, nil), errSecSuccess, "\(attributes)")
    }

    /// Every item of `itemClass` with its attributes (its data too, except for keys), access control
    /// left out (a SecAccessControl compares by identity), as a set.
    private func snapshot(_ itemClass: CFString) -> Set<NSDictionary> {
        var query: [CFString: Any] = [
            kSecClass: itemClass, kSecMatchLimit: kSecMatchLimitAll, kSecReturnAttributes: true,
            kSecAttrSynchronizable: kSecAttrSynchronizableAny,
        ]
        if itemClass != kSecClassKey { query[kSecReturnData] = true }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as NSDictionary, &result)
        guard status == errSecSuccess, let items = result as? [[String: Any]] else { return [] }
        return Set(
            items.map { item in
                var copy = item
                copy.removeValue(forKey: kSecAttrAccessControl as String)
                return copy as NSDictionary
            })
    }

    private func genp(_ service: String, _ account: String = "me") -> [CFString: Any] {
        [kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: account]
    }

    private func data(_ service: String) -> String? {
        var query = genp(service)
        query[kSecReturnData] = true
        var result: CFTypeRef?
        guard SecItemCopyMatching(query as NSDictionary, &result) == errSecSuccess, let d = result as? Data else {
            return nil
        }
        return String(decoding: d, as: UTF8.self)
    }

    private func count(_ itemClass: CFString = kSecClassGenericPassword) -> Int {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(
            [kSecClass: itemClass, kSecMatchLimit: kSecMatchLimitAll, kSecReturnAttributes: true] as NSDictionary,
            &result)
        return status == errSecSuccess ? (result as? [Any])?.count ?? 0 : 0
    }

    /// An identity (an RSA key and its certificate) imported from a PKCS#12 file made by openssl.
    private func importIdentity() throws {
        let key = work + "/id.key"
        let certificate = work + "/id.crt"
        let p12 = work + "/id.p12"
        for arguments in [
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days", "30",
                "-subj", "/CN=Backup Test",
            ],
            ["pkcs12", "-export", "-inkey", key, "-in", certificate, "-out", p12, "-passout", "pass:p12"],
        ] {
            let result = try TestProcess.run("/usr/bin/openssl", arguments)
            XCTAssertEqual(result.status, 0, result.err)
        }
        let imported = try cli(["import", p12, "-P", "p12"])
        XCTAssertEqual(imported.status, 0, imported.err)
    }

    func testEveryItemClassGroupAttributeAndKeyIsRestoredIntoAnotherKeychain() throws {
        try createKeychain()
        try authorizeEveryGroup("pw")
        add(
            genp("imap").merging([
                kSecAttrAccessGroup: "mail", kSecAttrLabel: "Mail", kSecAttrComment: "a comment",
                kSecAttrDescription: "a description", kSecAttrGeneric: Data([0, 1, 2]),
                kSecValueData: Data("hunter2".utf8),
            ]) { $1 })
        add(
            genp("device").merging([
                kSecAttrAccessible: kSecAttrAccessibleWhenUnlockedThisDeviceOnly, kSecValueData: Data("stays".utf8),
            ]) { $1 })
        add(
            genp("always").merging([
                kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock, kSecValueData: Data("ck".utf8),
            ]) { $1 })
        add([
            kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrAccount: "me",
            kSecAttrProtocol: kSecAttrProtocolHTTPS, kSecAttrPort: 443, kSecAttrAccessGroup: "browser",
            kSecValueData: Data("web".utf8),
        ])
        var error: Unmanaged<CFError>?
        let control = try XCTUnwrap(
            SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleAfterFirstUnlock, [], &error))
        add(genp("controlled").merging([kSecAttrAccessControl: control, kSecValueData: Data("guarded".utf8)]) { $1 })
        let tag = Data("com.example.signing".utf8)
        let key = try XCTUnwrap(
            SecKeyCreateRandomKey(
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
                    kSecPrivateKeyAttrs: [
                        kSecAttrIsPermanent: true, kSecAttrApplicationTag: tag, kSecAttrAccessGroup: "keys",
                    ],
                ] as NSDictionary, &error), "\(String(describing: error))")
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
        let openssl = FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")
        if openssl { try importIdentity() }
        let classes = [kSecClassGenericPassword, kSecClassInternetPassword, kSecClassKey, kSecClassCertificate]
        var before = classes.map(snapshot)
        before[0] = before[0].filter { ($0[kSecAttrService as String] as? String) != "device" }
        XCTAssertEqual(before[0].count, 3)
        XCTAssertEqual(before[2].count, openssl ? 2 : 1)

        let file = work + "/keychain.lkbackup"
        let made = try backup(file)
        // Without the file, a restore would exit before reading its input (and the write to it kill the run).
        guard made.status == 0 else { return XCTFail("backup failed: \(made.err)") }
        XCTAssertEqual(made.out, "backed up \(openssl ? 7 : 5) item(s) to \(file)\n")
        var info = stat()
        XCTAssertEqual(lstat(file, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        XCTAssertNil(bytes.range(of: Data("hunter2".utf8)), "no secret in the clear")

        try moveToAnotherKeychain(password: "other")
        let restored = try restore(file, ["--no-ui"], password: "other")
        XCTAssertEqual(restored.status, 0, restored.err)
        XCTAssertEqual(
            restored.out,
            "restored \(openssl ? 7 : 5) item(s) from \(file): \(openssl ? 7 : 5) added, 0 replaced, 0 skipped\n")
        try authorizeEveryGroup("other")
        XCTAssertEqual(classes.map(snapshot), before, "every item, attribute and group as it was")
        XCTAssertNil(data("device"), "a ThisDeviceOnly item stays on its machine")
        XCTAssertEqual(data("imap"), "hunter2")

        var query = genp("controlled")
        query[kSecReturnAttributes] = true
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query as NSDictionary, &result), errSecSuccess)
        let restoredControl = (result as? [String: Any])?[kSecAttrAccessControl as String]
        XCTAssertNotNil(restoredControl as? SecAccessControl, "the access control came back")

        // The restored private key signs in the new agent; the original public key verifies.
        result = nil
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassKey, kSecAttrApplicationTag: tag, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                    kSecReturnRef: true,
                ] as NSDictionary, &result), errSecSuccess)
        let restoredKey = try XCTUnwrap(result.map { $0 as! SecKey })
        let message = Data("sign me".utf8) as CFData
        let signature = try XCTUnwrap(
            SecKeyCreateSignature(restoredKey, .ecdsaSignatureMessageX962SHA256, message, &error),
            "\(String(describing: error))")
        XCTAssertTrue(SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message, signature, &error))
        if openssl {
            result = nil
            XCTAssertEqual(
                SecItemCopyMatching([kSecClass: kSecClassIdentity, kSecReturnRef: true] as NSDictionary, &result),
                errSecSuccess, "the certificate and its key still make an identity")
            var identityKey: SecKey?
            let identity = try XCTUnwrap(result.map { $0 as! SecIdentity })
            XCTAssertEqual(SecIdentityCopyPrivateKey(identity, &identityKey), errSecSuccess)
            XCTAssertNotNil(
                SecKeyCreateSignature(try XCTUnwrap(identityKey), .rsaSignatureMessagePKCS1v15SHA256, message, &error),
                "\(String(describing: error))")
        }
    }

    /// An item sealed under an application password (docs/ACCESS-CONTROL.md §8) is backed up in its box,
    /// without its password, and opens with the same password after a restore. It must not stop the
    /// backup: any program can add one, and a backup that needed every such password would fail.
    func testAnApplicationPasswordItemTravelsInItsBox() throws {
        try createKeychain()
        func context() -> LAContext {
            let context = LAContext()
            XCTAssertTrue(context.setCredential(Data("open sesame".utf8), type: .applicationPassword))
            return context
        }
        var error: Unmanaged<CFError>?
        let control = try XCTUnwrap(
            SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .applicationPassword, &error))
        add(
            genp("boxed").merging([
                kSecAttrAccessControl: control, kSecValueData: Data("inside".utf8),
                kSecUseAuthenticationContext: context(),
            ]) { $1 })
        add(genp("plain").merging([kSecValueData: Data("p".utf8)]) { $1 })
        let file = work + "/boxed.lkbackup"
        let made = try backup(file)
        XCTAssertEqual(made.status, 0, made.err)
        try moveToAnotherKeychain(password: "other")
        let restored = try restore(file, [], password: "other")
        XCTAssertEqual(restored.status, 0, restored.err)
        XCTAssertEqual(data("plain"), "p")
        var query = genp("boxed")
        query[kSecReturnData] = true
        query[kSecUseAuthenticationUI] = kSecUseAuthenticationUIFail
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query as NSDictionary, &result), errSecInteractionNotAllowed)
        query[kSecUseAuthenticationContext] = context()
        XCTAssertEqual(SecItemCopyMatching(query as NSDictionary, &result), errSecSuccess)
        XCTAssertEqual((result as? Data).map { String(decoding: $0, as: UTF8.self) }, "inside")
    }

    func testDuplicatesAreReplacedSkippedOrFailTheRestoreUnderNoUI() throws {
        try createKeychain()
        for name in ["a", "b"] { add(genp(name).merging([kSecValueData: Data("backup \(name)".utf8)]) { $1 }) }
        let file = work + "/k.lkbackup"
        let made = try backup(file)
        guard made.status == 0 else { return XCTFail("backup failed: \(made.err)") }
        XCTAssertNotEqual(try backup(file).status, 0, "an existing file is kept")
        XCTAssertEqual(
            try cli(
                ["backup", "-o", file, "--force", "--passphrase-stdin", "--keychain-password-fd", "0"] + weak,
                input: "backup passphrase\npw\n"
            ).status, 0, "--force replaces it")

        try moveToAnotherKeychain(password: "pw2")
        add(genp("a").merging([kSecValueData: Data("mine".utf8)]) { $1 })

        let refused = try restore(file, ["--no-ui"], password: "pw2")
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.err.contains("-25299") && refused.err.contains("nothing was restored"), refused.err)
        XCTAssertNil(data("b"), "nothing changed")
        XCTAssertEqual(data("a"), "mine")

        let noTerminal = try restore(file, [], password: "pw2")
        XCTAssertEqual(noTerminal.status, 1, "without --no-ui and no terminal to ask on, it fails the same way")
        XCTAssertTrue(noTerminal.err.contains("--replace or --skip"), noTerminal.err)
        XCTAssertNil(data("b"))

        let skipped = try restore(file, ["--skip"], password: "pw2")
        XCTAssertEqual(skipped.status, 0, skipped.err)
        XCTAssertTrue(skipped.out.contains("1 added, 0 replaced, 1 skipped"), skipped.out)
        XCTAssertEqual(data("a"), "mine")
        XCTAssertEqual(data("b"), "backup b")

        let replaced = try restore(file, ["--replace"], password: "pw2")
        XCTAssertEqual(replaced.status, 0, replaced.err)
        XCTAssertTrue(replaced.out.contains("0 added, 2 replaced, 0 skipped"), replaced.out)
        XCTAssertEqual(data("a"), "backup a")
        XCTAssertEqual(count(), 2)

        let wrongPassword = try restore(file, ["--replace"], password: "pw")
        XCTAssertEqual(wrongPassword.status, 1)
        XCTAssertTrue(wrongPassword.err.contains("-25293"), wrongPassword.err)
    }

    /// Without --replace, --skip or --no-ui each duplicate is asked about on the terminal: a pseudo-terminal
    /// (Python's `pty`, the child's controlling terminal) answers the passphrase, the keychain password (each
    /// once echo is off), "y" for the first duplicate and "n" for the second.
    func testEachDuplicateIsAskedAboutOnTheTerminal() throws {
        try XCTSkipUnless(
            FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"), "python3 drives the terminal")
        try createKeychain()
        for name in ["a", "b", "c"] { add(genp(name).merging([kSecValueData: Data("backup \(name)".utf8)]) { $1 }) }
        let file = work + "/k.lkbackup"
        let made = try backup(file)
        guard made.status == 0 else { return XCTFail("backup failed: \(made.err)") }
        try moveToAnotherKeychain(password: "pw2")
        for name in ["a", "b"] { add(genp(name).merging([kSecValueData: Data("mine \(name)".utf8)]) { $1 }) }

        let driver = """
            import os, pty, select, sys, termios, time
            answers = [("Backup passphrase: ", "backup passphrase", True), ("keychain password", "pw2", True),
                       ("replace it?", "y", False), ("replace it?", "n", False)]
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], sys.argv[1:])
            seen, deadline = b"", time.time() + 60
            def more():
                global seen
                if time.time() > deadline or not select.select([fd], [], [], 1)[0]:
                    return time.time() <= deadline
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    return False
                seen += chunk
                return bool(chunk)
            for prompt, answer, secret in answers:
                while prompt.encode() not in seen:
                    if not more():
                        sys.exit("no prompt %r in %r" % (prompt, seen))
                seen = seen.split(prompt.encode(), 1)[1]
                # A password prompt turns echo off with TCSAFLUSH, which drops input typed before: wait for it.
                while secret and termios.tcgetattr(fd)[3] & termios.ECHO and time.time() < deadline:
                    time.sleep(0.01)
                os.write(fd, (answer + "\\n").encode())
            while more():
                pass
            sys.stdout.write(seen.decode(errors="replace"))
            sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
            """
        let result = try TestProcess.run(
            "/usr/bin/python3", ["-c", driver, Self.binDirectory + "/latchkey", "restore", file])
        XCTAssertEqual(result.status, 0, result.out + result.err)
        XCTAssertTrue(result.out.contains("1 added, 1 replaced, 1 skipped"), result.out + result.err)
        XCTAssertEqual(data("a"), "backup a", "yes: replaced")
        XCTAssertEqual(data("b"), "mine b", "no: kept")
        XCTAssertEqual(data("c"), "backup c", "not a duplicate: added")
    }

    /// Every byte of a small backup flipped, the file cut short, a newer version: refused, with the
    /// keychain as it was.
    func testDamagedTruncatedAndNewerFilesAreRefusedAndChangeNothing() throws {
        try createKeychain()
        add(genp("a").merging([kSecValueData: Data("backup a".utf8)]) { $1 })
        let password = SecretBytes(copying: Array("pw".utf8))
        let passphrase = SecretBytes(copying: Array("phrase".utf8))
        let file = try KeychainControl.backup(
            password: password, passphrase: passphrase,
            options: .init(timeCost: 1, memoryKiB: 8192, parallelism: 1, allowWeak: true)
        ).file
        XCTAssertLessThan(file.count, 400, "a small backup")
        try moveToAnotherKeychain(password: "pw")
        add(genp("kept").merging([kSecValueData: Data("kept".utf8)]) { $1 })

        let key = try KeychainControl.backupKey(for: file, passphrase: passphrase)
        XCTAssertEqual(try KeychainControl.checkRestore(file: file, key: key, password: password).items, 1)
        for position in file.indices {
            var damaged = file
            damaged[position] ^= 0x20
            do {
                let damagedKey = try KeychainControl.backupKey(for: damaged, passphrase: passphrase)
                _ = try KeychainControl.restore(
                    file: damaged, key: damagedKey, password: password, handling: .replaceAll)
                XCTFail("byte \(position) flipped was restored")
            } catch {
                XCTAssertTrue([errSecDecode, errSecAuthFailed].contains(error.status), "byte \(position): \(error)")
            }
        }
        XCTAssertEqual(count(), 1, "nothing was added")
        XCTAssertNil(data("a"))

        let path = work + "/damaged.lkbackup"
        try Data(file.prefix(file.count - 1)).write(to: URL(fileURLWithPath: path))
        let truncated = try restore(path, ["--replace"], password: "pw", passphrase: "phrase")
        XCTAssertEqual(truncated.status, 1)
        XCTAssertTrue(truncated.err.contains("truncated"), truncated.err)
        var newer = file
        newer[9] = 2
        try Data(newer).write(to: URL(fileURLWithPath: path))
        let fromTheFuture = try restore(path, ["--replace"], password: "pw", passphrase: "phrase")
        XCTAssertEqual(fromTheFuture.status, 1)
        XCTAssertTrue(fromTheFuture.err.contains("newer latchkey (format version 2)"), fromTheFuture.err)
        try Data(file).write(to: URL(fileURLWithPath: path))
        let wrongPassphrase = try restore(path, ["--replace"], password: "pw", passphrase: "other")
        XCTAssertEqual(wrongPassphrase.status, 1)
        XCTAssertTrue(wrongPassphrase.err.contains("wrong backup passphrase"), wrongPassphrase.err)
        XCTAssertEqual(count(), 1)
    }
}
