import CP11Kit
import LatchkeySecrets

/// One loaded PKCS#11 module and the calls latchkey makes to it. Only its `ModuleWorker`'s thread calls
/// these (docs/TOKENS.md, "Threads"); every size a module reports is capped before anything is allocated,
/// since a module is outside code whose answers are not trusted to be small.
final class PKCS11Module: @unchecked Sendable {
    /// The largest attribute value read (a certificate, a modulus, an EC point).
    static let maximumAttributeSize = 16 * 1024
    /// The most objects of one class read from one token.
    static let maximumObjects = 256
    /// The most slots looked at in one module.
    static let maximumSlots = 64
    /// PKCS#11's CK_UNAVAILABLE_INFORMATION, (CK_ULONG) -1: a macro with a cast, which Swift does not import.
    static let unavailableInformation = CK_ULONG.max
    /// The largest result of an operation (an RSA-16384 block is 2 KiB).
    static let maximumOutputSize = 4096

    let functions: UnsafeMutablePointer<CK_FUNCTION_LIST>
    /// How the module is known in token ids and logs: p11-kit's module name, or the file's name.
    let name: String

    init(functions: UnsafeMutablePointer<CK_FUNCTION_LIST>, name: String) {
        self.functions = functions
        self.name = name
    }

    struct Failure: Error, Sendable {
        var rv: CK_RV
        var call: String
    }

    private func check(_ rv: CK_RV, _ call: String) throws(Failure) {
        guard rv == CKR_OK else { throw Failure(rv: rv, call: call) }
    }

    /// The slots with a token present.
    func slotsWithTokens() throws(Failure) -> [CK_SLOT_ID] {
        guard let getSlotList = functions.pointee.C_GetSlotList else {
            throw Failure(rv: CKR_GENERAL_ERROR, call: "C_GetSlotList")
        }
        var count: CK_ULONG = 0
        try check(getSlotList(CK_BBOOL(CK_TRUE), nil, &count), "C_GetSlotList")
        guard count > 0 else { return [] }
        guard count <= CK_ULONG(Self.maximumSlots) else {
            throw Failure(rv: CKR_GENERAL_ERROR, call: "C_GetSlotList (too many slots)")
        }
        var slots = [CK_SLOT_ID](repeating: 0, count: Int(count))
        try check(getSlotList(CK_BBOOL(CK_TRUE), &slots, &count), "C_GetSlotList")
        return Array(slots.prefix(min(Int(count), slots.count)))
    }

    struct TokenInfo: Sendable, Equatable {
        var label: String
        var manufacturer: String
        var model: String
        var serial: String
        var flags: CK_FLAGS

        var isInitialized: Bool { flags & CK_FLAGS(CKF_TOKEN_INITIALIZED) != 0 }
        var needsLogin: Bool { flags & CK_FLAGS(CKF_LOGIN_REQUIRED) != 0 }
        var pinLocked: Bool { flags & CK_FLAGS(CKF_USER_PIN_LOCKED) != 0 }
        /// A wrong PIN was entered since the last good login (`CKF_USER_PIN_COUNT_LOW`), this is the last
        /// try (`CKF_USER_PIN_FINAL_TRY`), or the PIN is locked.
        var pinTriesSpent: Bool {
            flags & CK_FLAGS(CKF_USER_PIN_COUNT_LOW | CKF_USER_PIN_FINAL_TRY | CKF_USER_PIN_LOCKED) != 0
        }
        var protectedAuthenticationPath: Bool { flags & CK_FLAGS(CKF_PROTECTED_AUTHENTICATION_PATH) != 0 }
    }

    func tokenInfo(_ slot: CK_SLOT_ID) throws(Failure) -> TokenInfo {
        guard let getTokenInfo = functions.pointee.C_GetTokenInfo else {
            throw Failure(rv: CKR_GENERAL_ERROR, call: "C_GetTokenInfo")
        }
        var info = CK_TOKEN_INFO()
        try check(getTokenInfo(slot, &info), "C_GetTokenInfo")
        return TokenInfo(
            label: Self.padded(info.label), manufacturer: Self.padded(info.manufacturerID),
            model: Self.padded(info.model), serial: Self.padded(info.serialNumber), flags: info.flags)
    }

