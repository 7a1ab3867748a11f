// latchkey-bench: end-to-end figures for the public Latchkey library.
//
// Every operation goes through the public API exactly as an application calls it: SecItem* builds the
// request, the library sends it over the Unix socket to a real `latchkeyd` started on demand, and the
// agent runs it against its encrypted SQLite store. The agent and its keychain live in temporary
// XDG_RUNTIME_DIR / XDG_DATA_HOME directories that are removed at the end.
//
// For each size (cumulative: fill to 1,000, measure, fill on to 10,000, measure, ...) it reports
//   - bulk-add throughput while filling up to the size;
//   - p50/p99 latency of SecItemAdd (a new item), SecItemCopyMatching (service + account, kSecReturnData),
//     SecItemUpdate (new data, by service + account) and SecItemDelete (by service + account), each over
//     --ops operations at random keys; every deleted item is added back (that add is the one timed), so
//     the count stays at the size. The kinds take turns in blocks of 50, so noise hits them alike;
//   - where the time goes per operation: client CPU, agent CPU, and the rest (waiting: fsync, wake-ups);
//   - a transport floor: the same copy call for a class the agent's parser rejects at once, so the
//     difference to a real copy is the engine's (crypto + SQLite) share;
//   - the agent's VmRSS and VmHWM, and the size of the store.
// Run it with `scripts/bench`, which builds it and the agent in release.

import Foundation
import Latchkey
import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Options

struct Options {
    var sizes = [1_000, 10_000, 100_000]
    var ops = 1_000
    var warmup = 200
    var markdown = false
    var seed: UInt64 = 0x1A7C_4E11
    var valueBytes = 24
    var baseDirectory: String?
    /// Pin this process, and so the agent it starts (which inherits the affinity), to one CPU.
    var cpu: Int?
    /// Measure key operations (Keys.swift) instead of SecItem at several sizes.
    var keys = false
    /// Measure backup and restore (Backup.swift) at each size instead.
    var backup = false

    static let usage = """
        usage: latchkey-bench [--sizes 1000,10000,100000] [--ops N] [--warmup N] [--seed N]
                              [--value-bytes N] [--dir DIR] [--cpu N] [--markdown]
               latchkey-bench --keys [--ops N] [--dir DIR] [--cpu N] [--markdown]
               latchkey-bench --backup [--sizes LIST] [--value-bytes N] [--dir DIR] [--markdown]

        Measures the public Latchkey library end to end (client → socket → latchkeyd → SQLite) with an
        agent started on demand in temporary XDG directories. The agent is found through $LATCHKEYD,
        next to this executable, or on PATH (scripts/bench sets LATCHKEYD).

          --sizes LIST     item counts to measure at, filled cumulatively (default 1000,10000,100000)
          --ops N          timed operations per kind and size, at random keys (default 1000, minimum 1)
          --warmup N       untimed lookups before each size's measurements (default 200)
          --seed N         seed of the key sequence (default fixed, so runs are comparable)
          --value-bytes N  size of each item's kSecValueData (default 24)
          --dir DIR        where to create the temporary directories (default $TMPDIR or /tmp);
                           its file system decides what an fsync costs
          --cpu N          pin the benchmark and the agent it starts to CPU N: client and agent then
                           share a CPU, which takes the cross-CPU wake-up out of every round trip
                           (a diagnostic; the default leaves placement to the scheduler)
          --markdown       also print the results as a Markdown table (for the README)
          --keys           instead: signatures with a key in this process and with one in the
                           keychain (made by the agent), verification, finding a key by tag, and
                           generating keys into the keychain, for EC P-256/P-384 and RSA 2048/3072;
                           then, with the SoftHSM2 token scripts/bench makes, signing with a token key
                           through the agent against pkcs11-tool --sign
          --backup         instead: at each size, `latchkey backup` (the whole file), the restore's check
                           and a restore that replaces every item, with their times and the agent's VmHWM

        """

    static func parse(_ arguments: [String]) -> Options {
        var options = Options()
        var index = 1
        func value(_ name: String) -> String {
            index += 1
            guard index < arguments.count else { fail("\(name) needs a value\n\(usage)", code: 64) }
            return arguments[index]
        }
        func number(_ name: String, minimum: Int) -> Int {
            let text = value(name)
            guard let n = Int(text.replacingOccurrences(of: "_", with: "")), n >= minimum else {
                fail("\(name): '\(text)' is not a number ≥ \(minimum)", code: 64)
            }
            return n
        }
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--sizes":
                let text = value(argument)
                let sizes = text.split(separator: ",").map {
                    Int($0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "_", with: ""))
                }
                guard !sizes.isEmpty, sizes.allSatisfy({ ($0 ?? 0) >= 1 }) else {
                    fail("--sizes: '\(text)' is not a list of positive item counts", code: 64)
                }
                options.sizes = Array(Set(sizes.map { $0! })).sorted()
            case "--ops": options.ops = number(argument, minimum: 1)
            case "--warmup": options.warmup = number(argument, minimum: 0)
            case "--seed": options.seed = UInt64(number(argument, minimum: 0))
            case "--value-bytes": options.valueBytes = number(argument, minimum: 1)
            case "--dir": options.baseDirectory = value(argument)
            case "--cpu": options.cpu = number(argument, minimum: 0)
            case "--markdown": options.markdown = true
            case "--keys": options.keys = true
            case "--backup": options.backup = true
            case "--help", "-h":
                print(usage, terminator: "")
                exit(0)
            default:
                fail("unknown option '\(argument)'\n\(usage)", code: 64)
            }
            index += 1
        }
        return options
    }
}

