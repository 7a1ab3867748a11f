internal import CArgon2
internal import CKeybagLimits
import LatchkeySecrets

/// Argon2id cost parameters, stored in the keybag header (docs/KEYBAG.md).
package struct Argon2Parameters: Sendable, Equatable, Codable {
    /// Number of passes over memory (`t`).
    package var timeCost: UInt32
    /// Memory in KiB (`m`).
    package var memoryKiB: UInt32
    /// Lanes and threads (`p`). Part of the result: the same password with a different `p` gives a
    /// different key, so it is stored, not chosen per machine.
    package var parallelism: UInt32

    /// Parameters for new keybags: 256 MiB, 2 passes, 2 lanes. Measured at 0.27–0.35 s on the
    /// 2-core reference machine (docs/KEYBAG.md, "Argon2id parameters"), inside the 0.2–0.5 s budget
    /// for a derivation and leaving a login (pam_latchkey) well under 0.6 s, with memory four times
    /// the 64 MiB floor.
    package static let `default` = Argon2Parameters(timeCost: 2, memoryKiB: 262_144, parallelism: 2)

    // The limits come from pam/keybag_limits.h, which pam_latchkey compiles too: one definition, so the
    // agent and the module never disagree about which keybag they derive from (docs/KEYBAG.md).

    /// The least memory `Keybag.create` accepts unless weak parameters are explicitly allowed
    /// (64 MiB, RFC 9106's second recommended option). `validate()` itself only enforces what
    /// libargon2 needs, so tests can use cheap parameters.
    package static let minimumMemoryKiB = UInt32(LK_MIN_CREATE_MEMORY_KIB)

    /// Largest memory `validate()` accepts (4 GiB): more would make a stored keybag impossible to
    /// open on ordinary machines, which is indistinguishable from data loss.
    package static let maximumMemoryKiB = UInt32(LK_MAX_MEMORY_KIB)

    /// Largest parallelism `validate()` accepts.
    package static let maximumParallelism = UInt32(LK_MAX_LANES)

    /// The most passes any derivation runs (16). With the two below, the derivation limits: the
    /// parameters come from a file anything running as the user can write, and a derivation cannot be
    /// interrupted, so nothing beyond them is ever derived (`checkDerivationLimits()`).
    package static let maximumDerivationTimeCost = UInt32(LK_PAM_MAX_T)
    /// The most memory any derivation takes (1 GiB).
    package static let maximumDerivationMemoryKiB = UInt32(LK_PAM_MAX_M_KIB)
    /// The most lanes any derivation uses (8).
    package static let maximumDerivationParallelism = UInt32(LK_PAM_MAX_P)

    /// Parameters as given; call `validate()` before use.
    package init(timeCost: UInt32, memoryKiB: UInt32, parallelism: UInt32) {
        self.timeCost = timeCost
        self.memoryKiB = memoryKiB
        self.parallelism = parallelism
    }

    /// Rejects parameters libargon2 cannot run or that no sane keybag would contain: `timeCost` 0,
    /// `parallelism` 0 or above 16, memory below 8 KiB per lane (Argon2's own minimum) or above 4 GiB.
    /// Throws `CryptoError.invalidInput`. Does not apply the 64 MiB creation floor, nor the derivation
    /// limits (a keybag beyond them is intact, only refused).
    package func validate() throws {
        guard timeCost >= UInt32(LK_MIN_T) else {
            throw CryptoError.invalidInput("Argon2 time cost must be at least 1")
        }
        guard parallelism >= 1, parallelism <= Self.maximumParallelism else {
            throw CryptoError.invalidInput("Argon2 parallelism must be 1...\(Self.maximumParallelism)")
        }
        guard UInt64(memoryKiB) >= UInt64(LK_MIN_KIB_PER_LANE) * UInt64(parallelism) else {
            throw CryptoError.invalidInput("Argon2 memory must be at least 8 KiB per lane")
        }
        guard memoryKiB <= Self.maximumMemoryKiB else {
            throw CryptoError.invalidInput("Argon2 memory must be at most 4 GiB")
        }
    }

    /// Whether a derivation with these parameters stays within the derivation limits.
    package var isWithinDerivationLimits: Bool {
        timeCost <= Self.maximumDerivationTimeCost && memoryKiB <= Self.maximumDerivationMemoryKiB
            && parallelism <= Self.maximumDerivationParallelism
    }

    /// The derivation limits, as a sentence for error messages.
    package static let derivationLimitsText =
        "t ≤ \(maximumDerivationTimeCost), m ≤ \(maximumDerivationMemoryKiB) KiB, p ≤ \(maximumDerivationParallelism)"

    /// Throws `CryptoError.invalidInput` for parameters beyond the derivation limits.
    package func checkDerivationLimits() throws {
        guard isWithinDerivationLimits else {
            throw CryptoError.invalidInput(
                "Argon2 parameters t=\(timeCost) m=\(memoryKiB) KiB p=\(parallelism) beyond the limits "
                    + "(\(Self.derivationLimitsText))")
        }
    }
}

