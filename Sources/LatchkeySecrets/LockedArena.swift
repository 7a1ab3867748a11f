import LatchkeySystem

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
///
/// Hand-written on purpose, not a general allocator: chunks are recycled only within this arena and
/// wiped by `SecretBytes` before they come back, and mappings are never returned to the system while a
/// slab might hold a secret.
final class LockedArena: Sendable {
    static let shared = LockedArena()

    /// Chunk sizes; a request takes the smallest that fits.
    private static let sizeClasses = [32, 64, 128, 256, 512, 1024, 2048, 4096]
    private static let slabBytes = 16 * 1024

    /// A chunk's address. Raw pointers are not Sendable; these point into the arena's own mappings, and a
    /// chunk is held by one `SecretBytes` at a time or sits in a free list, which only the mutex reaches.
    private struct Chunk: @unchecked Sendable {
        let pointer: UnsafeMutableRawPointer
        init(_ pointer: UnsafeMutableRawPointer) { self.pointer = pointer }
    }

    private struct State {
        /// The first free chunk per size class; the rest are linked through their first word (chunks are
        /// wiped before reuse).
        var freeLists: [Chunk?] = Array(repeating: nil, count: LockedArena.sizeClasses.count)
        /// Whether every mapping so far could be locked.
        var allLocked = true
    }

    private let state = Locked(State())

    private init() {}

    /// A zeroed chunk of at least `byteCount` bytes, and whether it is locked in memory.
    func allocate(byteCount: Int) -> (pointer: UnsafeMutableRawPointer, capacity: Int, locked: Bool) {
        guard let index = LockedArena.sizeClasses.firstIndex(where: { $0 >= byteCount }) else {
            let size = roundedToPages(byteCount)
            let (pointer, locked) = map(size)
            if !locked { state.withLock { $0.allLocked = false } }
            return (pointer, size, locked)
        }
        let size = LockedArena.sizeClasses[index]
        return state.withLock { state in
            if state.freeLists[index] == nil { addSlab(to: &state, index: index, chunkSize: size) }
            let chunk = state.freeLists[index]!.pointer
            state.freeLists[index] = chunk.load(as: UnsafeMutableRawPointer?.self).map(Chunk.init)
            chunk.storeBytes(of: nil, as: UnsafeMutableRawPointer?.self)  // zero the link word again
            return (chunk, size, state.allLocked)
        }
    }

    /// Returns a chunk; the caller has wiped it.
    func deallocate(_ pointer: UnsafeMutableRawPointer, capacity: Int) {
        guard let index = LockedArena.sizeClasses.firstIndex(of: capacity) else {
            munmap(pointer, capacity)
            return
        }
        let chunk = Chunk(pointer)
        state.withLock { state in
            chunk.pointer.storeBytes(of: state.freeLists[index]?.pointer, as: UnsafeMutableRawPointer?.self)
            state.freeLists[index] = chunk
        }
    }

    private func addSlab(to state: inout State, index: Int, chunkSize: Int) {
        let (slab, locked) = map(LockedArena.slabBytes)
        if !locked { state.allLocked = false }
        var next: UnsafeMutableRawPointer? = state.freeLists[index]?.pointer
        for offset in stride(from: LockedArena.slabBytes - chunkSize, through: 0, by: -chunkSize) {
            let chunk = slab + offset
            chunk.storeBytes(of: next, as: UnsafeMutableRawPointer?.self)
            next = chunk
        }
        state.freeLists[index] = next.map(Chunk.init)
    }

    /// A fresh private anonymous mapping (zero-filled by the kernel), and whether it could be locked in
    /// memory; it is kept out of core dumps where the system allows.
    private func map(_ size: Int) -> (UnsafeMutableRawPointer, Bool) {
        guard let raw = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            raw != MAP_FAILED
        else {
            fatalError("LockedArena: mmap of \(size) bytes failed (errno \(errno))")
        }
        #if canImport(Glibc)
            _ = madvise(raw, size, MADV_DONTDUMP)
        #endif
        return (raw, mlock(raw, size) == 0)
    }

    private func roundedToPages(_ byteCount: Int) -> Int {
        let page = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)
        return (max(byteCount, 1) + page - 1) / page * page
    }
}