// MARK: - Small utilities

/// Monotonic time in nanoseconds.
@inline(__always) func nanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// CPU time of this process, in nanoseconds.
func processCPUNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// SplitMix64: a small seeded generator, so every run walks the same keys.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func readFile(_ path: String) -> String? {
    try? String(contentsOfFile: path, encoding: .utf8)
}

/// The 1-, 5- and 15-minute load averages.
func loadAverage() -> String {
    guard let text = readFile("/proc/loadavg") else { return "?" }
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}

/// Temporary state to remove on any exit: the agent to stop and the directory to delete.
final class Cleanup: @unchecked Sendable {
    static let shared = Cleanup()
    private let lock = NSLock()
    private var agentPID: pid_t?
    private var directory: String?
    private var done = false
    private var interrupted = false

    /// True once a signal asked us to stop: failures of calls to the stopped agent are expected then.
    var isInterrupted: Bool {
        lock.lock()
        defer { lock.unlock() }
        return interrupted
    }

    /// On SIGINT/SIGTERM: stop the agent, remove the directory, exit.
    func interrupt() -> Never {
        lock.lock()
        interrupted = true
        lock.unlock()
        FileHandle.standardError.write(Data("latchkey-bench: interrupted; stopping the agent\n".utf8))
        run()
        exit(130)
    }

    func register(directory: String) {
        lock.lock()
        self.directory = directory
        lock.unlock()
    }

    func register(agent pid: pid_t) {
        lock.lock()
        agentPID = pid
        lock.unlock()
    }

    /// SIGTERMs the agent, waits for it to go, and removes the temporary directory. Idempotent.
    func run() {
        lock.lock()
        defer { lock.unlock() }
        guard !done else { return }
        done = true
        if let pid = agentPID {
            kill(pid, SIGTERM)
            waitForExit(pid)
        }
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
    }
}

/// Waits until `pid` has gone or is a zombie (the daemonised agent is reparented to PID 1, which may
/// never reap it in a container).
func waitForExit(_ pid: pid_t) {
    for _ in 0..<500 {
        guard kill(pid, 0) == 0, let stat = readFile("/proc/\(pid)/stat"),
            let close = stat.lastIndex(of: ")"), stat.index(close, offsetBy: 2) < stat.endIndex,
            stat[stat.index(close, offsetBy: 2)] != "Z"
        else { return }
        usleep(10_000)
    }
}

func fail(_ message: String, code: Int32 = 1) -> Never {
    // The signal handler is stopping the agent and will exit; the call that just failed is its doing.
    while Cleanup.shared.isInterrupted { pause() }
    FileHandle.standardError.write(Data("latchkey-bench: \(message)\n".utf8))
    Cleanup.shared.run()
    exit(code)
}

// MARK: - The agent process

/// The pid of the process listening on `socketPath`, from SO_PEERCRED of a fresh connection (for a
/// listening socket the kernel reports the process that called listen(): the daemonised agent).
func listenerPID(socketPath: String) -> pid_t? {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(socketPath.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard connected == 0 else { return nil }
    // struct ucred { pid_t pid; uid_t uid; gid_t gid; }
    var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
    var length = socklen_t(MemoryLayout.size(ofValue: credentials))
    guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, credentials.0 > 0 else { return nil }
    return credentials.0
}

/// The pid holding the agent's lock file, from /proc/locks (a cross-check of the socket's listener).
func lockHolderPID(lockPath: String) -> pid_t? {
    var st = stat()
    guard stat(lockPath, &st) == 0, let locks = readFile("/proc/locks") else { return nil }
    // "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF" — pid, then major:minor:inode.
    for line in locks.split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 6, fields[1] == "FLOCK", let pid = Int32(fields[4]) else { continue }
        if let inode = fields[5].split(separator: ":").last, UInt64(inode) == UInt64(st.st_ino) { return pid }
    }
    return nil
}

