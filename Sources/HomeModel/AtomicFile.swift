public import Foundation
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// Crash-safe writes of the state directory's files (AtomicFileWriter), and the flock that keeps
// two writers apart (FileLock).

/// A step of an atomic file replacement, in order. A `WriteHook` is called before each one.
public enum WriteStep: Sendable, Hashable {
    case createTemporary
    /// Writing `count` bytes at `offset` of the temporary file.
    case write(offset: Int, count: Int)
    case syncFile
    case closeFile
    case rename
    case syncDirectory
}

/// Called before each step. Throwing stops the write right there, as if the process had died:
/// nothing is cleaned up (a crash cleans up nothing either). Tests use it to prove that a write
/// interrupted anywhere leaves the old or the new file, never a broken one.
public typealias WriteHook = @Sendable (WriteStep) throws -> Void

/// The one way the gateway writes a file: the home database, HAP pairings, the run-time scope.
/// A temporary file in the same directory is written, fsynced, renamed over the target, then
/// the directory is fsynced so the rename itself is durable. Files are mode 0600 and the
/// directories it creates 0700, whatever the umask: the state directory holds pairing keys and
/// the home's layout, which are nobody else's business.
public struct AtomicFileWriter: Sendable {
    public static let fileMode: mode_t = 0o600
    public static let directoryMode: mode_t = 0o700

    var chunkSize = 64 * 1024
    var hook: WriteHook?

    public init() {}

    /// For tests: `hook` runs before each step, `chunkSize` splits the bytes.
    init(chunkSize: Int = 64 * 1024, hook: WriteHook? = nil) {
        self.chunkSize = chunkSize
        self.hook = hook
    }

    static func temporaryPrefix(for url: URL) -> String { url.lastPathComponent + ".tmp-" }

    public func write(_ data: Data, to url: URL) throws(ModelError) {
        try write(Array(data), to: url)
    }

    /// Replaces `url` with `bytes`, creating its directory (0700) when it is missing.
    public func write(_ bytes: [UInt8], to url: URL) throws(ModelError) {
        try write(to: url) { (stream: inout Stream) throws(ModelError) in try stream.append(bytes) }
    }

    /// The temporary file being written: what `body` appends goes out a chunk at a time, so a
    /// large file (the record of owned topics at 10,000 accessories) is never whole in memory.
    public struct Stream {
        fileprivate let fd: Int32
        fileprivate let temp: String
        fileprivate let writer: AtomicFileWriter
        fileprivate var buffer: [UInt8] = []
        fileprivate var offset = 0
        /// A hook stopped the write (a test's "crash"): the temporary stays, as after a crash.
        fileprivate var crashed = false

        /// Appends bytes, writing each full chunk: this never leaves more than a chunk in the
        /// buffer, however large `bytes` is (a text or a JSON string may add its own length).
        public mutating func append(_ bytes: some Collection<UInt8>) throws(ModelError) {
            var rest = bytes[...]
            while !rest.isEmpty {
                let piece = rest.prefix(writer.chunkSize - buffer.count)
                buffer.append(contentsOf: piece)
                rest = rest[piece.endIndex...]
                try flush(whole: false)
            }
        }

        /// Appends a text's bytes. Most appends are a few bytes of a literal (`",".utf8`): the
        /// generic path's chunking, unspecialised in the modules that call it, looked up generic
        /// metadata for each, a tenth of writing the record of owned topics at 10,000
        /// accessories. The same chunks are written; only a text longer than a chunk takes the
        /// generic path, so that the buffer stays within a chunk and a text.
        public mutating func append(_ text: String.UTF8View) throws(ModelError) {
            guard text.count <= writer.chunkSize else { return try append(text[...]) }
            buffer.append(contentsOf: text)
            try flush(whole: false)
        }

        /// Appends `text` as a JSON string, quoted and escaped.
        public mutating func appendJSONString(_ text: String) throws(ModelError) {
            JSONValue.appendString(text, to: &buffer)
            try flush(whole: false)
        }

