/// The fuzz targets this executable holds; `LATCHKEY_FUZZ_TARGET` chooses one for libFuzzer.
package enum FuzzTarget: String, CaseIterable, Sendable {
    /// Bytes a client sends the agent: `FrameTarget`.
    case frames
    /// One SecItem dictionary in the value encoding: `ParserTarget`.
    case dictionaries
    /// A backup file, or the plaintext of its chunk: `BackupTarget`.
    case backups

    /// Runs one input through the target.
    package func run(_ input: [UInt8]) -> FuzzOutcome {
        switch self {
        case .frames: FrameTarget.run(input)
        case .dictionaries: ParserTarget.run(input)
        case .backups: BackupTarget.run(input)
        }
    }

    /// The seed inputs (`Seeds`), by name.
    package var seeds: [(name: String, bytes: [UInt8])] {
        switch self {
        case .frames: Seeds.frames
        case .dictionaries: Seeds.dictionaries
        case .backups: BackupTarget.seeds
        }
    }
}
