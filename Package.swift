// swift-tools-version:6.0
// latchkey: a session keychain for Linux with Apple's SecItem semantics.
//
// Dependencies point one way (see README "How it works"):
//   LatchkeySecrets <- LatchkeyCrypto <- LatchkeyKeybag <- LatchkeyEngine <- LatchkeySecretService <- LatchkeyAgent
//     <- latchkeyd
//   LatchkeyModel (pure values) is used by Keybag, Engine, Wire and the public library.
//   LatchkeyCodec (pure: values <-> bytes) is the value encoding of the agent protocol (LatchkeyWire) and of the
//   sealed attributes at rest (LatchkeyEngine, docs/STORE.md); the engine never imports LatchkeyWire.
//   LatchkeyStore sees only sealed blobs and keyed hashes; it imports neither crypto nor transport.
//   LatchkeyEngine: `Keychain` is its front; `LockState` holds the keybag and class keys; `RequestGate` puts
//     every item request (socket or Secret Service) to the `AccessPolicy` once; `ItemRules`, `Identities` and
//     `KeyOperations` are SecItem over sealed rows; `SecretServiceStorage` is how Secret Service items and
//     state are sealed and indexed, the engine's only API for LatchkeySecretService.
//   LatchkeySecretService: the collections, aliases and object paths, and the D-Bus objects.
//   Only `Latchkey` is a library product for applications: what modules share only among themselves is
//     `package`, not `public`. Still `public`: LatchkeySecrets (`SecretBytes` is in KeychainControl's API)
//     and LatchkeyStore (a product for Benchmarks/ only).
//   Latchkey (public library) talks to the agent over LatchkeyWire and never holds a class key.
//   LatchkeySystem (the lock, the condition, the thread starter, the environment, small files and local
//   sockets on swift-system) imports nothing of ours, so any module may use it, LatchkeySecrets included.
//   LatchkeyDBus (sd-bus) <- LatchkeyDesktop (the screen-lock watcher) <- LatchkeyAgent; LatchkeySecretService
//   imports only the binding. The agent's socket server imports neither.
//   LatchkeyTokens (PKCS#11 modules through p11-kit, CP11Kit) <- LatchkeyAgent: the engine knows tokens only as
//     its `TokenSource` protocol and `TokenItem` values (docs/TOKENS.md).
import PackageDescription