/// Argon2id (RFC 9106, version 0x13) through libargon2.
package enum Argon2id {
    /// Derives `length` bytes from `password` and `salt` (at least 8 bytes) into wiping storage.
    /// The password bytes are used as given, with no normalisation. Slow by design.
    package static func deriveKey(
        password: SecretBytes, salt: [UInt8], parameters: Argon2Parameters,
        length: Int = 32
    ) throws -> SecretBytes {
        try derive(
            password: password, salt: salt, secret: [], associatedData: [], parameters: parameters, length: length)
    }

    /// Full Argon2id with the optional secret and associated data inputs. Not public because the
    /// keybag does not use them; it exists so the RFC 9106 test vector (which sets both) exercises
    /// the same code path as `deriveKey`.
    ///
    /// Uses `argon2_ctx` with an explicit version 0x13 rather than `argon2id_hash_raw`, which is the
    /// same computation but has no secret/ad arguments.
    static func derive(
        password: SecretBytes, salt: [UInt8], secret: [UInt8], associatedData: [UInt8],
        parameters: Argon2Parameters, length: Int
    ) throws -> SecretBytes {
        try parameters.validate()
        // libargon2 cannot be interrupted once it runs: the limits are what bound a derivation.
        try parameters.checkDerivationLimits()
        guard length >= 4, length <= Int(UInt32.max) else {
            throw CryptoError.invalidInput("Argon2 output length out of range")
        }
        guard salt.count >= 8, salt.count <= Int(UInt32.max) else {
            throw CryptoError.invalidInput("Argon2 salt must be at least 8 bytes")
        }
        guard password.count <= Int(UInt32.max) else { throw CryptoError.invalidInput("Argon2 password too long") }

        let output = SecretBytes(count: length)
        var salt = salt
        var secret = secret
        var associatedData = associatedData
        defer { SecretBytes.wipe(&secret) }
        let code: Int32 = password.withUnsafeBytes { pwd in
            output.withUnsafeMutableBytes { out in
                salt.withUnsafeMutableBufferPointer { saltBuffer in
                    secret.withUnsafeMutableBufferPointer { secretBuffer in
                        associatedData.withUnsafeMutableBufferPointer { adBuffer in
                            var context = argon2_context()
                            context.out = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
                            context.outlen = UInt32(length)
                            // libargon2 only writes the password when ARGON2_FLAG_CLEAR_PASSWORD is
                            // set, which it is not; the mutable cast is for its C signature.
                            context.pwd = UnsafeMutablePointer(
                                mutating: pwd.baseAddress!.assumingMemoryBound(to: UInt8.self))
                            context.pwdlen = UInt32(pwd.count)
                            context.salt = saltBuffer.baseAddress
                            context.saltlen = UInt32(saltBuffer.count)
                            context.secret = secretBuffer.count > 0 ? secretBuffer.baseAddress : nil
                            context.secretlen = UInt32(secretBuffer.count)
                            context.ad = adBuffer.count > 0 ? adBuffer.baseAddress : nil
                            context.adlen = UInt32(adBuffer.count)
                            context.t_cost = parameters.timeCost
                            context.m_cost = parameters.memoryKiB
                            context.lanes = parameters.parallelism
                            context.threads = parameters.parallelism
                            context.version = UInt32(ARGON2_VERSION_13.rawValue)
                            context.allocate_cbk = nil
                            context.free_cbk = nil
                            context.flags = 0  // ARGON2_DEFAULT_FLAGS (its UINT32_C form does not import into Swift)
                            return argon2_ctx(&context, Argon2_id)
                        }
                    }
                }
            }
        }
        guard code == ARGON2_OK.rawValue else {
            // argon2_error_message describes the failure class ("Memory allocation error"); never data.
            let message = argon2_error_message(code).map { String(cString: $0) } ?? "unknown error"
            throw CryptoError.argon2(code: code, message: message)
        }
        return output
    }
}
