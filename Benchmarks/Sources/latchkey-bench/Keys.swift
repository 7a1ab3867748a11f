import Foundation
import Latchkey

// `latchkey-bench --keys`: what keeping private keys in the agent costs. For each key kind, the same
// signature made with the key in this process and with the key in the keychain (a request to the
// agent), verification, finding the key by tag (SecItemCopyMatching → a SecKey reference), and
// generating a key straight into the keychain.

struct KeyKind {
    var name: String
    var type: CFString
    var bits: Int
    var algorithm: SecKeyAlgorithm
}

nonisolated(unsafe) let keyKinds = [
    KeyKind(
        name: "EC P-256", type: kSecAttrKeyTypeECSECPrimeRandom, bits: 256, algorithm: .ecdsaSignatureMessageX962SHA256),
    KeyKind(
        name: "EC P-384", type: kSecAttrKeyTypeECSECPrimeRandom, bits: 384, algorithm: .ecdsaSignatureMessageX962SHA384),
    KeyKind(name: "RSA 2048", type: kSecAttrKeyTypeRSA, bits: 2048, algorithm: .rsaSignatureMessagePSSSHA256),
    KeyKind(name: "RSA 3072", type: kSecAttrKeyTypeRSA, bits: 3072, algorithm: .rsaSignatureMessagePSSSHA256),
]

/// Times `body` `count` times; nanosecond samples.
func sampled(_ count: Int, _ body: () -> Void) -> [UInt64] {
    (0..<count).map { _ in
        let start = nanoseconds()
        body()
        return nanoseconds() - start
    }
}

func keyOrFail(_ parameters: [CFString: Any], _ what: String) -> SecKey {
    var error: Unmanaged<CFError>?
    guard let key = SecKeyCreateRandomKey(parameters as NSDictionary, &error) else {
        fail("\(what): \(error.map { "\($0.takeRetainedValue())" } ?? "no error")")
    }
    return key
}

func runKeyBenchmark(options: Options, machine: String) {
    let message = Data(repeating: 0x5A, count: 256) as CFData
    var rows: [[String]] = []
    for kind in keyKinds {
        FileHandle.standardError.write(Data("latchkey-bench: \(kind.name)…\n".utf8))
        let generations = kind.type == kSecAttrKeyTypeRSA ? 5 : 50
        var generated: [SecKey] = []
        let generate = Summary(
            sampled(generations) {
                generated.append(
                    keyOrFail(
                        [
                            kSecAttrKeyType: kind.type, kSecAttrKeySizeInBits: kind.bits,
                            kSecPrivateKeyAttrs: [
                                kSecAttrIsPermanent: true,
                                kSecAttrApplicationTag: Data("gen-\(generated.count)".utf8),
                            ],
                        ],
                        "generating a \(kind.name) key in the keychain"))
            })
        let tag = Data("bench-\(kind.name)".utf8)
        let inProcess = keyOrFail(
            [kSecAttrKeyType: kind.type, kSecAttrKeySizeInBits: kind.bits], "generating a \(kind.name) key")
        guard SecItemAdd([kSecValueRef: inProcess, kSecAttrApplicationTag: tag] as NSDictionary, nil) == errSecSuccess
        else {
            fail("adding the \(kind.name) key")
        }
        let query =
            [
                kSecClass: kSecClassKey, kSecAttrApplicationTag: tag, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                kSecReturnRef: true,
            ] as NSDictionary
        var found: CFTypeRef?
        guard SecItemCopyMatching(query, &found) == errSecSuccess, let stored = found.map({ $0 as! SecKey }) else {
            fail("finding the \(kind.name) key by tag")
        }
        let publicKey = SecKeyCopyPublicKey(inProcess)!
        let ops = kind.type == kSecAttrKeyTypeRSA ? Swift.min(options.ops, 300) : options.ops
        var signature: CFData?
        let local = Summary(sampled(ops) { signature = SecKeyCreateSignature(inProcess, kind.algorithm, message, nil) })
        let agent = Summary(sampled(ops) { signature = SecKeyCreateSignature(stored, kind.algorithm, message, nil) })
        guard let signature, SecKeyVerifySignature(publicKey, kind.algorithm, message, signature, nil) else {
            fail("the \(kind.name) signature made in the agent does not verify")
        }
        let verify = Summary(
            sampled(ops) { _ = SecKeyVerifySignature(publicKey, kind.algorithm, message, signature, nil) })
        let lookup = Summary(sampled(ops) { _ = SecItemCopyMatching(query, &found) })
        func cell(_ s: Summary) -> String { "\(microseconds(s.p50)) / \(microseconds(s.p99))" }
        rows.append([
            kind.name, cell(local), cell(agent), microseconds(agent.p50 - local.p50), cell(verify), cell(lookup),
            microseconds(generate.p50),
        ])
    }
    let header = [
        "key", "sign in process p50 / p99", "sign in agent p50 / p99", "agent adds", "verify p50 / p99",
        "find by tag (ref) p50 / p99", "generate into keychain p50",
    ]
    print("latchkey keys end to end; \(options.ops) signatures per kind (RSA: at most 300)")
    printTable(rows, header: header)
    print("(\(machine))")
    if options.markdown {
        print("")
        print("| " + header.joined(separator: " | ") + " |")
        print("|" + header.map { _ in "---:" }.joined(separator: "|") + "|")
        for row in rows { print("| " + row.joined(separator: " | ") + " |") }
        print("")
        print("<sub>\(machine); 256-byte message; ECDSA SHA-256/384, RSA PSS SHA-256.</sub>")
    }
}
