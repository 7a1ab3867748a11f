#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Page-locked memory for `SecretBytes`, locked once per slab and never unlocked while in use.
///
/// `mlock`/`munlock` work on whole pages and do not nest: when two small secrets share a page,
/// `munlock` for one of them unlocks the page under the other. Allocating each secret with `malloc`
/// and locking it individually therefore let a short-lived item key unlock the page of a long-lived
/// class key. Here, secrets up to 4 KiB come from slabs of their size class that are mapped, locked
/// and excluded from core dumps once, and only ever recycled; larger ones get a mapping of their own,
/// which `munmap` releases with its lock. It is also cheaper: no system call per secret.
final class LockedArena: @unchecked Sendable {
    static let shared = LockedArena()

    /// Chunk sizes; a request takes the smallest that fits.
    private static let sizeClasses = [32, 64, 128, 256, 512, 1024, 2048, 4096]
    private static let slabBytes = 16 * 1024

    private var mutex = pthread_mutex_t()
    /// Free chunks per size class, linked through their first word (chunks are wiped before reuse).
    private var freeLists: [UnsafeMutableRawPointer?]
    /// Whether every mapping so far could be locked.
    private(set) var allLocked = true

    private init() {
        pthread_mutex_init(&mutex, nil)
        freeLists = Array(repeating: nil, count: LockedArena.sizeClasses.count)
    }

    /// A zeroed chunk of at least `byteCount` bytes, and whether it is locked in memory.
    func allocate(byteCount: Int) -> (pointer: UnsafeMutableRawPointer, capacity: Int, locked: Bool) {
        guard let index = LockedArena.sizeClasses.firstIndex(where: { $0 >= byteCount }) else {
            let size = roundedToPages(byteCount)
            let (pointer, locked) = map(size)
            return (pointer, size, locked)
        }
        let size = LockedArena.sizeClasses[index]
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        if freeLists[index] == nil { addSlab(index: index, chunkSize: size) }
        let chunk = freeLists[index]!
        freeLists[index] = chunk.load(as: UnsafeMutableRawPointer?.self)
        chunk.storeBytes(of: nil, as: UnsafeMutableRawPointer?.self)  // zero the link word again
        return (chunk, size, allLocked)
    }

    /// Returns a chunk; the caller has wiped it.
    func deallocate(_ pointer: UnsafeMutableRawPointer, capacity: Int) {
        guard let index = LockedArena.sizeClasses.firstIndex(of: capacity) else {
            munmap(pointer, capacity)
            return
        }
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        pointer.storeBytes(of: freeLists[index], as: UnsafeMutableRawPointer?.self)
        freeLists[index] = pointer
    }

    private func addSlab(index: Int, chunkSize: Int) {
        let (slab, _) = map(LockedArena.slabBytes)
        var next: UnsafeMutableRawPointer? = freeLists[index]
        for offset in stride(from: LockedArena.slabBytes - chunkSize, through: 0, by: -chunkSize) {
            let chunk = slab + offset
            chunk.storeBytes(of: next, as: UnsafeMutableRawPointer?.self)
            next = chunk
        }
        freeLists[index] = next
    }

    /// A fresh private anonymous mapping (zero-filled by the kernel), locked and kept out of core
    /// dumps where the system allows.
    private func map(_ size: Int) -> (UnsafeMutableRawPointer, Bool) {
        guard let raw = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              raw != MAP_FAILED else {
            fatalError("LockedArena: mmap of \(size) bytes failed (errno \(errno))")
        }
        #if canImport(Glibc)
        _ = madvise(raw, size, MADV_DONTDUMP)
        #endif
        let locked = mlock(raw, size) == 0
        if !locked { allLocked = false }
        return (raw, locked)
    }

    private func roundedToPages(_ byteCount: Int) -> Int {
        let page = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)
        return (max(byteCount, 1) + page - 1) / page * page
    }
}