struct Memory {
    var rssKiB: Int
    var hwmKiB: Int
    /// Resident pages of the memory-mapped keychain.db (SQLite's mmap_size): clean page cache that a
    /// pread-based store keeps in the kernel instead, uncounted.
    var databaseKiB: Int
    /// What the agent itself holds: VmRSS without the mapped database.
    var ownKiB: Int { rssKiB - databaseKiB }
}

/// Resident KiB of the mappings of `pid` whose file name ends with `suffix` (/proc/PID/smaps).
func mappedResidentKiB(_ pid: pid_t, fileSuffix suffix: String) -> Int {
    // FileHandle reads to the end; String(contentsOfFile:) trusts st_size, which is 0 in /proc.
    guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/smaps") else { return 0 }
    defer { try? handle.close() }
    let smaps = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
    var inFile = false
    var total = 0
    for line in smaps.split(separator: "\n") {
        if let first = line.first, first.isHexDigit, line.contains("-") && !line.hasPrefix("Rss") {
            // A mapping header: "start-end perms offset dev inode [path]".
            inFile =
                line.split(separator: " ", omittingEmptySubsequences: true).last.map { $0.hasSuffix(suffix) } ?? false
        } else if inFile, line.hasPrefix("Rss:") {
            total +=
                line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) } ?? 0
        }
    }
    return total
}

func agentMemory(_ pid: pid_t) -> Memory? {
    guard let status = readFile("/proc/\(pid)/status") else { return nil }
    func field(_ name: String) -> Int? {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
        return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) }
    }
    guard let rss = field("VmRSS"), let hwm = field("VmHWM") else { return nil }
    return Memory(rssKiB: rss, hwmKiB: hwm, databaseKiB: mappedResidentKiB(pid, fileSuffix: "/keychain.db"))
}

// MARK: - Statistics

struct Summary {
    var count: Int
    var p50: Double  // microseconds
    var p99: Double
    var mean: Double
    var max: Double

    init(_ samples: [UInt64]) {
        let sorted = samples.sorted()
        count = sorted.count
        func percentile(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return .nan }
            // Nearest rank: the smallest sample with at least p of the samples at or below it.
            let rank = Int((p * Double(sorted.count)).rounded(.up))
            return Double(sorted[Swift.max(0, Swift.min(sorted.count - 1, rank - 1))]) / 1_000
        }
        p50 = percentile(0.50)
        p99 = percentile(0.99)
        mean = sorted.isEmpty ? .nan : Double(sorted.reduce(0, +)) / Double(sorted.count) / 1_000
        max = sorted.last.map { Double($0) / 1_000 } ?? .nan
    }
}

/// Where one kind of operation spent its time, per operation (µs).
struct Breakdown {
    var wall: Double
    var client: Double
    var agent: Double
    var waiting: Double { Swift.max(0, wall - client - agent) }
}

struct OperationResult {
    var latency: Summary
    var breakdown: Breakdown
}

struct LevelResult {
    var items: Int
    var filled: Int
    var fillSeconds: Double
    var fillBreakdown: Breakdown
    var add: OperationResult
    var copy: OperationResult
    var update: OperationResult
    var delete: OperationResult
    var roundTrip: OperationResult
    var connection: OperationResult
    var memory: Memory?
    /// keychain.db plus its -wal, in bytes.
    var databaseBytes: Int
    var load: String
    var fillThroughput: Double { filled > 0 ? Double(filled) / fillSeconds : .nan }
}

// MARK: - The workload

final class Workload {
    let options: Options
    let agentCPU: AgentCPU
    /// Items 0..<present are in the keychain; generation[i] says which data item i holds.
    private(set) var present = 0
    private var generation: [UInt32] = []
    private var random: SplitMix64

    init(options: Options, agentPID: pid_t) {
        self.options = options
        agentCPU = AgentCPU(pid: agentPID)
        random = SplitMix64(state: options.seed)
    }

    func service(_ i: Int) -> String { "bench.service.\(i)" }
    func account(_ i: Int) -> String { "user\(i)@example.com" }

    /// The item's data: its index and generation, padded to --value-bytes.
    func value(_ i: Int, _ generation: UInt32) -> Data {
        var bytes = Array("\(i)/\(generation):".utf8)
        while bytes.count < options.valueBytes { bytes.append(UInt8(ascii: "a") + UInt8(bytes.count % 26)) }
        return Data(bytes.prefix(Swift.max(options.valueBytes, 1)))
    }

    func addQuery(_ i: Int) -> NSDictionary {
        [
            kSecClass: kSecClassGenericPassword, kSecAttrService: service(i), kSecAttrAccount: account(i),
            kSecValueData: value(i, generation[i]),
        ] as NSDictionary
    }

    func itemQuery(_ i: Int) -> NSDictionary {
        [kSecClass: kSecClassGenericPassword, kSecAttrService: service(i), kSecAttrAccount: account(i)] as NSDictionary
    }

