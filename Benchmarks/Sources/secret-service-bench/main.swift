// secret-service-bench: the same Secret Service client against latchkeyd and gnome-keyring-daemon, one
// after the other, on one private dbus-daemon (docs/SECRET-SERVICE.md; issue 4's benchmark).
//
// For each provider and each size (filled cumulatively with CreateItem: 100, then on to 3,000, then on to
// 100,000 items) it reports
//   - bulk import: the time to fill up to the size, and items per second;
//   - p50/p99 latency of SearchItems (two attributes, one match), Item.GetSecret (plain session) and
//     CreateItem (a new item; the timed items are deleted again afterwards, untimed);
//   - the provider's own CPU time per SearchItems and GetSecret (all its threads, from
//     /proc/PID/task/*/schedstat): what the provider does per call, which other load on the machine
//     barely moves, unlike the latency;
//   - the bus round trip (Peer.Ping to the provider), which every call pays.
// SearchItems and GetSecret are measured in --rounds rounds of --ops calls; a p50 is the median of the
// rounds' p50s (a round disturbed by other load on the machine does not move it), a p99 is over all.
// gnome-keyring rewrites its whole keyring file on every change, so filling it is quadratic: a size whose
// projected fill time exceeds --budget seconds is skipped for it, and the table says so.
//
// Run it with `scripts/bench-secret-service`, which installs gnome-keyring from Debian and builds this and
// the agent in release.

import Foundation
import Latchkey
import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

struct Options {
    var sizes = [100, 3_000, 100_000]
    var ops = 500
    var rounds = 3
    var createOps = 100
    var budget = 600.0
    var providers = ["latchkey", "gnome-keyring"]
    var markdown = false
    var dir: String?
    /// Pin the benchmark and every process it starts (bus, providers) to one CPU.
    var cpu: Int?

    static let usage = """
        usage: secret-service-bench [--sizes 100,3000,100000] [--ops N] [--rounds N] [--create-ops N] [--budget SECONDS]
                                    [--providers latchkey,gnome-keyring] [--dir DIR] [--cpu N] [--markdown]

          --sizes LIST       item counts, filled cumulatively (default 100,3000,100000)
          --ops N            timed SearchItems and GetSecret calls per round (default 500)
          --rounds N         rounds of those per size (default 3); p50 is the median of the rounds' p50s
          --create-ops N     timed CreateItem calls per size (default 100)
          --budget SECONDS   skip a size for a provider whose projected fill time is longer (default 600)
          --providers LIST   which providers to measure, in order (default latchkey,gnome-keyring)
          --dir DIR          where the temporary directories go (default $TMPDIR or /tmp)
          --cpu N            pin the client, the bus and the providers to CPU N: every round trip then
                             runs without cross-CPU wake-ups, whose cost varies a lot on a VM (the
                             default leaves placement to the scheduler)
          --markdown         also print a Markdown table (for the README)
        The agent is found through $LATCHKEYD (scripts/bench-secret-service sets it).

        """

    static func parse(_ arguments: [String]) -> Options {
        var options = Options()
        var k = 1
        func value() -> String {
            k += 1
            guard k < arguments.count else { fail(usage) }
            return arguments[k]
        }
        while k < arguments.count {
            switch arguments[k] {
            case "--sizes":
                options.sizes = value().split(separator: ",").map {
                    Int($0.replacingOccurrences(of: "_", with: "")) ?? 0
                }
            case "--ops": options.ops = Int(value()) ?? 0
            case "--rounds": options.rounds = Int(value()) ?? 0
            case "--create-ops": options.createOps = Int(value()) ?? 0
            case "--budget": options.budget = Double(value()) ?? 0
            case "--providers": options.providers = value().split(separator: ",").map(String.init)
            case "--dir": options.dir = value()
            case "--cpu": options.cpu = Int(value())
            case "--markdown": options.markdown = true
            case "--help", "-h":
                print(usage, terminator: "")
                exit(0)
            default: fail("unknown option \(arguments[k])\n\(usage)")
            }
            k += 1
        }
        guard options.sizes.allSatisfy({ $0 > 0 }), options.sizes == options.sizes.sorted(), options.ops > 0,
            options.rounds > 0,
            options.createOps > 0, options.budget > 0,
            options.providers.allSatisfy({ ["latchkey", "gnome-keyring"].contains($0) })
        else { fail(usage) }
        return options
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("secret-service-bench: \(message)\n".utf8))
    exit(1)
}

func log(_ message: String) {
    FileHandle.standardError.write(Data("\(message)\n".utf8))
}

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// A fixed-seed generator, so both providers see the same keys.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func percentile(_ samples: [Double], _ p: Double) -> Double {
    let sorted = samples.sorted()
    return sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
}

