public import Foundation
import Harness
import XCTest

/// QR codes read as a user's reader would: an image of the modules, drawn here from what the
/// gateway showed (an SVG's path, a terminal's half blocks), decoded by `zbarimg` (zbar-tools,
/// installed by Scripts/bootstrap.sh for the tests), a decoder that shares nothing with
/// libqrencode, which drew them. Rows of modules are `[[Bool]]`, true for dark.
public enum QRReader {
    /// Where zbarimg is, or why the test skips (a failure under CI, where it must be installed).
    public static func zbarimg() throws -> String {
        if let path = try? findExecutable("zbarimg") { return path }
        let why = "zbarimg missing: run Scripts/bootstrap.sh (zbar-tools) to read the QR codes back"
        if ProcessInfo.processInfo.environment["CI"] == "true" { throw ProcessError(why) }
        throw XCTSkip(why)
    }

    /// What zbarimg reads in the image of `rows`: one text per code found (none: empty).
    public static func decode(_ rows: [[Bool]]) async throws -> [String] {
        let zbarimg = try zbarimg()
        let directory = try TemporaryDirectory(prefix: "qr-read")
        defer { directory.remove() }
        let image = directory.file("code.pgm")
        try pgm(rows).write(to: URL(fileURLWithPath: image))
        let result = try await runProcess(zbarimg, ["--quiet", "--raw", "-Sdisable", "-Sqrcode.enable", image])
        // zbarimg exits 4 when it found no code; that is an empty answer, not an error.
        guard result.status == 0 || result.status == 4 else {
            throw ProcessError("zbarimg exited \(result.status): \(result.standardError)")
        }
        return result.standardOutput.split(separator: "\n").map(String.init)
    }

    /// A binary PGM (P5) of `rows`, each module `scale` pixels square, black on white, with a
    /// white border of 4 modules beyond whatever quiet zone the rows already have.
    public static func pgm(_ rows: [[Bool]], scale: Int = 6) -> Data {
        let width = (rows.map(\.count).max() ?? 0) + 8
        let height = rows.count + 8
        var pixels = [UInt8](repeating: 255, count: width * scale * height * scale)
        for (y, row) in rows.enumerated() {
            for (x, dark) in row.enumerated() where dark {
                for dy in 0..<scale {
                    let start = ((y + 4) * scale + dy) * width * scale + (x + 4) * scale
                    for dx in 0..<scale { pixels[start + dx] = 0 }
                }
            }
        }
        return Data("P5\n\(width * scale) \(height * scale)\n255\n".utf8) + Data(pixels)
    }

    /// The modules an SVG of the gateway's draws: its `viewBox` side, and each `M x y h n v 1
    /// h -n z` run of its path made dark. Fails on any other path command, so that a change
    /// of the drawing is seen here rather than read wrongly.
    public static func modules(svg: String) throws -> [[Bool]] {
        guard let box = svg.firstMatch(of: /viewBox="0 0 (\d+) (\d+)"/), let side = Int(box.output.1),
            Int(box.output.2) == side
        else { throw ProcessError("no square viewBox in the SVG: \(svg.prefix(200))") }
        guard let path = svg.firstMatch(of: /<path[^>]* d="([^"]*)"/)?.output.1 else {
            throw ProcessError("no path in the SVG")
        }
        var rows = [[Bool]](repeating: [Bool](repeating: false, count: side), count: side)
        var rest = Substring(path)
        while !rest.isEmpty {
            guard let run = rest.prefixMatch(of: /M(\d+) (\d+)h(\d+)v1h-(\d+)z/),
                let x = Int(run.output.1), let y = Int(run.output.2), let n = Int(run.output.3),
                run.output.4 == run.output.3, y < side, x + n <= side
            else { throw ProcessError("unexpected path data at '\(rest.prefix(40))'") }
            for column in x..<(x + n) { rows[y][column] = true }
            rest = rest[run.range.upperBound...]
        }
        return rows
    }

    /// The modules a terminal shows for `text`: two rows per line from `▀`, `▄`, `█` and
    /// spaces. `darkDrawn`: the characters draw the dark modules (black on a white background
    /// set by ANSI colours, whose escape sequences are dropped); otherwise they draw the light
    /// ones, as in a dark terminal. Lines that are not all half blocks (the text around, blank
    /// lines) are left out.
    public static func modules(terminal text: String, darkDrawn: Bool) -> [[Bool]] {
        let blocks: Set<Character> = ["▀", "▄", "█", " "]
        var rows: [[Bool]] = []
        for line in text.split(separator: "\n") {
            let plain = line.replacing(/\x1B\[[0-9;]*m/, with: "")
            // A line of spaces is the code's only inside colours (the quiet zone, black on white).
            let coloured = plain.count != line.count
            guard !plain.isEmpty, plain.allSatisfy(blocks.contains), coloured || plain.contains(where: { $0 != " " })
            else { continue }
            var top: [Bool] = []
            var bottom: [Bool] = []
            for character in plain {
                let drawnTop = character == "▀" || character == "█"
                let drawnBottom = character == "▄" || character == "█"
                top.append(darkDrawn ? drawnTop : !drawnTop)
                bottom.append(darkDrawn ? drawnBottom : !drawnBottom)
            }
            rows += [top, bottom]
        }
        return rows
    }
}