    func copyQuery(_ i: Int) -> NSDictionary {
        [
            kSecClass: kSecClassGenericPassword, kSecAttrService: service(i), kSecAttrAccount: account(i),
            kSecReturnData: true,
        ] as NSDictionary
    }

    func check(_ status: OSStatus, _ what: String, _ i: Int) {
        guard status == errSecSuccess else {
            let detail = LatchkeyDiagnostics.lastErrorDetail.map { ": \($0)" } ?? ""
            fail("\(what) of item \(i) failed with \(status)\(detail)")
        }
    }

    func randomKey() -> Int { Int.random(in: 0..<present, using: &random) }

    /// One timed call: wall time, and the CPU the client and the agent spent meanwhile (nanoseconds).
    struct Sample {
        var wall: UInt64
        var client: UInt64
        var agent: UInt64
    }

    /// Times `call` alone (the caller builds its dictionaries before and checks the result after).
    @inline(__always) func timed(_ call: () -> OSStatus) -> (OSStatus, Sample) {
        let a0 = agentCPU.read(), c0 = processCPUNanoseconds(), t0 = nanoseconds()
        let status = call()
        let t1 = nanoseconds(), c1 = processCPUNanoseconds(), a1 = agentCPU.read()
        return (status, Sample(wall: t1 - t0, client: c1 - c0, agent: a1 &- a0))
    }

    func result(_ samples: [Sample]) -> OperationResult {
        let n = Double(samples.count) * 1_000
        func mean(_ key: KeyPath<Sample, UInt64>) -> Double { Double(samples.reduce(0) { $0 + $1[keyPath: key] }) / n }
        return OperationResult(
            latency: Summary(samples.map(\.wall)),
            breakdown: Breakdown(wall: mean(\.wall), client: mean(\.client), agent: mean(\.agent)))
    }

    /// Adds items until `count` are present; returns the time taken and where it went (whole loop,
    /// including building each dictionary: this is throughput, not latency).
    func fill(to count: Int) -> (items: Int, seconds: Double, breakdown: Breakdown) {
        let start = present
        guard count > start else { return (0, 0, Breakdown(wall: 0, client: 0, agent: 0)) }
        generation.append(contentsOf: repeatElement(0, count: count - start))
        agentCPU.refresh()
        let agent0 = agentCPU.read(), client0 = processCPUNanoseconds(), wall0 = nanoseconds()
        for i in start..<count {
            check(SecItemAdd(addQuery(i), nil), "SecItemAdd", i)
            present = i + 1
        }
        let wall = Double(nanoseconds() - wall0), client = Double(processCPUNanoseconds() - client0)
        let agent = Double(agentCPU.read() &- agent0)
        let n = Double(count - start) * 1_000
        return (count - start, wall / 1e9, Breakdown(wall: wall / n, client: client / n, agent: agent / n))
    }

    func warmUp() {
        for _ in 0..<options.warmup {
            let i = randomKey()
            var result: CFTypeRef?
            check(SecItemCopyMatching(copyQuery(i), &result), "SecItemCopyMatching", i)
        }
    }

    /// Timed operations of one size, per kind.
    struct Measurements {
        var add: [Sample] = []
        var copy: [Sample] = []
        var update: [Sample] = []
        var delete: [Sample] = []
        var floor: [Sample] = []
        var connect: [Sample] = []
    }

    /// Runs --ops operations of each kind at random keys. The kinds take turns in blocks of
    /// `blockSize`, so a slow spell of the machine (another build, the scheduler moving client and
    /// agent between CPUs) falls on every kind alike instead of on whichever phase it coincides with.
    func measureLevel(blockSize: Int = 50) -> Measurements {
        agentCPU.refresh()
        var m = Measurements()
        for key in [\Measurements.add, \.copy, \.update, \.delete, \.floor, \.connect]
            as [WritableKeyPath<Measurements, [Sample]>]
        {
            m[keyPath: key].reserveCapacity(options.ops)
        }
        var done = 0
        while done < options.ops {
            let n = Swift.min(blockSize, options.ops - done)
            for _ in 0..<n { m.copy.append(copyOnce()) }
            for _ in 0..<n { m.update.append(updateOnce()) }
            for _ in 0..<n {
                let (delete, add) = deleteAndAddOnce()
                m.delete.append(delete)
                m.add.append(add)
            }
            for _ in 0..<n { m.floor.append(floorOnce()) }
            for _ in 0..<n { m.connect.append(connectionOnce()) }
            done += n
        }
        return m
    }

    /// SecItemCopyMatching by service + account with kSecReturnData; checks the data.
    func copyOnce() -> Sample {
        let i = randomKey()
        let query = copyQuery(i)
        var result: CFTypeRef?
        let (status, sample) = timed { SecItemCopyMatching(query, &result) }
        check(status, "SecItemCopyMatching", i)
        guard let data = result as? Data, data == value(i, generation[i]) else {
            fail("SecItemCopyMatching returned the wrong data for item \(i)")
        }
        return sample
    }

