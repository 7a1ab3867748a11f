import LatchkeySecrets

/// Hex helpers for known-answer tests.
func hex(_ string: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var iterator = string.utf8.makeIterator()
    while let high = iterator.next(), let low = iterator.next() {
        bytes.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)!)
    }
    return bytes
}

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}

func hex(_ secret: SecretBytes) -> String { hex(secret.unsafeCopyToArray()) }

func secret(_ bytes: [UInt8]) -> SecretBytes { SecretBytes(copying: bytes) }
