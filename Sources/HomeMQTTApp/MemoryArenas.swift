import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension HomeMQTTApp {
    /// glibc's `M_ARENA_MAX` (malloc.h, which the Glibc module leaves out).
    private static let arenaMaxParameter: Int32 = -8

    /// Makes glibc's allocator keep one arena for the whole process; called first by a gateway
    /// process (`homemqtt run`, the bench's gateway). By default every thread that allocates
    /// gets an arena of its own, up to eight per core, and memory one arena frees is never
    /// reused by another: a start-up that loads accessory files on every core and then builds
    /// the topic tree elsewhere keeps both. Set here, one arena peaked 285–288 MB at 10,000
    /// accessories against 292–295 MB (three alternated pairs) and 72 MB at 1,000 against 74–75,
    /// in no more time; a gateway serves on one or two threads, which rarely contend for it.
    /// A thread that allocated before this call keeps its arena, and later threads share it with
    /// the main one, so it must come before anything is awaited, on the main thread
    /// (`HomeMQTT.main`, `BenchEntry.main`). `MALLOC_ARENA_MAX` in the environment, which glibc
    /// applies first, wins here.
    public static func useOneMemoryArena() {
        #if canImport(Glibc)
            guard ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil, let symbol = dlsym(nil, "mallopt")
            else { return }
            let mallopt = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
            _ = mallopt(arenaMaxParameter, 1)
        #endif
    }
}