    /// SecItemUpdate of the data of one item, by service + account.
    func updateOnce() -> Sample {
        let i = randomKey()
        generation[i] &+= 1
        let query = itemQuery(i)
        let changes = [kSecValueData: value(i, generation[i])] as NSDictionary
        let (status, sample) = timed { SecItemUpdate(query, changes) }
        check(status, "SecItemUpdate", i)
        return sample
    }

    /// SecItemDelete of one item by service + account, then SecItemAdd of it again (an add of a new
    /// item, with the count one below the size), each timed. The count stays at the size.
    func deleteAndAddOnce() -> (delete: Sample, add: Sample) {
        let i = randomKey()
        let query = itemQuery(i)
        let (deleted, deleteSample) = timed { SecItemDelete(query) }
        check(deleted, "SecItemDelete", i)
        generation[i] &+= 1
        let add = addQuery(i)
        let (added, addSample) = timed { SecItemAdd(add, nil) }
        check(added, "SecItemAdd", i)
        return (deleteSample, addSample)
    }

    /// The transport floor: the same SecItemCopyMatching call and dictionary size, but for a class that
    /// does not exist, which the agent's parser rejects (errSecNoSuchClass) before any engine work:
    /// library → socket → agent thread → reply, so copy minus this is the engine's share.
    func floorOnce() -> Sample {
        let i = randomKey()
        let query =
            [
                kSecClass: "none", kSecAttrService: service(i), kSecAttrAccount: account(i),
                kSecReturnData: true,
            ] as NSDictionary
        var result: CFTypeRef?
        let (status, sample) = timed { SecItemCopyMatching(query, &result) }
        guard status == errSecNoSuchClass else {
            fail("the transport probe (copy of an unknown class) gave \(status), not errSecNoSuchClass")
        }
        return sample
    }
}

extension Workload {
    /// A new connection: connect, `hello` (the first request the library sends on one, docs/PROTOCOL.md
    /// §1), its answer, close. The agent identifies the caller at accept (docs/IDENTITY.md), so this is
    /// what identification costs a process per connection; the library keeps its connection, so a
    /// program pays it once. Wall time only: the agent serves it on a thread the CPU count does not see.
    func connectionOnce() -> Sample {
        let (status, sample) = timed { helloOnNewConnection(socketPath: socketPath) }
        guard status == errSecSuccess else { fail("a new connection's hello failed (\(status))") }
        return Sample(wall: sample.wall, client: sample.client, agent: 0)
    }
}

/// Connects to `socketPath`, sends hello and reads its answer: errSecSuccess, or -1.
func helloOnNewConnection(socketPath: String) -> OSStatus {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return -1 }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(socketPath.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return -1 }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard connected == 0 else { return -1 }
    // Frame: u32 length, then version 1 and opcode 0x01 (hello).
    let hello: [UInt8] = [0, 0, 0, 2, 1, 1]
    guard write(fd, hello, hello.count) == hello.count else { return -1 }
    var header = [UInt8](repeating: 0, count: 4)
    guard recv(fd, &header, 4, Int32(MSG_WAITALL)) == 4 else { return -1 }
    let length = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
    guard length >= 6, length <= 4096 else { return -1 }
    var body = [UInt8](repeating: 0, count: length)
    guard recv(fd, &body, length, Int32(MSG_WAITALL)) == length else { return -1 }
    // Response: version, then the i32 status.
    return body[1] == 0 && body[2] == 0 && body[3] == 0 && body[4] == 0 ? errSecSuccess : -1
}

/// The agent's CPU time over all its threads (it runs one per connection), from
/// /proc/PID/task/TID/schedstat: nanosecond resolution, unlike the clock ticks of /proc/PID/stat.
/// The thread list is read once per phase (our connection's thread lives as long as the connection).
final class AgentCPU {
    let pid: pid_t
    private var files: [Int32] = []

    init(pid: pid_t) {
        self.pid = pid
        refresh()
    }

    deinit { for fd in files { close(fd) } }