// swift-system's module, for the targets that name FileDescriptor, FilePath or Errno themselves.
let systemPackage = Target.Dependency.product(name: "SystemPackage", package: "swift-system")

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
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // 1.7.0: FileDescriptor.stat() and FilePath.stat(followTargetSymlink:).
        .package(url: "https://github.com/apple/swift-system", from: "1.7.0"),
    ],
    targets: [
        // System libraries, wrapped once each.
        .systemLibrary(
            name: "CArgon2", pkgConfig: "libargon2",
            providers: [.apt(["libargon2-dev"])]),
        .systemLibrary(
            name: "COpenSSL", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]),
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(
            name: "CSystemd", pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]),
        // Linux-PAM, for the agent's user checks (kSecAttrAccessControl, docs/ACCESS-CONTROL.md).
        .systemLibrary(
            name: "CPAM", pkgConfig: "pam",
            providers: [.apt(["libpam0g-dev"])]),
        // p11-kit and its pkcs11.h: the PKCS#11 modules of smart cards and tokens (docs/TOKENS.md).
        .systemLibrary(
            name: "CP11Kit", pkgConfig: "p11-kit-1",
            providers: [.apt(["libp11-kit-dev"])]),
        // The keybag's Argon2id limits: pam/keybag_limits.h, the one definition the PAM module and the
        // agent both read (a module map only; nothing to link).
        .systemLibrary(name: "CKeybagLimits"),

        // System primitives: Locked (the one plain lock) and Monitor (lock and condition), startDetachedThread,
        // Environment, and on swift-system Files (no-follow reads, atomic replacement, FileIdentity) and
        // LocalSocket. Imports nothing of ours.
        .target(name: "LatchkeySystem", dependencies: [systemPackage]),
        .target(name: "LatchkeySecrets", dependencies: ["LatchkeySystem"]),
        .target(name: "LatchkeyCrypto", dependencies: ["LatchkeySecrets", "COpenSSL", "CArgon2", "CKeybagLimits"]),
        .target(name: "LatchkeyModel", dependencies: ["LatchkeySecrets"]),
        .target(
            name: "LatchkeyKeybag",
            dependencies: ["LatchkeyCrypto", "LatchkeyModel", "LatchkeySystem", systemPackage]),
        .target(name: "LatchkeyStore", dependencies: ["CSQLite"]),
        // Which application is calling and what it is entitled to (issue 12): the caller's identity as the
        // kernel vouches for it, and the application files (applications.d) that grant access groups.
        // Used by the agent (to give each connection its groups) and the CLI (`latchkey apps`).
        // CLatchkeySystem for the pidfd a caller is confirmed through.
        .target(name: "LatchkeyApplications", dependencies: ["LatchkeySystem", "CLatchkeySystem", systemPackage]),
        // The value encoding (SecValue <-> bytes, its caps): the protocol's values and the store's sealed
        // attributes (docs/PROTOCOL.md §3, docs/STORE.md). Pure, so both formats can share it.
        .target(name: "LatchkeyCodec", dependencies: ["LatchkeyModel"]),
        // The agent protocol (requests and responses <-> bytes, caps, version byte); pure, no I/O.
        .target(name: "LatchkeyWire", dependencies: ["LatchkeyCodec", "LatchkeyModel", "LatchkeySecrets"]),
        .target(
            name: "LatchkeyEngine",
            dependencies: [
                "LatchkeyModel", "LatchkeyCodec", "LatchkeyCrypto", "LatchkeyKeybag", "LatchkeyStore",
                "LatchkeySystem", systemPackage,
            ]),
        // Frames on a socket and the socket's location; shared by the agent and the public library.
        .target(
            name: "LatchkeyTransport",
            dependencies: ["LatchkeyWire", "LatchkeySecrets", "LatchkeySystem", systemPackage]),
        .target(name: "CLatchkeySystem"),
        // The D-Bus binding on sd-bus (libsystemd): connections with their loop threads, messages and values,
        // and objects served from method tables. Knows nothing of keys or of the desktop.
        .target(name: "LatchkeyDBus", dependencies: ["CSystemd", "LatchkeySystem"]),
        // The screen-lock and sleep watcher (logind, screen savers) on the binding. Knows nothing of keys;
        // the agent turns its events into lock calls.
        .target(
            name: "LatchkeyDesktop",
            dependencies: ["LatchkeyDBus", "LatchkeySystem", .product(name: "Logging", package: "swift-log")]),
        // The freedesktop.org Secret Service on the session bus (docs/SECRET-SERVICE.md): collections, aliases,
        // object paths and D-Bus objects; the engine stores and indexes its items (SecretServiceStorage).
        .target(
            name: "LatchkeySecretService",
            dependencies: [
                "LatchkeyDBus", "LatchkeySystem", "LatchkeyEngine", "LatchkeyCrypto", "LatchkeyModel",
                "LatchkeySecrets", "LatchkeyApplications", "CLatchkeySystem",
                .product(name: "Logging", package: "swift-log"), systemPackage,
            ]),
        // The agent's swift-log backend: its one-line format and the size cap on agent.log. Libraries take a
        // Logger; only latchkeyd bootstraps this handler.
        .target(
            name: "LatchkeyLog",
            dependencies: ["LatchkeySystem", .product(name: "Logging", package: "swift-log"), systemPackage]),
        // Smart cards and tokens over PKCS#11 (docs/TOKENS.md): the modules, their sessions on threads of their
        // own, the watcher, and the token items and key operations the engine asks for (TokenSource).
        .target(
            name: "LatchkeyTokens",
            dependencies: [
                "CP11Kit", "LatchkeyEngine", "LatchkeyModel", "LatchkeyCrypto", "LatchkeySecrets", "LatchkeySystem",
                .product(name: "Logging", package: "swift-log"), systemPackage,
            ]),
        .target(
            name: "LatchkeyAgent",
            dependencies: [
                "LatchkeyEngine", "LatchkeyCodec", "LatchkeyWire", "LatchkeyTransport", "LatchkeyDesktop",
                "LatchkeySecretService", "LatchkeyTokens", "LatchkeySystem", "CLatchkeySystem", "LatchkeyLog",
                "LatchkeyApplications", "CPAM", .product(name: "Logging", package: "swift-log"), systemPackage,
            ]),
        .executableTarget(name: "latchkeyd", dependencies: ["LatchkeyAgent"]),
        .target(
            name: "Latchkey",
            dependencies: [
                "LatchkeyModel", "LatchkeyWire", "LatchkeyTransport", "LatchkeySecrets",
                "LatchkeyCrypto", "LatchkeySystem", "CLatchkeySystem", systemPackage,
            ]),
        // LatchkeyCrypto only for file formats (PEM, DER, PKCS#8, PKCS#12) in import and export, and for
        // the encrypted Secret Service session of `latchkey migrate`; every keychain operation goes through
        // the public library.
        .executableTarget(
            name: "latchkey",
            dependencies: [
                "Latchkey", "LatchkeySecrets", "LatchkeyCrypto", "LatchkeyApplications",
                // `latchkey migrate` reads another Secret Service provider over D-Bus (LatchkeyDBus, whose
                // loop thread it waits on with LatchkeySystem's Monitor); it writes only through the agent.
                "LatchkeyDBus", "LatchkeySystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),

        // The fuzz targets (a client's bytes into the agent's frame reader, request decoder and DictionaryParser;
        // a dictionary into DictionaryParser alone; a backup file into the restore's reader): libFuzzer's entry point in the build scripts/fuzz makes,
        // a replay and seed tool in the ordinary build. The corpus is fuzz/corpus.
        .executableTarget(
            name: "latchkey-fuzz",
            dependencies: [
                "LatchkeyWire", "LatchkeyTransport", "LatchkeyCodec", "LatchkeyModel", "LatchkeySecrets",
                "LatchkeyCrypto",
                "LatchkeyEngine",
            ],
            path: "fuzz/latchkey-fuzz"),

        // A small application of the public library: the access-group tests install copies of it as
        // different applications (one SecItem call per run).
        .executableTarget(name: "latchkey-probe", dependencies: ["Latchkey"], path: "Tests/LatchkeyProbe"),
        // Calls the Secret portal backend as xdg-desktop-portal does (PortalTests install it root-owned).
        .executableTarget(
            name: "latchkey-portal-probe", dependencies: ["LatchkeyDBus"], path: "Tests/LatchkeyPortalProbe"),

        .testTarget(name: "LatchkeySystemTests", dependencies: ["LatchkeySystem", systemPackage]),
        // The key-file parser, application files, the ownership rules (root-owned files in temporary
        // directories under /run; those tests need root) and the grants.
        .testTarget(name: "LatchkeyApplicationsTests", dependencies: ["LatchkeyApplications"]),
        .testTarget(name: "LatchkeyCryptoTests", dependencies: ["LatchkeyCrypto"]),
        .testTarget(
            name: "LatchkeyKeybagTests", dependencies: ["LatchkeyKeybag"],
            resources: [.copy("Vectors")]),
        .testTarget(name: "LatchkeyStoreTests", dependencies: ["LatchkeyStore"]),
        .testTarget(name: "LatchkeyModelTests", dependencies: ["LatchkeyModel"]),
        // tokens.conf, the DER and mechanisms of the token side, a module's thread and its deadlines.
        .testTarget(
            name: "LatchkeyTokensTests",
            dependencies: [
                "LatchkeyTokens", "LatchkeyCrypto", "LatchkeyEngine", "LatchkeyModel", "LatchkeySecrets",
                "CP11Kit", .product(name: "Logging", package: "swift-log"),
            ]),
        // Seeded value generators and a mutator, shared by the tests of the two decoders of outside input.
        .target(
            name: "LatchkeyValueTestSupport", dependencies: ["LatchkeyModel"], path: "Tests/LatchkeyValueTestSupport"),
        .testTarget(name: "LatchkeyCodecTests", dependencies: ["LatchkeyCodec", "LatchkeyValueTestSupport"]),
        .testTarget(
            name: "LatchkeyWireTests",
            dependencies: ["LatchkeyWire", "LatchkeyTransport", "LatchkeyValueTestSupport"]),
        // The fuzz targets without libFuzzer: the corpus replayed, seeded mutations for a fixed time.
        .testTarget(name: "LatchkeyFuzzTests", dependencies: ["latchkey-fuzz", "LatchkeyValueTestSupport"]),
        // Keychains in temporary directories and a recording access policy, for the tests that drive the
        // engine without a socket or a bus.
        .target(
            name: "LatchkeyEngineTestSupport",
            dependencies: ["LatchkeyEngine", "LatchkeyCrypto", "LatchkeyModel", "LatchkeySecrets"],
            path: "Tests/LatchkeyEngineTestSupport"),
        // Vectors: docs/STORE.md's worked examples, opened and recomputed through the engine's own code.
        .testTarget(
            name: "LatchkeyEngineTests",
            dependencies: ["LatchkeyEngine", "LatchkeyCodec", "LatchkeyStore", "LatchkeyEngineTestSupport"],
            resources: [.copy("Vectors")]),
        // The agent's pure logic (its lock schedule, with a fake clock); the agent as a process is tested end to end.
        .testTarget(
            name: "LatchkeyAgentTests", dependencies: ["LatchkeyAgent", "LatchkeyApplications", "LatchkeyTestSupport"]),
        // Test helpers shared by test targets (a private dbus-daemon, ...).
        .target(name: "LatchkeyTestSupport", dependencies: ["LatchkeyDBus"], path: "Tests/LatchkeyTestSupport"),
        .testTarget(
            name: "LatchkeyEndToEndTests",
            dependencies: [
                "Latchkey", "LatchkeyKeybag", "LatchkeyTransport", "LatchkeyWire", "LatchkeyDBus",
                "LatchkeyTestSupport", "LatchkeyLog", .product(name: "Logging", package: "swift-log"),
            ]),
        // Apple's own regression tests (apple-oss-distributions/Security: si-*, secd-*, SecItemTests,
        // KeychainAPITests, mockaksKeychain), ported to the public library against the real agent; each
        // check cites its Apple file and test. Resources: Apple's test certificates and PKCS#12 files, and
        // legacy PKCS#12 files made for these tests. LatchkeyCrypto only for digests of test inputs.
        .testTarget(
            name: "LatchkeyAppleConformanceTests",
            dependencies: ["Latchkey", "LatchkeyCrypto", "LatchkeySecrets", "LatchkeyTestSupport"],
            resources: [.copy("Resources")]),
        // The D-Bus binding, and the lock watcher, each on private dbus-daemons.
        .testTarget(name: "LatchkeyDBusTests", dependencies: ["LatchkeyDBus", "LatchkeyTestSupport"]),
        .testTarget(
            name: "LatchkeyDesktopTests",
            dependencies: [
                "LatchkeyDBus", "LatchkeyDesktop", "LatchkeyTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Secret Service against the real agent on a private dbus-daemon: secret-tool, Python secretstorage/keyring.
        // The Secret Service's collections, aliases and items on a keychain in a temporary directory, without D-Bus.
        .testTarget(
            name: "LatchkeySecretServiceUnitTests",
            dependencies: [
                "LatchkeySecretService", "LatchkeyEngine", "LatchkeyModel", "LatchkeyCrypto", "LatchkeySecrets",
                "LatchkeyEngineTestSupport",
            ]),
        .testTarget(
            name: "LatchkeySecretServiceTests",
            dependencies: [
                "Latchkey", "LatchkeyDBus", "LatchkeySecretService", "LatchkeySecrets",
                "LatchkeyTestSupport",
            ]),
        // Real PAM (pamtester, a test user) against pam/pam_latchkey.so and the built agent; needs root.
        .testTarget(name: "LatchkeyPAMTests", dependencies: ["LatchkeyKeybag", "LatchkeyDBus", "LatchkeyTestSupport"]),
    ]
)