struct Latency {
    var p50: Double
    var p99: Double

    init(_ samples: [Double]) {
        p50 = percentile(samples, 0.50)
        p99 = percentile(samples, 0.99)
    }

    /// Rounds of samples: the median of the rounds' p50s, and the p99 of all samples.
    init(rounds: [[Double]]) {
        p50 = percentile(rounds.map { percentile($0, 0.50) }, 0.50)
        p99 = percentile(rounds.flatMap { $0 }, 0.99)
    }
}

/// CPU time a process has used so far, all threads, in seconds (the kernel's per-thread run time in
/// /proc/PID/task/TID/schedstat, nanoseconds). Threads that exited in between are not counted.
func cpuSeconds(_ pid: pid_t) -> Double {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    var total: UInt64 = 0
    for task in tasks {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8),
            let first = text.split(separator: " ").first, let ns = UInt64(first)
        else { continue }
        total += ns
    }
    return Double(total) / 1e9
}

struct Row {
    var provider: String
    var items: Int
    var fillSeconds: Double?
    var fillRate: Double?
    var search: Latency?
    var getSecret: Latency?
    /// The provider's CPU time per call (median of the rounds).
    var searchCPU: Double?
    var getCPU: Double?
    var create: Latency?
    var ping: Latency?
    var skipped: String?
}

// MARK: - Processes

/// Children to stop if the benchmark is interrupted (SIGINT, SIGTERM).
enum Children {
    nonisolated(unsafe) static var pids: [pid_t] = []

    static func add(_ pid: pid_t) { pids.append(pid) }

    static func installHandlers() {
        let handler: @convention(c) (Int32) -> Void = { _ in
            for pid in Children.pids { kill(pid, SIGTERM) }
            _exit(130)
        }
        signal(SIGINT, handler)
        signal(SIGTERM, handler)
    }
}

/// A private session dbus-daemon, our child.
final class PrivateBus {
    let address: String
    private let process = Process()