    func refresh() {
        for fd in files { close(fd) }
        files = []
        let base = "/proc/\(pid)/task"
        for task in (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? [] {
            let fd = open("\(base)/\(task)/schedstat", O_RDONLY | O_CLOEXEC)
            if fd >= 0 { files.append(fd) }
        }
    }

    /// Nanoseconds on CPU, summed over the threads.
    func read() -> UInt64 {
        var total: UInt64 = 0
        var buffer = [UInt8](repeating: 0, count: 96)
        for fd in files {
            let n = pread(fd, &buffer, buffer.count, 0)
            guard n > 0 else { continue }
            var value: UInt64 = 0
            for byte in buffer[0..<n] {
                guard byte >= 48 && byte <= 57 else { break }
                value = value &* 10 &+ UInt64(byte - 48)
            }
            total &+= value
        }
        return total
    }
}

// MARK: - Output

func microseconds(_ value: Double) -> String {
    if value.isNaN { return "–" }
    if value >= 10_000 { return String(format: "%.1f ms", value / 1_000) }
    if value >= 1_000 { return String(format: "%.2f ms", value / 1_000) }
    return String(format: "%.0f µs", value)
}

func mebibytes(_ kib: Int) -> String { String(format: "%.1f MiB", Double(kib) / 1_024) }

func grouped(_ n: Int) -> String {
    let digits = Array(String(n))
    var out = ""
    for (k, d) in digits.enumerated() {
        if k > 0 && (digits.count - k) % 3 == 0 { out.append(",") }
        out.append(d)
    }
    return out
}

func pad(_ s: String, _ width: Int, right: Bool = true) -> String {
    let n = s.count
    guard n < width else { return s }
    let fill = String(repeating: " ", count: width - n)
    return right ? fill + s : s + fill
}

func printTable(_ rows: [[String]], header: [String]) {
    let widths = header.indices.map { c in ([header] + rows).map { $0[c].count }.max() ?? 0 }
    func line(_ cells: [String]) -> String {
        cells.enumerated().map { pad($0.element, widths[$0.offset], right: $0.offset > 0) }.joined(separator: "  ")
    }
    print(line(header))
    print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
    for row in rows { print(line(row)) }
}

struct Verdict {
    var text: String
    var met: Bool?
}

func verdicts(_ results: [LevelResult]) -> [Verdict] {
    var out: [Verdict] = []
    if let worst = results.max(by: { $0.copy.latency.p50 < $1.copy.latency.p50 }) {
        out.append(
            Verdict(
                text:
                    "copy p50 ≤ 100 µs at every size: worst \(microseconds(worst.copy.latency.p50)) at \(grouped(worst.items))",
                met: worst.copy.latency.p50 <= 100))
    }
    if let first = results.first, let last = results.last, last.items > first.items {
        let ratio = last.copy.latency.p50 / first.copy.latency.p50
        out.append(
            Verdict(
                text: String(
                    format: "copy flat in item count, p50 %@ / %@ ≤ 1.5: %.2f×",
                    grouped(last.items), grouped(first.items), ratio), met: ratio <= 1.5))
        let addRatio = last.add.latency.p50 / first.add.latency.p50
        out.append(
            Verdict(
                text: String(
                    format: "add independent of item count, p50 %@ / %@: %.2f×",
                    grouped(last.items), grouped(first.items), addRatio), met: addRatio <= 1.5))
    }
    if let at10k = results.first(where: { $0.items == 10_000 }), let memory = at10k.memory {
        out.append(
            Verdict(
                text: "agent RSS at 10,000 items ≤ 30 MiB: VmRSS \(mebibytes(memory.rssKiB)), of which "
                    + "\(mebibytes(memory.databaseKiB)) mapped keychain.db pages, so \(mebibytes(memory.ownKiB)) the "
                    + "agent's own; VmHWM \(mebibytes(memory.hwmKiB))",
                met: Double(memory.ownKiB) <= 30 * 1_024))
    }
    return out
}

func report(_ results: [LevelResult], options: Options, machine: String, context: [String]) {
    print("")
    print(
        "latchkey end to end (SecItem → socket → latchkeyd → SQLite); \(options.ops) ops per kind and size, random keys"
    )
    for line in context { print("  " + line) }
    print("")
    let latencyRows: [[String]] = results.map { r in
        [
            grouped(r.items),
            r.filled > 0 ? String(format: "%.0f/s", r.fillThroughput) : "–",
            microseconds(r.add.latency.p50), microseconds(r.add.latency.p99),
            microseconds(r.copy.latency.p50), microseconds(r.copy.latency.p99),
            microseconds(r.update.latency.p50), microseconds(r.update.latency.p99),
            microseconds(r.delete.latency.p50), microseconds(r.delete.latency.p99),
            r.memory.map { mebibytes($0.rssKiB) } ?? "?", r.memory.map { mebibytes($0.databaseKiB) } ?? "?",
            r.memory.map { mebibytes($0.hwmKiB) } ?? "?", r.load,
        ]
    }
    printTable(
        latencyRows,
        header: [
            "items", "bulk add", "add p50", "add p99", "copy p50", "copy p99",
            "update p50", "update p99", "delete p50", "delete p99",
            "VmRSS", "of it mapped db", "VmHWM", "load 1/5/15 min",
        ])
    print("")
    print("Where the time goes, mean per operation: wall = client CPU + agent CPU + waiting (fsync, wake-ups)")
    var breakdownRows: [[String]] = []
    for r in results {
        for (name, b) in [
            ("bulk add", r.fillBreakdown), ("add", r.add.breakdown), ("copy", r.copy.breakdown),
            ("update", r.update.breakdown), ("delete", r.delete.breakdown),
            ("transport floor", r.roundTrip.breakdown),
        ] where !(name == "bulk add" && r.filled == 0) {
            breakdownRows.append([
                grouped(r.items), name, microseconds(b.wall), microseconds(b.client),
                microseconds(b.agent), microseconds(b.waiting),
            ])
        }
    }
    printTable(breakdownRows, header: ["items", "operation", "wall", "client CPU", "agent CPU", "waiting"])
    print("")
    print(
        "Transport floor (the same copy call for an unknown class, rejected by the agent's parser), a new"
            + " connection (connect, hello, close: the caller's identification), and store size:")
    printTable(
        results.map { r in
            [
                grouped(r.items), microseconds(r.roundTrip.latency.p50), microseconds(r.roundTrip.latency.p99),
                microseconds(r.copy.latency.p50 - r.roundTrip.latency.p50),
                microseconds(r.connection.latency.p50), microseconds(r.connection.latency.p99),
                mebibytes(r.databaseBytes / 1_024),
            ]
        },
        header: [
            "items", "floor p50", "floor p99", "copy p50 − floor p50", "connection p50", "connection p99",
            "keychain.db + wal",
        ])
    print("")
    print("Targets:")
    for v in verdicts(results) {
        print("  [\(v.met == true ? "met" : v.met == false ? "MISSED" : "?")] \(v.text)")
    }
    print(
        "  reference, gnome-keyring on this machine: search 106 µs at 100 items, 351 µs at 3,000;"
            + " add 4.6 ms at 100 items, 40 ms at 3,000")

    guard options.markdown else { return }
    print("")
    print(
        "| Items | Bulk add | Add p50 / p99 | Copy p50 / p99 | Update p50 / p99 | Delete p50 / p99 | Agent VmRSS (mapped db) / VmHWM |"
    )
    print(
        "|------:|---------:|--------------:|---------------:|-----------------:|-----------------:|--------------------:|"
    )
    for r in results {
        func pair(_ o: OperationResult) -> String { "\(microseconds(o.latency.p50)) / \(microseconds(o.latency.p99))" }
        let bulk = r.filled > 0 ? "\(grouped(Int(r.fillThroughput.rounded()))) items/s" : "–"
        let memory =
            r.memory.map { "\(mebibytes($0.rssKiB)) (\(mebibytes($0.databaseKiB))) / \(mebibytes($0.hwmKiB))" } ?? "?"
        print(
            "| \(grouped(r.items)) | \(bulk) | \(pair(r.add)) | \(pair(r.copy)) | \(pair(r.update)) | \(pair(r.delete)) | \(memory) |"
        )
    }
    print("")
    print(
        "<sub>\(machine); \(options.ops) operations per kind and size at random keys; "
            + "load average per size: \(results.map { "\(grouped($0.items)): \($0.load)" }.joined(separator: ", ")).</sub>"
    )
}

// MARK: - Main

let options = Options.parse(CommandLine.arguments)

// Stop the agent and remove the directories on Ctrl-C or SIGTERM too (the agent runs in its own session,
// so the terminal's SIGINT never reaches it).
signal(SIGINT, SIG_IGN)
signal(SIGTERM, SIG_IGN)
var signalSources: [DispatchSourceSignal] = []
for signalNumber in [SIGINT, SIGTERM] {
    let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
    source.setEventHandler { Cleanup.shared.interrupt() }
    source.resume()
    signalSources.append(source)
}

if let cpu = options.cpu {
    // Glibc's module hides sched_setaffinity and CPU_SET (_GNU_SOURCE); look the function up and pass
    // the mask (a cpu_set_t: 1,024 bits) by hand.
    typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> Int32
    var mask = [UInt64](repeating: 0, count: 16)
    guard cpu < mask.count * 64 else {
        fail("--cpu: \(cpu) is beyond the \(mask.count * 64) CPUs a cpu_set_t holds", code: 64)
    }
    mask[cpu / 64] |= UInt64(1) << UInt64(cpu % 64)
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "sched_setaffinity") else {
        fail("--cpu: no sched_setaffinity", code: 64)
    }
    let setAffinity = unsafeBitCast(symbol, to: SetAffinity.self)
    guard mask.withUnsafeBytes({ setAffinity(0, $0.count, $0.baseAddress!) }) == 0 else {
        fail("--cpu \(cpu): sched_setaffinity: \(String(cString: strerror(errno)))", code: 64)
    }
}

