import Foundation
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyKeybag

/// The Swift implementation must reproduce every value in Vectors/keybag-v1.json, which was
/// cross-checked against the argon2 CLI and pyca/cryptography (docs/KEYBAG.md, "Test vectors").
final class VectorTests: XCTestCase {
    private func loadVectors() throws -> [[String: Any]] {
        let url = try XCTUnwrap(
            Bundle.module.url(forResource: "keybag-v1", withExtension: "json", subdirectory: "Vectors"))
        let document = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        return try XCTUnwrap(document["vectors"] as? [[String: Any]])
    }

    func testVectorFileCoversCheapAndDefaultParameters() throws {
        let vectors = try loadVectors()
        XCTAssertGreaterThanOrEqual(vectors.count, 3)
        XCTAssertTrue(vectors.contains { ($0["flags"] as? NSNumber)?.intValue == 1 }, "no device-bound vector")
        let parameters = vectors.map { v in
            Argon2Parameters(
                timeCost: (v["time_cost"] as! NSNumber).uint32Value,
                memoryKiB: (v["memory_kib"] as! NSNumber).uint32Value,
                parallelism: (v["parallelism"] as! NSNumber).uint32Value)
        }
        // If the defaults change, the vectors and docs/KEYBAG.md must be regenerated with them.
        XCTAssertTrue(parameters.contains(.default), "no vector uses Argon2Parameters.default")
    }

    func testImplementationReproducesEveryVector() throws {
        for vector in try loadVectors() {
            try check(vector)
        }
    }

    private func check(_ v: [String: Any]) throws {
        func bytes(_ key: String) throws -> [UInt8] { hexBytes(try XCTUnwrap(v[key] as? String, key)) }
        let name = v["name"] as? String ?? "?"
        let passwordBytes = try bytes("password_hex")
        XCTAssertEqual(Array(try XCTUnwrap(v["password_text"] as? String).utf8), passwordBytes, name)
        let parameters = Argon2Parameters(
            timeCost: (v["time_cost"] as! NSNumber).uint32Value,
            memoryKiB: (v["memory_kib"] as! NSNumber).uint32Value,
            parallelism: (v["parallelism"] as! NSNumber).uint32Value)
        var keys: [ProtectionClass: SecretBytes] = [:]
        var nonces: [ProtectionClass: [UInt8]] = [:]
        for c in ProtectionClass.allCases {
            keys[c] = SecretBytes(copying: try bytes("class_key_\(c.rawValue)_hex"))
            nonces[c] = try bytes("nonce_\(c.rawValue)_hex")
        }
        let pw = SecretBytes(copying: passwordBytes)
        // Device-bound vectors (flags 1): the device factor comes from the machine secret and uid.
        var factor: SecretBytes?
        if (v["flags"] as? NSNumber)?.intValue == 1 {
            let derived = try KeyHierarchy.deviceFactor(
                machineSecret: SecretBytes(copying: bytes("machine_secret_hex")),
                uid: (v["uid"] as! NSNumber).uint32Value, keybagID: bytes("id_hex"))
            XCTAssertEqual(hexString(derived.unsafeCopyToArray()), v["device_factor_hex"] as? String, "\(name): DF")
            factor = derived
        }
        let keybag = try Keybag.create(
            password: pw, parameters: parameters, salt: bytes("salt_hex"), id: bytes("id_hex"),
            alwaysSeed: bytes("always_seed_hex"), classKeys: ClassKeys(keys), nonces: nonces,
            deviceFactor: factor)
        XCTAssertEqual(keybag.isDeviceBound, factor != nil)
        XCTAssertEqual(hexString(keybag.serialized()), v["keybag_hex"] as? String, "\(name): keybag file")

        let master = try keybag.deriveMasterKey(password: pw)
        XCTAssertEqual(hexString(master.unsafeCopyToArray()), v["master_key_hex"] as? String, "\(name): M")
        XCTAssertEqual(
            hexString(try KeyHierarchy.verifier(masterKey: master)), v["verifier_hex"] as? String, "\(name): V")
        let seed = SecretBytes(copying: try bytes("always_seed_hex"))
        for c in ProtectionClass.allCases {
            let kek = try KeyHierarchy.kek(
                for: c,
                ikm: KeyHierarchy.kekInput(
                    for: c, base: c.requiresPassword ? master : seed,
                    deviceFactor: factor))
            XCTAssertEqual(
                hexString(kek.unsafeCopyToArray()), v["kek_\(c.rawValue)_hex"] as? String, "\(name): KEK \(c)")
            XCTAssertEqual(
                hexString(keybag.wrappedKeys[c]!), v["wrapped_\(c.rawValue)_hex"] as? String, "\(name): wrapped \(c)")
        }

        // Reading the file back: same value, and both unlock paths return the given class keys.
        let parsed = try Keybag.parse(try bytes("keybag_hex"), path: "vector \(name)")
        XCTAssertEqual(parsed, keybag)
        XCTAssertTrue(parsed.verify(masterKey: master))
        let unlocked = try parsed.unlockPasswordClasses(masterKey: master, deviceFactor: factor)
            .merging(parsed.unlockAlwaysClasses(deviceFactor: factor))
        XCTAssertEqual(unlocked.classes, ProtectionClass.allCases)
        for c in ProtectionClass.allCases {
            XCTAssertTrue(unlocked[c]!.constantTimeEquals(keys[c]!), "\(name): class key \(c)")
        }
    }
}
