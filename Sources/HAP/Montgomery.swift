import BigInt

/// Modular exponentiation modulo SRP's 3072-bit N with Montgomery multiplication on fixed
/// 64-bit limbs. BigUInt's generic `power(_:modulus:)` takes seconds per pairing in debug
/// builds; this keeps pair-setup fast enough for tests and small gateways alike.
struct MontgomeryModulus: Sendable {
    let n: [UInt64]
    let count: Int
    let n0inv: UInt64
    let r2: [UInt64]
    let modulus: BigUInt

    init(_ modulus: BigUInt) {
        self.modulus = modulus
        let limbs = modulus.words.map { UInt64($0) }
        n = limbs
        count = limbs.count
        // Newton's iteration for n[0]^-1 mod 2^64 (n is odd).
        var x: UInt64 = 1
        for _ in 0..<7 { x = x &* (2 &- limbs[0] &* x) }
        n0inv = 0 &- x
        let r2Big = (BigUInt(1) << (128 * limbs.count)) % modulus
        r2 = Self.limbs(r2Big, count: limbs.count)
    }

    static func limbs(_ v: BigUInt, count: Int) -> [UInt64] {
        var out = [UInt64](repeating: 0, count: count)
        for (i, w) in v.words.enumerated() where i < count { out[i] = UInt64(w) }
        return out
    }

    /// a·b·R⁻¹ mod n (CIOS).
    func mul(_ a: [UInt64], _ b: [UInt64]) -> [UInt64] {
        let L = count
        var t = [UInt64](repeating: 0, count: L + 2)
        t.withUnsafeMutableBufferPointer { t in
            a.withUnsafeBufferPointer { a in
                b.withUnsafeBufferPointer { b in
                    n.withUnsafeBufferPointer { n in
                        for i in 0..<L {
                            var carry: UInt64 = 0
                            let bi = b[i]
                            for j in 0..<L {
                                let p = a[j].multipliedFullWidth(by: bi)
                                let (s1, o1) = t[j].addingReportingOverflow(p.low)
                                let (s2, o2) = s1.addingReportingOverflow(carry)
                                t[j] = s2
                                carry = p.high &+ (o1 ? 1 : 0) &+ (o2 ? 1 : 0)
                            }
                            let (s, o) = t[L].addingReportingOverflow(carry)
                            t[L] = s
                            t[L + 1] = o ? 1 : 0
                            let m = t[0] &* n0inv
                            let p0 = m.multipliedFullWidth(by: n[0])
                            let (_, o0) = t[0].addingReportingOverflow(p0.low)
                            carry = p0.high &+ (o0 ? 1 : 0)
                            for j in 1..<L {
                                let p = m.multipliedFullWidth(by: n[j])
                                let (s1, o1) = t[j].addingReportingOverflow(p.low)
                                let (s2, o2) = s1.addingReportingOverflow(carry)
                                t[j - 1] = s2
                                carry = p.high &+ (o1 ? 1 : 0) &+ (o2 ? 1 : 0)
                            }
                            let (s3, o3) = t[L].addingReportingOverflow(carry)
                            t[L - 1] = s3
                            t[L] = t[L + 1] &+ (o3 ? 1 : 0)
                        }
                    }
                }
            }
        }
        var result = Array(t[0..<L])
        if t[L] != 0 || !Self.less(result, n) {
            var borrow = false
            for j in 0..<L {
                let (d1, b1) = result[j].subtractingReportingOverflow(n[j])
                let (d2, b2) = d1.subtractingReportingOverflow(borrow ? 1 : 0)
                result[j] = d2
                borrow = b1 || b2
            }
        }
        return result
    }

    static func less(_ a: [UInt64], _ b: [UInt64]) -> Bool {
        var i = a.count - 1
        while i >= 0 {
            if a[i] != b[i] { return a[i] < b[i] }
            i -= 1
        }
        return false
    }

    /// base^exponent mod n.
    func power(_ base: BigUInt, _ exponent: BigUInt) -> BigUInt {
        let b = mul(Self.limbs(base % modulus, count: count), r2)
        var one = [UInt64](repeating: 0, count: count)
        one[0] = 1
        var acc = mul(one, r2)
        let bits = exponent.bitWidth
        var i = bits - 1
        while i >= 0 {
            acc = mul(acc, acc)
            if exponent[bitAt: i] { acc = mul(acc, b) }
            i -= 1
        }
        let plain = mul(acc, one)
        return BigUInt(words: plain.map { UInt($0) })
    }
}