let baseDirectory =
    options.baseDirectory ?? ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
var template = Array((baseDirectory + "/latchkey-bench.XXXXXX").utf8CString)
guard let made = mkdtemp(&template) else {
    fail("cannot create a directory in \(baseDirectory): \(String(cString: strerror(errno)))")
}
let root = String(cString: made)
Cleanup.shared.register(directory: root)
let runtimeDirectory = root + "/run", dataDirectory = root + "/data"
for directory in [runtimeDirectory, dataDirectory] where mkdir(directory, 0o700) != 0 {
    fail("cannot create \(directory): \(String(cString: strerror(errno)))")
}
setenv("XDG_RUNTIME_DIR", runtimeDirectory, 1)
setenv("XDG_DATA_HOME", dataDirectory, 1)
let agentExecutable = ProcessInfo.processInfo.environment["LATCHKEYD"] ?? "(next to latchkey-bench, or on PATH)"

// Creating the keychain is the first call: the library starts the agent on demand. Weak Argon2id
// parameters keep set-up fast; key derivation is not what is measured.
do {
    try KeychainControl.create(
        password: SecretBytes(copying: Array("latchkey-bench".utf8)),
        options: .init(timeCost: 1, memoryKiB: 8_192, parallelism: 1, allowWeak: true))
} catch {
    fail(
        "cannot create the benchmark keychain (status \(error.status)): \(error.detail ?? "no detail"); agent: \(agentExecutable)"
    )
}
let socketPath = runtimeDirectory + "/latchkey/agent.sock"
guard let pid = listenerPID(socketPath: socketPath) else { fail("no agent listens on \(socketPath)") }
Cleanup.shared.register(agent: pid)
if let holder = lockHolderPID(lockPath: runtimeDirectory + "/latchkey/agent.lock"), holder != pid {
    fail("the socket's listener (pid \(pid)) is not the lock holder (pid \(holder))")
}