    /// A blank-padded PKCS#11 text field as a string (invalid UTF-8 replaced, trailing blanks dropped).
    private static func padded<T>(_ field: T) -> String {
        withUnsafeBytes(of: field) { bytes in
            var text = String(decoding: bytes, as: UTF8.self)
            while text.last == " " || text.last == "\0" { text.removeLast() }
            return text
        }
    }

    func openSession(_ slot: CK_SLOT_ID) throws(Failure) -> CK_SESSION_HANDLE {
        guard let openSession = functions.pointee.C_OpenSession else {
            throw Failure(rv: CKR_GENERAL_ERROR, call: "C_OpenSession")
        }
        var session: CK_SESSION_HANDLE = 0
        try check(openSession(slot, CK_FLAGS(CKF_SERIAL_SESSION), nil, nil, &session), "C_OpenSession")
        return session
    }

    /// A read-write session, for making objects (C_GenerateKeyPair); closed by the caller.
    func openReadWriteSession(_ slot: CK_SLOT_ID) throws(Failure) -> CK_SESSION_HANDLE {
        guard let openSession = functions.pointee.C_OpenSession else {
            throw Failure(rv: CKR_GENERAL_ERROR, call: "C_OpenSession")
        }
        var session: CK_SESSION_HANDLE = 0
        try check(openSession(slot, CK_FLAGS(CKF_SERIAL_SESSION | CKF_RW_SESSION), nil, nil, &session), "C_OpenSession")
        return session
    }

    /// C_GenerateKeyPair with the two templates (type and value bytes each): the new objects' handles.
    func generateKeyPair(
        _ session: CK_SESSION_HANDLE, mechanism type: CK_MECHANISM_TYPE, publicTemplate: [(CK_ATTRIBUTE_TYPE, [UInt8])],
        privateTemplate: [(CK_ATTRIBUTE_TYPE, [UInt8])]
    ) throws(Failure) -> (publicKey: CK_OBJECT_HANDLE, privateKey: CK_OBJECT_HANDLE) {
        guard let generate = functions.pointee.C_GenerateKeyPair else {
            throw Failure(rv: CKR_FUNCTION_NOT_SUPPORTED, call: "C_GenerateKeyPair")
        }
        var mechanism = CK_MECHANISM(mechanism: type, pParameter: nil, ulParameterLen: 0)
        var publicKey: CK_OBJECT_HANDLE = 0
        var privateKey: CK_OBJECT_HANDLE = 0
        let rv = Self.withTemplate(publicTemplate.map(\.0), publicTemplate.map(\.1)) { publicAttributes, publicCount in
            Self.withTemplate(privateTemplate.map(\.0), privateTemplate.map(\.1)) { privateAttributes, privateCount in
                generate(
                    session, &mechanism, publicAttributes, publicCount, privateAttributes, privateCount, &publicKey,
                    &privateKey)
            }
        }
        try check(rv, "C_GenerateKeyPair")
        return (publicKey, privateKey)
    }

    /// Calls `body` with a template whose values point into one buffer that lives for the call.
    static func withTemplate<R>(
        _ types: [CK_ATTRIBUTE_TYPE], _ values: [[UInt8]], _ body: (UnsafeMutablePointer<CK_ATTRIBUTE>, CK_ULONG) -> R
    ) -> R {
        var storage = values.flatMap { $0 }
        if storage.isEmpty { storage = [0] }
        return storage.withUnsafeMutableBytes { raw in
            var offset = 0
            var template: [CK_ATTRIBUTE] = []
            for (index, value) in values.enumerated() {
                template.append(
                    CK_ATTRIBUTE(
                        type: types[index], pValue: raw.baseAddress! + offset, ulValueLen: CK_ULONG(value.count)))
                offset += value.count
            }
            return template.withUnsafeMutableBufferPointer { body($0.baseAddress!, CK_ULONG($0.count)) }
        }
    }

