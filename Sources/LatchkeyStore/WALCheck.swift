import CSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads a database's write-ahead log before SQLite does, to refuse a damaged one (docs/STORE.md, "The
/// write-ahead log").
///
/// SQLite reads a WAL up to the first frame whose salts or cumulative checksum do not check out and
/// treats everything from there on as never written: a WAL whose header is damaged counts as empty, and
/// one damaged frame drops every transaction committed after it. The next write then starts the WAL
/// again over the dropped frames, and closing the database deletes it. So a damaged WAL would lose the
/// changes it holds without a word; this tells damage from what crashes and normal work leave behind,
/// before SQLite has a chance to overwrite anything.
///
/// The format (https://www.sqlite.org/fileformat2.html#walformat): a 32-byte header (magic 0x377f0682
/// or 0x377f0683, whose last bit says in which byte order the checksums read the file's 32-bit words,
/// format version 3007000, page size, checkpoint sequence, two salts, two checksum words over the first
/// 24 bytes), then frames of a 24-byte header (page number, database size after a commit or 0, the two
/// salts, two checksum words) and one page. A frame's checksum continues from the previous frame's (the
/// header's for the first) over the first 8 bytes of its header and its page.
enum WALCheck {
    /// What a scan of a WAL found.
    struct Scan: Equatable {
        /// Whether the header is a valid WAL header (false also for a file shorter than a header).
        var headerIsValid = false
        /// Frames from the first one that SQLite accepts.
        var validFrames = 0
        /// Whole frames that carry the header's salts and a commit mark, after the first frame SQLite
        /// would not accept.
        var commitsAfterTheBreak = 0
        /// Whole frames in the file.
        var frames = 0
        /// Bytes in the file.
        var size = 0

        /// Why this WAL is damaged, or nil when SQLite may open it without losing a committed change.
        ///
        /// - A file shorter than a header holds no frame: a crash while the header was written.
        /// - A whole header that is not valid: damage (SQLite writes it in one piece, and would take
        ///   the WAL for empty).
        /// - Frames that stop checking out: SQLite writes them one after the other and syncs at each
        ///   commit, so a crash can leave the frame it was writing torn (short at the end of the file,
        ///   or a new header over an older frame), the frames of the transaction it was committing out
        ///   of step (SQLite rewrites their checksums last when the transaction wrote a page twice), and
        ///   frames of a rolled-back transaction behind the last commit, none of them a commit. Two
        ///   commits after the break mean a transaction was committed, and synced, after the frame that
        ///   no longer checks out was written: that frame was damaged afterwards.
        var damage: String? {
            if size < WALCheck.headerSize { return nil }
            if !headerIsValid { return "its header is not a valid WAL header" }
            if commitsAfterTheBreak >= 2 {
                return "frame \(validFrames + 1) of \(frames) does not check out, and \(commitsAfterTheBreak) "
                    + "transactions were committed after it"
            }
            return nil
        }
    }

    static let headerSize = 32
    static let frameHeaderSize = 24

    /// Throws `.damagedWAL` when the WAL beside `databasePath` is damaged; returns when there is none or
    /// it may be opened. Never writes.
    static func check(databasePath: String) throws {
        let path = databasePath + "-wal"
        guard let scan = try scan(path: path) else { return }
        if let damage = scan.damage { throw StoreError.damagedWAL(path: path, reason: damage) }
    }

    /// Reads the WAL at `path`; nil if there is none.
    static func scan(path: String) throws -> Scan? {
        // O_NOFOLLOW and O_NONBLOCK: a symbolic link or a FIFO planted there is refused, never followed
        // or waited on.
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 {
            let code = errno
            if code == ENOENT { return nil }
            if code == ELOOP { throw StoreError.damagedWAL(path: path, reason: "it is a symbolic link") }
            throw StoreError.sqlite(
                code: SQLITE_IOERR, message: "\(path): cannot be read: \(String(cString: strerror(code)))", sql: nil)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw StoreError.sqlite(code: SQLITE_IOERR, message: "\(path): cannot be read", sql: nil)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw StoreError.damagedWAL(path: path, reason: "it is not a regular file")
        }
        return try scan(WALFile(fd: fd, path: path, size: Int(info.st_size)))
    }