func fileSystem(of path: String) -> String {
    // The longest mount point containing `path`, from /proc/self/mounts.
    guard let mounts = readFile("/proc/self/mounts") else { return "?" }
    var best = ("", "?")
    for line in mounts.split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count >= 3 else { continue }
        let point = String(fields[1])
        if (path == point || path.hasPrefix(point == "/" ? "/" : point + "/")) && point.count >= best.0.count {
            best = (point, String(fields[2]))
        }
    }
    return best.1
}

let cpuModel =
    readFile("/proc/cpuinfo")?.split(separator: "\n").first(where: { $0.hasPrefix("model name") })
    .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "?" } ?? "?"
// What the figures depend on: the Markdown footnote carries this; the run's own paths and pid go to
// the readable output only.
#if DEBUG
    let configuration = "debug build (use scripts/bench for release figures)"
#else
    let configuration = "release build"
#endif
let machine =
    "\(sysconf(Int32(_SC_NPROCESSORS_ONLN))) CPUs (\(cpuModel)), \(configuration), keychain on \(fileSystem(of: root))"
    + " (synchronous=FULL: every write waits for fdatasync)"
    + (options.cpu.map { ", client and agent pinned to CPU \($0)" } ?? ", client and agent placed by the scheduler")
let context = [machine, "agent pid \(pid), directories \(root)"]
FileHandle.standardError.write(
    Data("latchkey-bench: agent pid \(pid) (\(agentExecutable)) in \(root); load \(loadAverage())\n".utf8))

func databaseBytes() -> Int {
    ["", "-wal"].reduce(0) { total, suffix in
        var st = stat()
        return total + (stat(dataDirectory + "/latchkey/keychain.db" + suffix, &st) == 0 ? Int(st.st_size) : 0)
    }
}

if options.keys {
    runKeyBenchmark(options: options, machine: machine)
    runTokenKeyBenchmark(options: options, machine: machine)
    Cleanup.shared.run()
    exit(0)
}

let workload = Workload(options: options, agentPID: pid)
if options.backup {
    runBackupBenchmark(options: options, machine: machine, workload: workload, agentPID: pid)
    Cleanup.shared.run()
    exit(0)
}
var results: [LevelResult] = []
for size in options.sizes {
    let loadBefore = loadAverage()
    FileHandle.standardError.write(
        Data("latchkey-bench: filling to \(grouped(size)) items (load \(loadBefore))…\n".utf8))
    let fill = workload.fill(to: size)
    FileHandle.standardError.write(Data("latchkey-bench: measuring at \(grouped(size)) items…\n".utf8))
    workload.warmUp()
    let m = workload.measureLevel()
    let memory = agentMemory(pid)
    results.append(
        LevelResult(
            items: size, filled: fill.items, fillSeconds: fill.seconds, fillBreakdown: fill.breakdown,
            add: workload.result(m.add), copy: workload.result(m.copy),
            update: workload.result(m.update), delete: workload.result(m.delete),
            roundTrip: workload.result(m.floor), connection: workload.result(m.connect),
            memory: memory, databaseBytes: databaseBytes(), load: loadAverage()))
}

report(results, options: options, machine: machine, context: context)
Cleanup.shared.run()
