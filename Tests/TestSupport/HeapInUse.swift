import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Bytes malloc has handed out and not had back, in every arena and in the chunks it mapped on
/// their own, from glibc's `malloc_info` (which Swift's Glibc module leaves out: looked up by
/// name). Exact to the chunk, where the process's RSS moves by pages and keeps what was freed.
/// Chunks a thread keeps in its cache (tcache, at most 7 of each size) count as in use.
public enum HeapInUse {
    /// Nil where glibc's `malloc_info` is not there (another C library, macOS).
    public static func bytes() -> Int? {
        #if canImport(Glibc)
            typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
            guard let symbol = dlsym(nil, "malloc_info") else { return nil }
            var buffer: UnsafeMutablePointer<CChar>? = nil
            var length = 0
            guard let stream = open_memstream(&buffer, &length) else { return nil }
            let status = unsafeBitCast(symbol, to: MallocInfo.self)(0, stream)
            fclose(stream)
            defer { free(buffer) }
            guard status == 0, let buffer else { return nil }
            // After the last heap come the process's totals: the free chunks (`fast`, and `rest`,
            // which counts the top chunk), the chunks mapped on their own, and the arenas' size.
            let text = String(cString: buffer)
            guard let end = text.range(of: "</heap>", options: .backwards) else { return nil }
            let totals = text[end.upperBound...]
            func total(_ tag: String, _ type: String) -> Int? {
                guard let at = totals.range(of: "<\(tag) type=\"\(type)\"") else { return nil }
                let rest = totals[at.upperBound...]
                guard let open = rest.range(of: "size=\""),
                    let close = rest[open.upperBound...].firstIndex(of: "\"")
                else { return nil }
                return Int(rest[open.upperBound..<close])
            }
            guard let fast = total("total", "fast"), let unused = total("total", "rest"),
                let mapped = total("total", "mmap"), let arenas = total("system", "current")
            else { return nil }
            return arenas - fast - unused + mapped
        #else
            return nil
        #endif
    }
}
