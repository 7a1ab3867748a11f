// swift-tools-version:6.0
// latchkey-bench: end-to-end figures for the public Latchkey library (client → socket → agent → SQLite).
//
// A separate package on purpose, so it is no part of the root package's build or tests. Build and run
// it with `scripts/bench` (release build, scratch path .build-bench), which also builds the agent.
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its directory (the checkout may be called `latchkey`, `main`,
// ...), not after the name its manifest declares; derive it so the product reference works in any clone.
let rootIdentity = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .lastPathComponent.lowercased()

let package = Package(
    name: "latchkey-benchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(path: "..")
    ],
    targets: [
        .executableTarget(
            name: "latchkey-bench",
            dependencies: [.product(name: "Latchkey", package: rootIdentity)]
        ),
        // The item store alone, without the agent (lookups, inserts, open); run it with `scripts/bench-store`.
        .executableTarget(
            name: "latchkey-store-bench",
            dependencies: [.product(name: "LatchkeyStore", package: rootIdentity)]
        ),
        // Issue 4's comparison: one Secret Service client (sd-bus) against latchkeyd and gnome-keyring-daemon.
        // Run it with `scripts/bench-secret-service`.
        .systemLibrary(name: "CBenchSystemd", pkgConfig: "libsystemd"),
        .executableTarget(
            name: "secret-service-bench",
            dependencies: ["CBenchSystemd", .product(name: "Latchkey", package: rootIdentity)]
        ),
    ]
)
