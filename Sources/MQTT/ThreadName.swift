import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The calling thread's name, as the system knows it.
public enum ThreadName {
    /// Names the calling thread for the system (`top -H`, debuggers, `/proc`) as well as for
    /// Foundation. swift-corelibs-foundation passes a name on to the system thread only once
    /// `start()` has recorded which thread it started, which the new thread can outrun; and
    /// Glibc's module does not export `pthread_setname_np`. So the name is written to
    /// `/proc/thread-self/comm`, which takes at most 15 bytes (a longer name is cut).
    public static func set(_ name: String) {
        Thread.current.name = name
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// The calling thread's name as the system knows it (`/proc/thread-self/comm`).
    public static var current: String {
        guard let text = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8) else { return "" }
        return text.trimmingCharacters(in: .newlines)
    }
}
