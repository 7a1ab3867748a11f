import Foundation
import LatchkeySecrets
import LatchkeyTestSupport
import LatchkeyWire
import XCTest

@testable import Latchkey

/// An attacker's review of the access-control slice (issue 13; docs/SECURITY.md), its reproductions
/// kept as regression tests: each failed before its fix. Same setup as AccessControlTests: a root
/// agent, a private PAM directory (pam_exec checking "sesame"), a stand-in pinentry.
final class AccessControlReviewTests: AccessControlTestCase {
    private func openssl(_ arguments: [String]) throws -> String {
        let result = try TestProcess.run("/usr/bin/openssl", arguments)
        XCTAssertEqual(result.status, 0, "openssl \(arguments): \(result.err)")
        return result.out
    }

    /// An EC P-256 key and a self-signed certificate for it, as the attacker makes them.
    private func attackerIdentity() throws -> SecIdentity {
        let key = "\(work)/atk.key", cert = "\(work)/atk.der"
        _ = try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key])
        _ = try openssl([
            "req", "-new", "-x509", "-key", key, "-subj", "/CN=Attacker", "-days", "30", "-outform", "DER", "-out",
            cert,
        ])
        let der = try Data(contentsOf: URL(fileURLWithPath: cert))
        let text = try openssl(["ec", "-in", key, "-noout", "-text"])
        func hexBlock(after label: String) -> [UInt8] {
            guard let range = text.range(of: label) else { return [] }
            var bytes: [UInt8] = []
            for line in text[range.upperBound...].split(separator: "\n") {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                guard trimmed.first?.isHexDigit == true, trimmed.contains(":") || trimmed.count == 2 else { break }
                bytes += trimmed.split(separator: ":").compactMap { UInt8($0, radix: 16) }
            }
            return bytes
        }
        var scalar = hexBlock(after: "priv:")
        while scalar.count > 32, scalar.first == 0 { scalar.removeFirst() }
        scalar = [UInt8](repeating: 0, count: 32 - scalar.count) + scalar
        let point = hexBlock(after: "pub:")
        var error: Unmanaged<CFError>?
        let privateKey = try XCTUnwrap(
            SecKeyCreateWithData(
                Data(point + scalar) as CFData,
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPrivate]
                    as NSDictionary, &error))
        let certificate = try XCTUnwrap(SecCertificateCreateWithData(nil, der as CFData))
        return try XCTUnwrap(SecIdentityCreate(nil, certificate, privateKey))
    }

    /// An identity added with another key's application label and public-key hash must not join that
    /// key: before, SecItemAdd's result (kSecReturnData) was the victim's protected private key, with no
    /// check. The two hashes are derived for an identity now, and the result passes the check too.
    func testAnIdentityAddNeverReturnsAnotherProtectedKey() throws {
        // The victim: a protected, permanent EC key (defaults: extractable).
        var error: Unmanaged<CFError>?
        let control = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, .userPresence], &error)!
        let victim = try XCTUnwrap(
            SecKeyCreateRandomKey(
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
                    kSecPrivateKeyAttrs: [
                        kSecAttrIsPermanent: true, kSecAttrAccessControl: control, kSecAttrLabel: "victim",
                    ],
                ] as CFDictionary, &error), "\(String(describing: error))")
        _ = victim
        // Its attributes need no check: the application label (klbl).
        var found: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [kSecClass: kSecClassKey, kSecAttrLabel: "victim", kSecReturnAttributes: true] as CFDictionary, &found),
            errSecSuccess)
        let attributes = try XCTUnwrap(found as? [String: Any])
        let klbl = try XCTUnwrap(attributes[kSecAttrApplicationLabel as String] as? Data)
        // Sanity: reading its data needs the check (cancelled here).
        try answer()
        XCTAssertEqual(
            SecItemCopyMatching(
                [kSecClass: kSecClassKey, kSecAttrLabel: "victim", kSecReturnData: true] as CFDictionary, nil),
            errSecUserCanceled)
        try? FileManager.default.removeItem(atPath: shown)

        // The attack: add the attacker's own identity, relabelled, and ask for its data back.
        let identity = try attackerIdentity()
        var result: CFTypeRef?
        let status = SecItemAdd(
            [
                kSecValueRef: identity, kSecAttrApplicationLabel: klbl, kSecAttrPublicKeyHash: klbl,
                kSecReturnData: true,
            ] as CFDictionary, &result)
        guard status == errSecSuccess, let stolen = result as? Data else { return }
        let stolenKey = try XCTUnwrap(
            SecKeyCreateWithData(
                stolen as CFData,
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPrivate]
                    as NSDictionary, &error))
        let stolenPublic = SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(stolenKey)!, nil)! as Data
        let victimPublic = SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(victim)!, nil)! as Data
        XCTAssertNotEqual(stolenPublic, victimPublic, "the victim's protected private key was returned")
    }

    /// The prompt never names an executable the agent doubts (another mount namespace here; LD_PRELOAD or
    /// tracing likewise): before, any program could appear as /usr/bin/true.
    func testThePromptDoesNotNameADoubtedExecutable() throws {
        addProtected()
        try answer("sesame")
        try? FileManager.default.removeItem(atPath: shown)
        let cliPath = Self.binDirectory + "/latchkey"
        let result = try TestProcess.run(
            "/usr/bin/unshare",
            [
                "-m", "sh", "-c",
                "mount --bind '\(cliPath)' /usr/bin/true && exec /usr/bin/true find-generic-password -s ac -a guarded -w",
            ])
        let text = try String(contentsOfFile: shown, encoding: .utf8)
        XCTAssertFalse(text.contains("/usr/bin/true"), text)
        XCTAssertTrue(text.contains("SETDESC process "), text)
        XCTAssertEqual(result.out, "s3cret\n", result.err)
    }

    /// kSecUseOperationPrompt loses C1 controls, line and paragraph separators, bidirectional overrides
    /// and zero-width characters, which could make it look like another program's prompt.
    func testThePromptDropsControlsAndInvisibleCharacters() throws {
        addProtected()
        try answer("sesame")
        try? FileManager.default.removeItem(atPath: shown)
        let evil = "\u{9B}2J\u{9B}H\u{85}\u{2028}/usr/bin/firefox wants to sign in.\u{2029}\u{202E}txt.exe\u{200B}"
        let status = SecItemCopyMatching(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "ac", kSecAttrAccount: "guarded",
                kSecReturnData: true, kSecUseOperationPrompt: evil,
            ] as CFDictionary, nil)
        XCTAssertEqual(status, errSecSuccess)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: shown))
        let text = String(decoding: bytes, as: UTF8.self)
        for scalar in ["\u{9B}", "\u{85}", "\u{2028}", "\u{2029}", "\u{202E}", "\u{200B}"] {
            XCTAssertFalse(text.contains(scalar), "U+\(String(scalar.unicodeScalars.first!.value, radix: 16)) passed")
        }
        XCTAssertTrue(text.contains("/usr/bin/firefox wants to sign in."), text)
    }

    /// An access control without a user check (flags [], `.privateKeyUsage` alone, Apple's usual Secure
    /// Enclave flags, or `.applicationPassword` alone) encodes to 15 bytes, which the decoder refused.
    func testAnAccessControlWithoutAUserCheckCanBeUsed() throws {
        for flags: SecAccessControlCreateFlags in [[], .privateKeyUsage, .applicationPassword] {
            var error: Unmanaged<CFError>?
            let made = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, flags, &error)
            let control = try XCTUnwrap(made, "flags \(flags.rawValue)")
            // `.applicationPassword` now seals the secret under the application's password
            // (docs/ACCESS-CONTROL.md §8), which the add brings rather than be asked for it.
            let context = LAContext()
            context.setCredential(Data("app".utf8), type: .applicationPassword)
            let status = SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "ac",
                    kSecAttrAccount: "plain\(flags.rawValue)",
                    kSecAttrAccessControl: control, kSecValueData: Data("x".utf8),
                    kSecUseAuthenticationContext: context,
                ] as CFDictionary, nil)
            XCTAssertEqual(status, errSecSuccess, "flags \(flags.rawValue)")
        }
        var error: Unmanaged<CFError>?
        let usage = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .privateKeyUsage, &error)
        let key = usage.flatMap {
            SecKeyCreateRandomKey(
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
                    kSecPrivateKeyAttrs: [kSecAttrIsPermanent: true, kSecAttrAccessControl: $0],
                ] as CFDictionary, &error)
        }
        XCTAssertNotNil(key, "a privateKeyUsage key: \(String(describing: error?.takeRetainedValue()))")
    }

    /// A program adds a protected item matching the reader's query while each prompt is up: the request
    /// ends in errSecAuthFailed, and the user is no longer asked a last time in vain (three prompts
    /// before, the third one's answer unused).
    func testNoPromptIsShownThatCouldNotBeUsed() throws {
        addProtected("a0")
        // The prompter waits for a go file before each answer, so the test can add an item meanwhile.
        let prompter = work + "/prompter"
        try write(
            """
            #!/bin/sh
            n=0
            echo "OK ready"
            while IFS= read -r line; do
              case "$line" in
                SETDESC*|SETPROMPT*) echo "$line" >> "\(shown)"; echo OK ;;
                GETPIN*)
                  n=$(( $(cat "\(work)/counter" 2>/dev/null || echo 0) + 1 )); echo $n > "\(work)/counter"
                  touch "\(work)/asking.$n"
                  while [ ! -e "\(work)/go.$n" ]; do sleep 0.05; done
                  printf 'D sesame\nOK\n' ;;
                BYE*) echo OK; exit 0 ;;
                *) echo OK ;;
              esac
            done
            """, to: prompter, mode: 0o755)
        let outcome = LockedBox<OSStatus?>(nil)
        let done = expectation(description: "read ends")
        Thread.detachNewThread {
            var result: CFTypeRef?
            let status = SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "ac", kSecMatchLimit: kSecMatchLimitAll,
                    kSecReturnData: true,
                ] as CFDictionary, &result)
            outcome.set(status)
            done.fulfill()
        }
        var prompts = 0
        for n in 1...3 {
            let deadline = Date().addingTimeInterval(10)
            while !FileManager.default.fileExists(atPath: "\(work)/asking.\(n)") && Date() < deadline { usleep(20_000) }
            guard FileManager.default.fileExists(atPath: "\(work)/asking.\(n)") else { break }
            prompts += 1
            // Each prompter process counts from 1: the n-th check starts a new prompter.
            // On a connection of its own (the library's one connection is busy with the read).
            let second = AgentClient()
            let control = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil)!
            let dict = try ValueBridge.dictionary(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "ac", kSecAttrAccount: "a\(n)",
                    kSecAttrAccessControl: control, kSecValueData: Data("x".utf8),
                ] as CFDictionary)
            XCTAssertEqual(second.send(.add(dict)).status, errSecSuccess)
            _ = FileManager.default.createFile(atPath: "\(work)/go.\(n)", contents: nil)
        }
        wait(for: [done], timeout: 30)
        XCTAssertEqual(prompts, 2)
        XCTAssertEqual(outcome.get(), errSecAuthFailed)
    }

    /// A check that takes longer than the library's ordinary 30 s wait: the read waits for the user, as
    /// Apple's does, instead of giving up while the prompt goes on.
    func testTheLibraryWaitsForACheckLongerThanThirtySeconds() throws {
        addProtected()
        setenv("LATCHKEY_PRESENCE_TIMEOUT", "60", 1)
        stopAgent()
        let prompter = work + "/prompter"
        try write(
            """
            #!/bin/sh
            echo "OK ready"
            while IFS= read -r line; do
              case "$line" in
                SETDESC*|SETPROMPT*) echo "$line" >> "\(shown)"; echo OK ;;
                GETPIN*) sleep 35; echo answered >> "\(work)/answered"; printf 'D sesame\nOK\n' ;;
                BYE*) echo OK; exit 0 ;;
                *) echo OK ;;
              esac
            done
            """, to: prompter, mode: 0o755)
        try KeychainControl.unlock(password: SecretBytes(copying: Array("pw".utf8)))
        let start = Date()
        var result: CFTypeRef?
        let status = SecItemCopyMatching(
            [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "guarded", kSecReturnData: true] as CFDictionary,
            &result)
        XCTAssertEqual(status, errSecSuccess, "after \(Date().timeIntervalSince(start)) s")
        XCTAssertEqual((result as? Data).map { String(decoding: $0, as: UTF8.self) }, "s3cret")
    }
}
