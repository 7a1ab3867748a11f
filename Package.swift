// swift-tools-version:6.0
// latchkey: a session keychain for Linux with Apple's SecItem semantics.
//
// Dependencies point one way (see README "How it works"):
//   LatchkeySecrets <- LatchkeyCrypto <- LatchkeyKeybag <- LatchkeyEngine <- LatchkeyAgent <- latchkeyd
//   LatchkeyModel (pure values) is used by Keybag, Engine, Wire and the public library.
//   LatchkeyStore sees only sealed blobs and keyed hashes; it imports neither crypto nor transport.
//   Latchkey (public library) talks to the agent over LatchkeyWire and never holds a class key.
import PackageDescription

let package = Package(
    name: "latchkey",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "Latchkey", targets: ["Latchkey"]),
        .executable(name: "latchkeyd", targets: ["latchkeyd"]),
        .executable(name: "latchkey", targets: ["latchkey"]),
        // For Benchmarks/ only (store-level timings need the store without the agent); not a supported API.
        .library(name: "LatchkeyStore", targets: ["LatchkeyStore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        // System libraries, wrapped once each.
        .systemLibrary(name: "CArgon2", pkgConfig: "libargon2",
                       providers: [.apt(["libargon2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd",
                       providers: [.apt(["libsystemd-dev"])]),

        .target(name: "LatchkeySecrets"),
        .target(name: "LatchkeyCrypto", dependencies: ["LatchkeySecrets", "COpenSSL", "CArgon2"]),
        .target(name: "LatchkeyModel", dependencies: ["LatchkeySecrets"]),
        .target(name: "LatchkeyKeybag", dependencies: ["LatchkeyCrypto", "LatchkeyModel"]),
        .target(name: "LatchkeyStore", dependencies: ["CSQLite"]),
        // Pure encoding (values <-> bytes, caps, version byte); the engine uses its value codec to seal
        // attributes, so it must stay free of I/O.
        .target(name: "LatchkeyWire", dependencies: ["LatchkeyModel", "LatchkeySecrets"]),
        .target(name: "LatchkeyEngine",
                dependencies: ["LatchkeyModel", "LatchkeyCrypto", "LatchkeyKeybag", "LatchkeyStore", "LatchkeyWire"]),
        // Frames on a socket and the socket's location; shared by the agent and the public library.
        .target(name: "LatchkeyTransport", dependencies: ["LatchkeyWire", "LatchkeySecrets"]),
        .target(name: "CLatchkeySystem"),
        // sd-bus (libsystemd): the D-Bus connection wrapper and the screen-lock/sleep watcher. Knows
        // nothing of keys; the agent turns its events into lock calls.
        .target(name: "LatchkeyDesktop", dependencies: ["CSystemd"]),
        // The freedesktop.org Secret Service on the session bus, backed by the engine (docs/SECRET-SERVICE.md).
        .target(name: "LatchkeySecretService",
                dependencies: ["LatchkeyDesktop", "LatchkeyEngine", "LatchkeyCrypto", "LatchkeyModel", "LatchkeySecrets"]),
        .target(name: "LatchkeyAgent",
                dependencies: ["LatchkeyEngine", "LatchkeyWire", "LatchkeyTransport", "LatchkeyDesktop", "LatchkeySecretService",
                               "CLatchkeySystem"]),
        .executableTarget(name: "latchkeyd", dependencies: ["LatchkeyAgent"]),
        .target(name: "Latchkey", dependencies: ["LatchkeyModel", "LatchkeyWire", "LatchkeyTransport", "LatchkeySecrets",
                                                 "LatchkeyCrypto"]),
        // LatchkeyCrypto only for file formats (PEM, DER, PKCS#8, PKCS#12) in import and export; every
        // keychain operation goes through the public library.
        .executableTarget(name: "latchkey", dependencies: [
            "Latchkey", "LatchkeySecrets", "LatchkeyCrypto",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        .testTarget(name: "LatchkeyCryptoTests", dependencies: ["LatchkeyCrypto"]),
        .testTarget(name: "LatchkeyKeybagTests", dependencies: ["LatchkeyKeybag"],
                    resources: [.copy("Vectors")]),
        .testTarget(name: "LatchkeyStoreTests", dependencies: ["LatchkeyStore"]),
        .testTarget(name: "LatchkeyModelTests", dependencies: ["LatchkeyModel"]),
        .testTarget(name: "LatchkeyWireTests", dependencies: ["LatchkeyWire", "LatchkeyTransport"]),
        .testTarget(name: "LatchkeyEngineTests", dependencies: ["LatchkeyEngine", "LatchkeyStore"]),
        // The agent's pure logic (its lock schedule, with a fake clock); the agent as a process is tested end to end.
        .testTarget(name: "LatchkeyAgentTests", dependencies: ["LatchkeyAgent"]),
        // Test helpers shared by test targets (a private dbus-daemon, ...).
        .target(name: "LatchkeyTestSupport", path: "Tests/LatchkeyTestSupport"),
        .testTarget(name: "LatchkeyEndToEndTests",
                    dependencies: ["Latchkey", "LatchkeyKeybag", "LatchkeyTransport", "LatchkeyWire", "LatchkeyDesktop",
                                   "LatchkeyTestSupport"]),
        .testTarget(name: "LatchkeyDesktopTests", dependencies: ["LatchkeyDesktop", "LatchkeyTestSupport"]),
        // Secret Service against the real agent on a private dbus-daemon: secret-tool, Python secretstorage/keyring.
        .testTarget(name: "LatchkeySecretServiceTests",
                    dependencies: ["Latchkey", "LatchkeyDesktop", "LatchkeySecretService", "LatchkeySecrets",
                                   "LatchkeyTestSupport"]),
        // Real PAM (pamtester, a test user) against pam/pam_latchkey.so and the built agent; needs root.
        .testTarget(name: "LatchkeyPAMTests", dependencies: ["LatchkeyKeybag", "LatchkeyDesktop", "LatchkeyTestSupport"]),
    ]
)
