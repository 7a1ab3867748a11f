import Foundation
import Latchkey

// `latchkey-bench --keys`, token part: signing with a key on a PKCS#11 token through the agent (SecItem →
// socket → latchkeyd → the module's thread → C_Sign) against `pkcs11-tool --sign` on the same key, each
// run a process of its own (load the module, open a session, log in, sign), which is what a program
// without an agent pays per signature. scripts/bench makes the SoftHSM2 token and names it in
// LATCHKEY_BENCH_TOKEN, LATCHKEY_BENCH_TOKEN_MODULE and LATCHKEY_BENCH_TOKEN_PIN; without them this part
// is skipped. The agent logs in once (its prompter answers the PIN), before the timed signatures.

struct TokenKeyKind {
    var name: String
    var label: String
    var ckaID: String
    var algorithm: SecKeyAlgorithm
    /// pkcs11-tool's mechanism, and whether pkcs11-tool is given the SHA-256 digest (SoftHSM 2.6 has raw
    /// ECDSA only, which is also what the agent uses after hashing).
    var mechanism: String
    var hashFirst: Bool
}

nonisolated(unsafe) let tokenKeyKinds = [
    TokenKeyKind(
        name: "EC P-256 (token)", label: "bench-ec", ckaID: "01", algorithm: .ecdsaSignatureMessageX962SHA256,
        mechanism: "ECDSA", hashFirst: true),
    TokenKeyKind(
        name: "RSA 2048 (token)", label: "bench-rsa", ckaID: "02", algorithm: .rsaSignatureMessagePKCS1v15SHA256,
        mechanism: "SHA256-RSA-PKCS", hashFirst: false),
]

/// The private key labelled `label` on the bench token, waiting for the agent's watcher (10 s at most).
func tokenKey(_ label: String) -> SecKey {
    let query =
        [
            kSecClass: kSecClassKey, kSecAttrAccessGroup: kSecAttrAccessGroupToken, kSecAttrLabel: label,
            kSecAttrKeyClass: kSecAttrKeyClassPrivate, kSecReturnRef: true,
        ] as NSDictionary
    for _ in 0..<100 {
        var found: CFTypeRef?
        if SecItemCopyMatching(query, &found) == errSecSuccess, let found { return found as! SecKey }
        usleep(100_000)
    }
    fail("the token key \(label) did not appear (is the agent loading SoftHSM2? see docs/TOKENS.md)")
}

func runTokenKeyBenchmark(options: Options, machine: String) {
    let environment = ProcessInfo.processInfo.environment
    guard let token = environment["LATCHKEY_BENCH_TOKEN"], let module = environment["LATCHKEY_BENCH_TOKEN_MODULE"],
        let pin = environment["LATCHKEY_BENCH_TOKEN_PIN"]
    else {
        FileHandle.standardError.write(Data("latchkey-bench: no bench token (scripts/bench makes one); skipped\n".utf8))
        return
    }
    let message = Data(repeating: 0x5A, count: 256)
    let files = NSTemporaryDirectory() + "latchkey-bench-token-\(getpid())"
    try? FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: files) }
    var rows: [[String]] = []
    for kind in tokenKeyKinds {
        FileHandle.standardError.write(Data("latchkey-bench: \(kind.name)…\n".utf8))
        let key = tokenKey(kind.label)
        // The login (the agent's prompter answers the PIN), untimed.
        guard SecKeyCreateSignature(key, kind.algorithm, message as CFData, nil) != nil else {
            fail("the first signature with \(kind.label) failed (the PIN?)")
        }
        let ops = Swift.min(options.ops, 300)
        let agent = Summary(sampled(ops) { _ = SecKeyCreateSignature(key, kind.algorithm, message as CFData, nil) })

        let input = files + "/input-\(kind.ckaID)"
        let output = files + "/signature-\(kind.ckaID)"
        FileManager.default.createFile(atPath: input, contents: message)
        if kind.hashFirst {
            // The digest, as the agent hashes before CKM_ECDSA (openssl: Benchmarks links no crypto of its own).
            runOrFail("/usr/bin/openssl", ["dgst", "-sha256", "-binary", "-out", input + ".sha256", input])
            try? FileManager.default.removeItem(atPath: input)
            try? FileManager.default.moveItem(atPath: input + ".sha256", toPath: input)
        }
        let arguments = [
            "--module", module, "--token-label", token, "--login", "--pin", pin, "--sign", "--mechanism",
            kind.mechanism, "--id", kind.ckaID, "--input-file", input, "--output-file", output,
        ]
        let direct = Summary(sampled(Swift.min(ops, 50)) { runOrFail("/usr/bin/pkcs11-tool", arguments) })
        func cell(_ s: Summary) -> String { "\(microseconds(s.p50)) / \(microseconds(s.p99))" }
        rows.append([kind.name, cell(agent), cell(direct)])
    }
    let header = ["token key", "sign through the agent p50 / p99", "pkcs11-tool --sign p50 / p99 (a process each)"]
    print("")
    print("latchkey token keys (SoftHSM2); through the agent: at most 300 signatures; pkcs11-tool: at most 50 runs")
    printTable(rows, header: header)
    print("(\(machine))")
    if options.markdown {
        print("")
        print("| " + header.joined(separator: " | ") + " |")
        print("|" + header.map { _ in "---:" }.joined(separator: "|") + "|")
        for row in rows { print("| " + row.joined(separator: " | ") + " |") }
        print("")
        print("<sub>\(machine); 256-byte message; ECDSA SHA-256 (hashed first), RSA PKCS#1 v1.5 SHA-256.</sub>")
    }
}

/// Runs a tool to its end; the benchmark stops if it fails.
func runOrFail(_ path: String, _ arguments: [String]) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    do {
        try process.run()
    } catch {
        fail("\(path): \(error)")
    }
    process.waitUntilExit()
    if process.terminationStatus != 0 { fail("\(path) \(arguments.joined(separator: " ")) failed") }
}