    func closeSession(_ session: CK_SESSION_HANDLE) {
        _ = functions.pointee.C_CloseSession?(session)
    }

    /// Whether the session's user is logged in (a PIN was given on this token since it was inserted).
    func isLoggedIn(_ session: CK_SESSION_HANDLE) throws(Failure) -> Bool {
        guard let getSessionInfo = functions.pointee.C_GetSessionInfo else {
            throw Failure(rv: CKR_GENERAL_ERROR, call: "C_GetSessionInfo")
        }
        var info = CK_SESSION_INFO()
        try check(getSessionInfo(session, &info), "C_GetSessionInfo")
        return info.state == CK_STATE(CKS_RO_USER_FUNCTIONS) || info.state == CK_STATE(CKS_RW_USER_FUNCTIONS)
    }

    /// C_Login as the user (or, for a key that asks for it on every use, `CKU_CONTEXT_SPECIFIC`). The PIN's
    /// bytes are read in place; the caller wipes them.
    func login(_ session: CK_SESSION_HANDLE, pin: UnsafeRawBufferPointer, contextSpecific: Bool) -> CK_RV {
        guard let login = functions.pointee.C_Login else { return CKR_GENERAL_ERROR }
        let user = CK_USER_TYPE(contextSpecific ? CKU_CONTEXT_SPECIFIC : CKU_USER)
        return login(
            session, user, UnsafeMutablePointer(mutating: pin.bindMemory(to: CK_UTF8CHAR.self).baseAddress),
            CK_ULONG(pin.count))
    }

    /// C_Login on a token with its own PIN pad (`CKF_PROTECTED_AUTHENTICATION_PATH`): no PIN passes here.
    func loginOnPinPad(_ session: CK_SESSION_HANDLE) -> CK_RV {
        functions.pointee.C_Login?(session, CK_USER_TYPE(CKU_USER), nil, 0) ?? CKR_GENERAL_ERROR
    }

    func logout(_ session: CK_SESSION_HANDLE) {
        _ = functions.pointee.C_Logout?(session)
    }

    /// C_WaitForSlotEvent: with `block` false, a first sign of whether the module reports slot events
    /// (`CKR_NO_EVENT` or `CKR_OK`; SoftHSM2 says `CKR_NO_EVENT` there yet refuses the blocking call); with
    /// `block` true, the wait for the next insertion or removal, made by the slot-event thread alone, which
    /// p11-kit allows beside the module's own thread (it initialises modules with `CKF_OS_LOCKING_OK`;
    /// docs/TOKENS.md, "The watcher"). The slot it names is not used: a look reads every slot.
    func waitForSlotEvent(block: Bool) -> CK_RV {
        guard let wait = functions.pointee.C_WaitForSlotEvent else { return CKR_FUNCTION_NOT_SUPPORTED }
        var slot: CK_SLOT_ID = 0
        return wait(block ? 0 : CK_FLAGS(CKF_DONT_BLOCK), &slot, nil)
    }

    /// The handles of the objects of `objectClass` (at most `maximumObjects`).
    func objects(_ session: CK_SESSION_HANDLE, objectClass: CK_OBJECT_CLASS) throws(Failure) -> [CK_OBJECT_HANDLE] {
        let table = functions.pointee
        guard let initFind = table.C_FindObjectsInit, let find = table.C_FindObjects,
            let final = table.C_FindObjectsFinal
        else { throw Failure(rv: CKR_GENERAL_ERROR, call: "C_FindObjects") }
        var wanted = objectClass
        let rv = withUnsafeMutablePointer(to: &wanted) { pointer -> CK_RV in
            var template = CK_ATTRIBUTE(
                type: CK_ATTRIBUTE_TYPE(CKA_CLASS), pValue: UnsafeMutableRawPointer(pointer),
                ulValueLen: CK_ULONG(MemoryLayout<CK_OBJECT_CLASS>.size))
            return initFind(session, &template, 1)
        }
        try check(rv, "C_FindObjectsInit")
        defer { _ = final(session) }
        var handles = [CK_OBJECT_HANDLE](repeating: 0, count: Self.maximumObjects)
        var count: CK_ULONG = 0
        try check(find(session, &handles, CK_ULONG(Self.maximumObjects), &count), "C_FindObjects")
        return Array(handles.prefix(min(Int(count), Self.maximumObjects)))
    }