    init(directory: String) throws {
        let socket = directory + "/bus.sock"
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/>
              </policy>
            </busconfig>
            """
        try config.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(directory)/bus.conf", "--nofork", "--nopidfile", "--print-address=1"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        Children.add(process.processIdentifier)
        var printed = Data()
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed += chunk
        }
        address = "unix:path=\(socket)"
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}

/// Waits until a provider owns the name.
func waitForProvider(_ client: Client, _ what: String) throws {
    let end = now() + 30
    while now() < end {
        if (try? client.nameHasOwner("org.freedesktop.secrets")) == true { return }
        usleep(20_000)
    }
    fail("\(what) did not take org.freedesktop.secrets within 30 s")
}

func waitForNoProvider(_ client: Client) {
    let end = now() + 30
    while now() < end, (try? client.nameHasOwner("org.freedesktop.secrets")) == true { usleep(20_000) }
}

/// Starts a provider on the bus; returns its pid and how to stop it.
func startProvider(_ name: String, bus: PrivateBus, base: String) throws -> (pid: pid_t, stop: () -> Void) {
    switch name {
    case "latchkey":
        let run = base + "/latchkey-run", data = base + "/latchkey-data"
        try FileManager.default.createDirectory(
            atPath: run, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        setenv("XDG_RUNTIME_DIR", run, 1)
        setenv("XDG_DATA_HOME", data, 1)
        setenv("DBUS_SESSION_BUS_ADDRESS", bus.address, 1)
        setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=\(base)/no-system-bus", 1)
        // The library starts the agent on demand; production Argon2id parameters (one unlock, not timed).
        do {
            try KeychainControl.create(password: SecretBytes(copying: Array("secret-service-bench".utf8)))
        } catch {
            fail("cannot create the latchkey keychain: \(error)")
        }
        let client = try Client(address: bus.address)
        try waitForProvider(client, name)
        let pid = try client.ownerPID("org.freedesktop.secrets")
        Children.add(pid)
        return (pid, { kill(pid, SIGTERM) })
    case "gnome-keyring":
        let home = base + "/gk-home"
        for sub in ["", "/run", "/data"] {
            try FileManager.default.createDirectory(
                atPath: home + sub, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/gnome-keyring-daemon")
        process.arguments = ["--foreground", "--unlock", "--components=secrets"]
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home
        environment["XDG_RUNTIME_DIR"] = home + "/run"
        environment["XDG_DATA_HOME"] = home + "/data"
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        process.environment = environment
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data("secret-service-bench".utf8))
        try input.fileHandleForWriting.close()
        Children.add(process.processIdentifier)
        return (
            process.processIdentifier,
            {
                process.terminate()
                process.waitUntilExit()
            }
        )
    default:
        fail("unknown provider \(name)")
    }
}

// MARK: - Measuring one provider

func measure(_ provider: String, options: Options, bus: PrivateBus, base: String) throws -> [Row] {
    let (pid, stop) = try startProvider(provider, bus: bus, base: base)
    let client = try Client(address: bus.address)
    defer {
        stop()
        waitForNoProvider(client)
    }
    try waitForProvider(client, provider)
    let collection = "/org/freedesktop/secrets/aliases/default"
    guard try client.unlockWithoutPrompt(collection) else { fail("\(provider): the default collection is locked") }
    let session = try client.openPlainSession()
    let tag = "secret-service-bench"
    let secret = Array("s3cret-value-of-24-bytes".utf8)
    var rng = SplitMix(state: 0x5EC2_E75E)
    var count = 0
    var rows: [Row] = []
    var createCosts: [(count: Int, cost: Double)] = []  // CreateItem p50 (seconds) at each size measured
    var skip: String?

    for size in options.sizes {
        if let skip {
            rows.append(Row(provider: provider, items: size, skipped: skip))
            continue
        }
        // Fill: project the time from how CreateItem's cost grew between the last two sizes (cost ∝
        // count^k, k between 0 and 1; k = 1 when there is a single point, which is pessimistic).
        if let last = createCosts.last {
            var k = 1.0
            if createCosts.count >= 2 {
                let previous = createCosts[createCosts.count - 2]
                k = min(1, max(0, log(last.cost / previous.cost) / log(Double(last.count) / Double(previous.count))))
            }
            let projected =
                last.cost / pow(Double(last.count), k)
                * (pow(Double(size), k + 1) - pow(Double(count), k + 1)) / (k + 1)
            if projected > options.budget {
                skip = "skipped: filling to \(size) would take ~\(Int(projected)) s"
                rows.append(Row(provider: provider, items: size, skipped: skip))
                log("\(provider): \(skip!)")
                continue
            }
        }
        log("\(provider): filling to \(size) items…")
        let fillStart = now()
        while count < size {
            _ = try client.createItem(
                collection: collection, label: "bench item \(count)",
                attributes: [("bench", tag), ("n", "\(count)")], secret: secret,
                session: session, replace: false)
            count += 1
            if count % 10_000 == 0 { log("  \(count)") }
        }
        let fillSeconds = now() - fillStart
        let filled = Double(size - (rows.last?.items ?? 0))

        // Warm-up, then rounds of SearchItems with one match at random keys, and GetSecret of what
        // they found.
        for _ in 0..<min(50, options.ops) {
            _ = try client.searchItems([("bench", tag), ("n", "\(Int.random(in: 0..<size, using: &rng))")])
        }
        var searchRounds: [[Double]] = [], getRounds: [[Double]] = []
        var searchCPU: [Double] = [], getCPU: [Double] = []
        for _ in 0..<options.rounds {
            var searchSamples: [Double] = []
            var paths: [String] = []
            var cpu = cpuSeconds(pid)
            for _ in 0..<options.ops {
                let n = Int.random(in: 0..<size, using: &rng)
                let t0 = now()
                let found = try client.searchItems([("bench", tag), ("n", "\(n)")])
                searchSamples.append(now() - t0)
                guard found.unlocked.count == 1 else {
                    fail("\(provider): SearchItems n=\(n) found \(found.unlocked.count)")
                }
                paths.append(found.unlocked[0])
            }
            searchCPU.append((cpuSeconds(pid) - cpu) / Double(options.ops))
            var getSamples: [Double] = []
            cpu = cpuSeconds(pid)
            for path in paths {
                let t0 = now()
                let value = try client.getSecret(path, session: session)
                getSamples.append(now() - t0)
                guard value == secret else { fail("\(provider): GetSecret returned the wrong secret") }
            }
            getCPU.append((cpuSeconds(pid) - cpu) / Double(options.ops))
            searchRounds.append(searchSamples)
            getRounds.append(getSamples)
        }
        var createSamples: [Double] = []
        var created: [String] = []
        for k in 0..<options.createOps {
            let t0 = now()
            created.append(
                try client.createItem(
                    collection: collection, label: "timed \(k)",
                    attributes: [("bench", tag + "-timed"), ("n", "\(size)-\(k)")],
                    secret: secret, session: session, replace: false))
            createSamples.append(now() - t0)
        }
        for path in created { try client.deleteItem(path) }
        var pingSamples: [Double] = []
        for _ in 0..<options.ops {
            let t0 = now()
            try client.ping()
            pingSamples.append(now() - t0)
        }
        let createLatency = Latency(createSamples)
        createCosts.append((size, createLatency.p50))
        let search = Latency(rounds: searchRounds), get = Latency(rounds: getRounds)
        rows.append(
            Row(
                provider: provider, items: size, fillSeconds: fillSeconds, fillRate: filled / fillSeconds,
                search: search, getSecret: get, searchCPU: percentile(searchCPU, 0.5),
                getCPU: percentile(getCPU, 0.5), create: createLatency, ping: Latency(pingSamples)))
        log(
            "\(provider) at \(size): search p50 \(micro(search.p50)) (rounds \(searchRounds.map { micro(percentile($0, 0.5)) }), "
                + "CPU \(micro(percentile(searchCPU, 0.5)))), get p50 \(micro(get.p50)) (CPU \(micro(percentile(getCPU, 0.5)))), "
                + "create p50 \(micro(createLatency.p50)), fill \(String(format: "%.1f", fillSeconds)) s")
    }
    return rows
}

func micro(_ seconds: Double?) -> String {
    guard let seconds, !seconds.isNaN else { return "—" }
    if seconds >= 0.01 { return String(format: "%.1f ms", seconds * 1000) }
    return String(format: "%.0f µs", seconds * 1e6)
}

// MARK: - Main

let options = Options.parse(CommandLine.arguments)
Children.installHandlers()
if let cpu = options.cpu {
    // Glibc's module hides sched_setaffinity (_GNU_SOURCE): look it up and pass a cpu_set_t by hand.
    // Children (dbus-daemon, latchkeyd started on demand, gnome-keyring-daemon) inherit the mask.
    typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> Int32
    var mask = [UInt64](repeating: 0, count: 16)
    guard cpu >= 0, cpu < mask.count * 64, let symbol = dlsym(dlopen(nil, RTLD_NOW), "sched_setaffinity") else {
        fail("--cpu \(cpu): cannot pin")
    }
    mask[cpu / 64] |= UInt64(1) << UInt64(cpu % 64)
    guard mask.withUnsafeBytes({ unsafeBitCast(symbol, to: SetAffinity.self)(0, $0.count, $0.baseAddress!) }) == 0
    else {
        fail("--cpu \(cpu): sched_setaffinity: \(String(cString: strerror(errno)))")
    }
}
let base = (options.dir ?? (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp")) + "/ss-bench-\(getpid())"
try FileManager.default.createDirectory(
    atPath: base, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
defer { try? FileManager.default.removeItem(atPath: base) }
let bus = try PrivateBus(directory: base)
var rows: [Row] = []
for provider in options.providers {
    let directory = base + "/" + provider
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    rows += try measure(provider, options: options, bus: bus, base: directory)
}
bus.stop()
try? FileManager.default.removeItem(atPath: base)

let cpuModel =
    (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
    .split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last?
    .trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
print(
    "secret-service-bench: one private dbus-daemon, one client (sd-bus, plain session), \(ProcessInfo.processInfo.activeProcessorCount) × \(cpuModel)"
        + (options.cpu.map { ", everything pinned to CPU \($0)" } ?? ""))
print(
    "SearchItems: 2 attributes, 1 match; GetSecret: that item; CreateItem: a new item (deleted again, untimed); "
        + "\(options.rounds) × \(options.ops) searches and reads, \(options.createOps) creates per size; "
        + "CPU: the provider's own CPU time per call")
let header = [
    "provider", "items", "bulk import", "SearchItems p50/p99", "(CPU)", "GetSecret p50/p99", "(CPU)",
    "CreateItem p50/p99", "Ping p50",
]
var table: [[String]] = []
for row in rows {
    if let skipped = row.skipped {
        table.append([row.provider, "\(row.items)", skipped, "", "", "", "", "", ""])
        continue
    }
    table.append([
        row.provider, "\(row.items)",
        String(format: "%.1f s (%.0f items/s)", row.fillSeconds ?? 0, row.fillRate ?? 0),
        "\(micro(row.search?.p50)) / \(micro(row.search?.p99))", micro(row.searchCPU),
        "\(micro(row.getSecret?.p50)) / \(micro(row.getSecret?.p99))", micro(row.getCPU),
        "\(micro(row.create?.p50)) / \(micro(row.create?.p99))",
        micro(row.ping?.p50),
    ])
}
let widths = header.indices.map { column in ([header] + table).map { $0[column].count }.max() ?? 0 }
for line in [header] + table {
    print(
        line.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
            .joined(separator: "  "))
}
if options.markdown {
    print("")
    print(
        "| Provider | Items | Bulk import | SearchItems p50 / p99 | (CPU) | GetSecret p50 / p99 | (CPU) | CreateItem p50 / p99 | Ping p50 |"
    )
    print("|---|---:|---|---|---:|---|---:|---|---|")
    for line in table {
        print("| " + line.joined(separator: " | ") + " |")
    }
}