        /// Writes the buffer's full chunks, or all of it (`whole`, at the end).
        fileprivate mutating func flush(whole: Bool) throws(ModelError) {
            var start = 0
            while buffer.count - start >= writer.chunkSize || (whole && start < buffer.count) {
                let count = min(writer.chunkSize, buffer.count - start)
                do { try writer.step(.write(offset: offset, count: count)) } catch {
                    crashed = true
                    throw error
                }
                var done = 0
                while done < count {
                    let n = buffer.withUnsafeBytes { bytes in
                        posixWrite(fd, bytes.baseAddress.map { $0 + start + done }, count - done)
                    }
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw AtomicFileWriter.ioError("write \(temp)")
                    }
                    done += n
                }
                offset += count
                start += count
            }
            if start > 0 { buffer.removeFirst(start) }
        }
    }

    /// Replaces `url` with what `body` appends to the stream, creating its directory (0700) when
    /// it is missing. A failure of `body` leaves the old file.
    public func write(to url: URL, _ body: (inout Stream) throws(ModelError) -> Void) throws(ModelError) {
        let directory = url.deletingLastPathComponent().path
        let temp = directory + "/" + Self.temporaryPrefix(for: url) + "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try step(.createTemporary)
        var fd = posixOpen(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, Self.fileMode)
        if fd < 0 && errno == ENOENT {
            try Self.createDirectory(url.deletingLastPathComponent())
            fd = posixOpen(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, Self.fileMode)
        }
        guard fd >= 0 else { throw Self.ioError("create \(temp)") }
        var isOpen = true
        // I/O failures clean up; a hook's "crash" does not (see WriteHook).
        func fail(_ error: ModelError) -> ModelError {
            if isOpen { close(fd) }
            unlink(temp)
            return error
        }
        // open's mode is filtered by the umask; 0600 is meant whatever the umask is.
        guard fchmod(fd, Self.fileMode) == 0 else { throw fail(Self.ioError("set the mode of \(temp)")) }
        var stream = Stream(fd: fd, temp: temp, writer: self)
        do {
            try body(&stream)
            try stream.flush(whole: true)
        } catch {
            // A hook's "crash" leaves the temporary as a crash would; anything else removes it.
            if stream.crashed {
                close(fd)
                throw error
            }
            throw fail(error)
        }
        do { try step(.syncFile) } catch { close(fd); throw error }
        guard fsync(fd) == 0 else { throw fail(Self.ioError("fsync \(temp)")) }
        do { try step(.closeFile) } catch { close(fd); throw error }
        isOpen = false
        guard close(fd) == 0 else { throw fail(Self.ioError("close \(temp)")) }
        try step(.rename)
        guard rename(temp, url.path) == 0 else { throw fail(Self.ioError("rename \(temp) to \(url.path)")) }
        try step(.syncDirectory)
        try Self.syncDirectory(directory)
    }

    /// Makes the renames in `directory` durable.
    public static func syncDirectory(_ directory: String) throws(ModelError) {
        let dfd = posixOpen(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else { throw ioError("open directory \(directory)") }
        defer { close(dfd) }
        guard fsync(dfd) == 0 else { throw ioError("fsync directory \(directory)") }
    }

    /// Creates `directory` and any missing parent, each mode 0700 whatever the umask. A
    /// directory that exists is left as it is: its mode is its owner's choice.
    public static func createDirectory(_ directory: URL) throws(ModelError) {
        let path = directory.standardizedFileURL.path
        var info = stat()
        if stat(path, &info) == 0 {
            guard info.st_mode & mode_t(S_IFMT) == mode_t(S_IFDIR) else {
                throw ModelError(
                    code: .io, message: "could not create the directory \(path): a file of that name is in the way")
            }
            return
        }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty && parent != path { try createDirectory(URL(fileURLWithPath: parent)) }
        if mkdir(path, directoryMode) != 0 {
            // Another process may have made it since the stat.
            if errno == EEXIST { return }
            throw ioError("create the directory \(path)")
        }
        guard chmod(path, directoryMode) == 0 else { throw ioError("set the mode of \(path)") }
    }

    fileprivate func step(_ s: WriteStep) throws(ModelError) {
        guard let hook else { return }
        do {
            try hook(s)
        } catch let error as ModelError {
            throw error
        } catch {
            throw ModelError(code: .writeInterrupted, message: "write interrupted at \(s): \(error)")
        }
    }

    /// Removes temporaries a crashed writer left behind.
    static func removeStaleTemporaries(for url: URL) {
        let directory = url.deletingLastPathComponent()
        let prefix = temporaryPrefix(for: url)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names where name.hasPrefix(prefix) {
            unlink(directory.appendingPathComponent(name).path)
        }
    }

    static func ioError(_ what: String) -> ModelError {
        let reason = String(cString: strerror(errno))
        return ModelError(code: .io, message: "could not \(what): \(reason)")
    }
}

// File-scope wrappers: inside AtomicFileWriter, `write` and `open` would name its own members.
private func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    write(fd, buffer, count)
}

private func posixOpen(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
    open(path, flags, mode)
}

/// An exclusive `flock` on a file, held while the object lives. flock locks belong to the open
/// file, so a second lock in the same process is refused just as one in another process is.
final class FileLock: Sendable {
    let fd: Int32
    let path: String

    init(path: String) throws(ModelError) {
        self.path = path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, AtomicFileWriter.fileMode)
        guard fd >= 0 else { throw AtomicFileWriter.ioError("open lock file \(path)") }
        // Like every file in the state directory, whatever the umask. Best effort: a lock file
        // another user made stays as it is, and locks just the same.
        _ = fchmod(fd, AtomicFileWriter.fileMode)
        // A lock just released can stay held for a moment when this process spawns a child at
        // that instant (the child shares the open file until its exec closes it), so a busy
        // lock is tried again for a quarter of a second before it counts as held.
        var attempts = 0
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            let busy = errno == EWOULDBLOCK || errno == EAGAIN
            if busy && attempts < 25 {
                attempts += 1
                usleep(10_000)
                continue
            }
            let error =
                busy
                ? ModelError(
                    code: .locked, message: "the home database is in use by another process (\(path) is locked)")
                : AtomicFileWriter.ioError("lock \(path)")
            close(fd)
            throw error
        }
        self.fd = fd
    }

    deinit {
        // Closing the descriptor releases the lock.
        close(fd)
    }
}