    /// Whether any object of the token has `ckaID` (its private ones only once the user is logged in).
    func hasObject(_ session: CK_SESSION_HANDLE, ckaID: [UInt8]) throws(Failure) -> Bool {
        let table = functions.pointee
        guard let initFind = table.C_FindObjectsInit, let find = table.C_FindObjects,
            let final = table.C_FindObjectsFinal
        else { throw Failure(rv: CKR_GENERAL_ERROR, call: "C_FindObjects") }
        var id = ckaID
        let rv = id.withUnsafeMutableBytes { idBytes -> CK_RV in
            var template = CK_ATTRIBUTE(
                type: CK_ATTRIBUTE_TYPE(CKA_ID), pValue: idBytes.baseAddress, ulValueLen: CK_ULONG(idBytes.count))
            return initFind(session, &template, 1)
        }
        try check(rv, "C_FindObjectsInit")
        defer { _ = final(session) }
        var handle: CK_OBJECT_HANDLE = 0
        var count: CK_ULONG = 0
        try check(find(session, &handle, 1, &count), "C_FindObjects")
        return count > 0
    }

    /// The private key with `ckaID` (visible once the user is logged in); nil when there is none.
    func privateKey(_ session: CK_SESSION_HANDLE, ckaID: [UInt8]) -> CK_OBJECT_HANDLE? {
        let table = functions.pointee
        guard !ckaID.isEmpty, let initFind = table.C_FindObjectsInit, let find = table.C_FindObjects,
            let final = table.C_FindObjectsFinal
        else { return nil }
        var wanted = CK_OBJECT_CLASS(CKO_PRIVATE_KEY)
        var id = ckaID
        let rv = withUnsafeMutablePointer(to: &wanted) { classPointer in
            id.withUnsafeMutableBytes { idBytes -> CK_RV in
                var template = [
                    CK_ATTRIBUTE(
                        type: CK_ATTRIBUTE_TYPE(CKA_CLASS), pValue: UnsafeMutableRawPointer(classPointer),
                        ulValueLen: CK_ULONG(MemoryLayout<CK_OBJECT_CLASS>.size)),
                    CK_ATTRIBUTE(
                        type: CK_ATTRIBUTE_TYPE(CKA_ID), pValue: idBytes.baseAddress,
                        ulValueLen: CK_ULONG(idBytes.count)),
                ]
                return initFind(session, &template, 2)
            }
        }
        guard rv == CKR_OK else { return nil }
        defer { _ = final(session) }
        var handle: CK_OBJECT_HANDLE = 0
        var count: CK_ULONG = 0
        guard find(session, &handle, 1, &count) == CKR_OK, count == 1 else { return nil }
        return handle
    }

    /// One attribute's value; nil when the object has no such attribute, it is sensitive, or it is larger
    /// than `maximumAttributeSize`. Never asked for a private key's CKA_VALUE (keys never leave the card).
    func attribute(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ type: CK_ATTRIBUTE_TYPE) -> [UInt8]? {
        guard let getAttributeValue = functions.pointee.C_GetAttributeValue else { return nil }
        var template = CK_ATTRIBUTE(type: type, pValue: nil, ulValueLen: 0)
        guard getAttributeValue(session, object, &template, 1) == CKR_OK,
            template.ulValueLen != Self.unavailableInformation,
            template.ulValueLen <= CK_ULONG(Self.maximumAttributeSize)
        else { return nil }
        let size = Int(template.ulValueLen)
        var value = [UInt8](repeating: 0, count: size)
        let rv = value.withUnsafeMutableBytes { buffer -> CK_RV in
            template.pValue = buffer.baseAddress
            template.ulValueLen = CK_ULONG(size)
            return getAttributeValue(session, object, &template, 1)
        }
        guard rv == CKR_OK, template.ulValueLen <= CK_ULONG(size) else { return nil }
        return Array(value.prefix(Int(template.ulValueLen)))
    }