    private static func scan(_ file: WALFile) throws -> Scan {
        var result = Scan(size: file.size)
        guard file.size >= headerSize else { return result }
        let header = try file.read(at: 0, count: headerSize)
        let magic = header.bigEndian(at: 0), pageSize = Int(header.bigEndian(at: 8))
        guard magic & 0xFFFF_FFFE == 0x377F_0682, header.bigEndian(at: 4) == 3_007_000,
            pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0
        else { return result }
        let bigEndianWords = magic & 1 == 1
        let headerSum = checksum(header[0..<24], seed: (0, 0), bigEndianWords: bigEndianWords)
        guard headerSum == (header.bigEndian(at: 24), header.bigEndian(at: 28)) else { return result }
        result.headerIsValid = true

        let salts = header[16..<24]
        let frameSize = frameHeaderSize + pageSize
        var running = headerSum
        var broken = false
        var offset = headerSize
        while offset + frameSize <= file.size {
            let frame = try file.read(at: offset, count: frameSize)
            let currentSalts = frame[8..<16].elementsEqual(salts)
            if !broken {
                var sum = checksum(frame[0..<8], seed: running, bigEndianWords: bigEndianWords)
                sum = checksum(frame[frameHeaderSize...], seed: sum, bigEndianWords: bigEndianWords)
                if currentSalts, frame.bigEndian(at: 0) != 0, sum == (frame.bigEndian(at: 16), frame.bigEndian(at: 20))
                {
                    result.validFrames += 1
                    running = sum
                } else {
                    broken = true
                }
            } else if currentSalts, frame.bigEndian(at: 4) != 0 {
                result.commitsAfterTheBreak += 1
            }
            result.frames += 1
            offset += frameSize
        }
        return result
    }

    /// SQLite's WAL checksum: two 32-bit sums over pairs of words, continuing from `seed`.
    static func checksum(_ bytes: ArraySlice<UInt8>, seed: (UInt32, UInt32), bigEndianWords: Bool) -> (UInt32, UInt32) {
        var (s0, s1) = seed
        bytes.withUnsafeBytes { raw in
            var at = 0
            while at + 8 <= raw.count {
                var x0 = raw.loadUnaligned(fromByteOffset: at, as: UInt32.self)
                var x1 = raw.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self)
                if bigEndianWords {
                    x0 = UInt32(bigEndian: x0)
                    x1 = UInt32(bigEndian: x1)
                } else {
                    x0 = UInt32(littleEndian: x0)
                    x1 = UInt32(littleEndian: x1)
                }
                s0 = s0 &+ x0 &+ s1
                s1 = s1 &+ x1 &+ s0
                at += 8
            }
        }
        return (s0, s1)
    }
}

/// A WAL file open for reading.
private struct WALFile {
    let fd: Int32
    let path: String
    let size: Int

    func read(at offset: Int, count: Int) throws -> ArraySlice<UInt8> {
        var buffer = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = buffer.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress! + done, count - done, off_t(offset + done))
            }
            if n < 0 && errno == EINTR { continue }
            // The file shrank while it was read: whoever did that is not this process, so say so.
            guard n > 0 else {
                throw StoreError.sqlite(code: SQLITE_IOERR, message: "\(path): changed while it was read", sql: nil)
            }
            done += n
        }
        return buffer[...]
    }
}

extension ArraySlice<UInt8> {
    /// The big-endian 32-bit integer at `offset` from the slice's start.
    fileprivate func bigEndian(at offset: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(self[startIndex + offset + $1]) }
    }
}