    /// A CK_BBOOL attribute; `otherwise` when absent.
    func flag(
        _ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ type: CK_ATTRIBUTE_TYPE, otherwise: Bool = false
    ) -> Bool {
        guard let value = attribute(session, object, type), value.count == 1 else { return otherwise }
        return value[0] != 0
    }

    /// A CK_ULONG attribute.
    func number(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ type: CK_ATTRIBUTE_TYPE) -> CK_ULONG? {
        guard let value = attribute(session, object, type), value.count == MemoryLayout<CK_ULONG>.size else {
            return nil
        }
        return value.withUnsafeBytes { $0.loadUnaligned(as: CK_ULONG.self) }
    }

    /// Runs one single-part operation (C_SignInit + C_Sign, C_DecryptInit + C_Decrypt): the output, or the
    /// module's error. `login` runs between the init and the operation, for a key that needs its PIN on
    /// every use (`CKA_ALWAYS_AUTHENTICATE`); its error ends the operation.
    func singlePart(
        _ kind: SinglePart, _ session: CK_SESSION_HANDLE, key: CK_OBJECT_HANDLE, mechanism: inout CK_MECHANISM,
        input: [UInt8], login: (() -> CK_RV)? = nil
    ) -> Result<[UInt8], Failure> {
        let table = functions.pointee
        let initialise: CK_C_SignInit?
        let run: CK_C_Sign?
        switch kind {
        case .sign:
            initialise = table.C_SignInit
            run = table.C_Sign
        case .decrypt:
            initialise = table.C_DecryptInit
            run = table.C_Decrypt
        }
        guard let initialise, let run else { return .failure(Failure(rv: CKR_FUNCTION_NOT_SUPPORTED, call: "\(kind)")) }
        var rv = initialise(session, &mechanism, key)
        guard rv == CKR_OK else { return .failure(Failure(rv: rv, call: "C_\(kind)Init")) }
        if let login {
            rv = login()
            guard rv == CKR_OK else {
                // End the operation the init began: a call with a too-small buffer would not.
                var none: CK_ULONG = 0
                var scratch = input
                _ = scratch.withUnsafeMutableBufferPointer {
                    run(session, $0.baseAddress, CK_ULONG($0.count), nil, &none)
                }
                return .failure(Failure(rv: rv, call: "C_Login"))
            }
        }
        var output = [UInt8](repeating: 0, count: Self.maximumOutputSize)
        var outputLength = CK_ULONG(Self.maximumOutputSize)
        var data = input
        rv = data.withUnsafeMutableBufferPointer { inputBuffer in
            output.withUnsafeMutableBufferPointer { outputBuffer in
                run(
                    session, inputBuffer.baseAddress, CK_ULONG(inputBuffer.count), outputBuffer.baseAddress,
                    &outputLength)
            }
        }
        guard rv == CKR_OK, outputLength <= CK_ULONG(Self.maximumOutputSize) else {
            SecretBytes.wipe(&output)
            return .failure(Failure(rv: rv == CKR_OK ? CKR_GENERAL_ERROR : rv, call: "C_\(kind)"))
        }
        let result = Array(output.prefix(Int(outputLength)))
        // The output of a decryption is a secret: the buffer is wiped, the caller owns the copy.
        SecretBytes.wipe(&output)
        SecretBytes.wipe(&data)
        return .success(result)
    }

    enum SinglePart: CustomStringConvertible {
        case sign, decrypt
        var description: String { self == .sign ? "Sign" : "Decrypt" }
    }
}
